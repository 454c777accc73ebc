package lock

import (
	"container/heap"
	"sync"
	"time"

	"github.com/asterforge/aster/lease"
)

// maxWatchdogDelay bounds how long after its acquisition a lock with a
// lease of its own gets its watchdog: a lock released before then never
// has one, which makes a short critical section cost its two store writes
// and little else. The delay is at most a quarter of the renew period, so
// the watchdog is running well before the first renewal is due (it renews
// at the acquisition's send time plus the period, however late it starts).
const maxWatchdogDelay = 100 * time.Millisecond

// watchdogDelay is how long after its acquisition a lock kept with cfg
// gets its watchdog.
func watchdogDelay(cfg lease.Config) time.Duration {
	return min(maxWatchdogDelay, lease.RenewPeriod(cfg.EffectiveRenewInterval(), cfg.EffectiveTTL())/4)
}

// pending holds the guards whose watchdog has not been started yet, by
// when it is due, and one timer for the earliest.
type pending struct {
	mu     sync.Mutex
	h      pendingHeap
	timer  *time.Timer
	armed  time.Time // when the timer fires; zero when stopped
	closed bool      // Close took every pending guard
}

// pendingGuard is a guard waiting for its watchdog.
type pendingGuard struct {
	g   *Guard
	cfg lease.Config
	due time.Time
	i   int // index in the heap; -1 once out
}

type pendingHeap []*pendingGuard

func (h pendingHeap) Len() int           { return len(h) }
func (h pendingHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h pendingHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *pendingHeap) Push(x any) {
	p := x.(*pendingGuard)
	p.i = len(*h)
	*h = append(*h, p)
}
func (h *pendingHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	p.i = -1
	return p
}

// deferWatchdog adds g, whose watchdog is due after watchdogDelay. It
// reports false once Close has taken the pending guards.
func (l *Locker) deferWatchdog(g *Guard, cfg lease.Config) bool {
	p := &l.pending
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	pg := &pendingGuard{g: g, cfg: cfg, due: time.Now().Add(watchdogDelay(cfg))}
	heap.Push(&p.h, pg)
	g.pend = pg
	l.armPending()
	return true
}

// armPending sets the timer for the earliest pending guard. p.mu must be
// held.
func (l *Locker) armPending() {
	p := &l.pending
	if len(p.h) == 0 {
		return
	}
	due := p.h[0].due
	if !p.armed.IsZero() && !due.Before(p.armed) {
		return
	}
	p.armed = due
	d := max(time.Until(due), 0)
	if p.timer == nil {
		p.timer = time.AfterFunc(d, l.startDue)
	} else {
		p.timer.Reset(d)
	}
}

// startDue hands the keeper the guards whose watchdog is due. A guard the
// keeper cannot take (Close has started) stays pending, for Close.
func (l *Locker) startDue() {
	p := &l.pending
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = time.Time{}
	now := time.Now()
	for len(p.h) > 0 && !p.h[0].due.After(now) {
		pg := p.h[0]
		if !l.sendKeeper(spawnWatchdog{g: pg.g, cfg: pg.cfg}) {
			return // closing: Close releases the pending guards
		}
		heap.Pop(&p.h)
		pg.g.pend = nil
	}
	l.armPending()
}

// startNow starts g's watchdog at once if it is still pending (an Extend
// needs it), and reports false when Close has taken it.
func (l *Locker) startNow(g *Guard) bool {
	p := &l.pending
	p.mu.Lock()
	defer p.mu.Unlock()
	pg := g.pend
	if pg == nil {
		return true // started already (or taken by Close, which the keeper then tells)
	}
	if !l.sendKeeper(spawnWatchdog{g: g, cfg: pg.cfg}) {
		return false
	}
	heap.Remove(&p.h, pg.i)
	g.pend = nil
	return true
}

// unpend takes g out of the pending guards, for its release: it reports
// true when g had no watchdog (none will start, and no renewal was ever
// sent).
func (l *Locker) unpend(g *Guard) bool {
	p := &l.pending
	p.mu.Lock()
	defer p.mu.Unlock()
	pg := g.pend
	if pg == nil {
		return false
	}
	heap.Remove(&p.h, pg.i)
	g.pend = nil
	return true
}

// closePending takes every pending guard, for Close; none is added after.
func (l *Locker) closePending() []*Guard {
	p := &l.pending
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	out := make([]*Guard, 0, len(p.h))
	for _, pg := range p.h {
		pg.g.pend = nil
		pg.i = -1
		out = append(out, pg.g)
	}
	p.h = nil
	return out
}
