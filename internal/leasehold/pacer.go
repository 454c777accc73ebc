package leasehold

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Pacer spreads the first renewals of watchdogs started in a burst. Leases
// acquired together (thousands of locks taken at once) come due together,
// period after period, and renewing them all at once delays each one
// behind the others: 10,000 locks taken in 36 ms at about 24 µs of CPU
// per renewal sent their first renewals up to 112 ms late at p99 on 2
// cores, 100,000 up to 1.6 s. Past pacerBurst watchdogs started within
// pacerWindow of each other, a watchdog's first renewal comes due at a
// random point between a tenth of the period and its end instead of at
// its end (the renewals after it keep the exact period, so they stay
// spread).
// Renewing early is always within the lease's rules; it costs at most one
// renewal more per acquisition. Watchdogs started one by one keep the
// exact period.
//
// A Pacer also lines renewals up on slots of pacerSlot (a twentieth of the
// period when shorter), rounding a due time down, never up, so that
// renewals due within one slot are sent together and share their wakeups:
// the store's client writes them in one system call and reads their
// answers in one, and the server wakes once for them. At most
// pacerSlotCap renewals are put on one slot; past that, a renewal keeps
// its exact due time. The cap bounds how many renewals start at one
// instant: slots without a cap were reverted once (9db5752) after a run of
// 100,000 locks (220 renewals a slot) lost leases under CPU starvation, a
// loss not seen again since; at high rates renewals share wakeups anyway.
// Retries after a failed renewal are not moved.
//
// The zero value is ready; share one among the watchdogs of one owner (a
// Locker). It is safe for concurrent use.
type Pacer struct {
	mu     sync.Mutex
	window time.Time // when the current window began
	starts int       // watchdogs started in it

	slots  map[int64]int // renewals put on each slot, by its start (unix ns)
	placed int           // slots counted since the past ones were dropped
}

const (
	// pacerWindow and pacerBurst: more than pacerBurst watchdogs started
	// within pacerWindow make a burst (640 a second at most keep their
	// exact period: about 15 ms of CPU a second at 24 µs each).
	pacerWindow = 100 * time.Millisecond
	pacerBurst  = 64

	// pacerSlot is the longest slot renewals are lined up on, and
	// pacerSlotCap the most renewals put on one.
	pacerSlot    = 50 * time.Millisecond
	pacerSlotCap = 64
)

// slot returns due rounded down to its slot for a renewal period of
// period, if the slot has room; otherwise, or for a nil Pacer, due as it
// is.
func (p *Pacer) slot(due time.Time, period time.Duration) time.Time {
	q := min(pacerSlot, period/20)
	if p == nil || q <= 0 {
		return due
	}
	at := due.Add(-time.Duration(due.UnixNano() % int64(q))) // keeps the monotonic reading
	key := at.UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.slots == nil {
		p.slots = make(map[int64]int)
	}
	if p.slots[key] >= pacerSlotCap {
		return due
	}
	p.slots[key]++
	if p.placed++; p.placed >= pacerPrune {
		p.placed = 0
		past := time.Now().UnixNano()
		for k := range p.slots {
			if k < past {
				delete(p.slots, k)
			}
		}
	}
	return at
}

// pacerPrune is how many renewals a Pacer places between two sweeps of
// its past slots.
const pacerPrune = 4096

// burst counts a watchdog started at now and reports whether it is one of
// a burst.
func (p *Pacer) burst(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := now.Sub(p.window); d < 0 || d >= pacerWindow {
		p.window, p.starts = now, 0
	}
	p.starts++
	return p.starts > pacerBurst
}

// spreadFirst returns period shortened by a uniformly random fraction of
// up to nine tenths: in [0.1, 1.0] x period, never longer, with the random
// source r (nil: the global one). Over nearly the whole period, a burst's
// renewals come due at nearly the rate of leases taken one by one.
func spreadFirst(r *rand.Rand, period time.Duration) time.Duration {
	most := period * 9 / 10
	if r == nil {
		return period - rand.N(most+1)
	}
	return period - time.Duration(r.Int64N(int64(most+1)))
}
