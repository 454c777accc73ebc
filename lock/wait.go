package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// contender is one Acquire or TryAcquire call.
type contender struct {
	l        *Locker
	ctx      context.Context
	cfg      lease.Config
	resource string
	term     string // the call's tenure: every attempt writes it
	under    bool   // under the Locker's session
	// expiresIn is what the last attempt's store said about the holder it
	// found: the time until it lets the call take the lease unless the
	// holder writes first (lease.Acquisition.ExpiresIn), or 0.
	expiresIn time.Duration
}

// queue holds the Acquire calls of one Locker waiting for one resource,
// first come first served: only the first contends at the store.
type queue struct {
	waiters []*waiter
	holder  *Guard // the guard the last waiter that left with the lock got
}

// waiter is one Acquire call in a queue.
type waiter struct {
	turn chan struct{} // closed when the waiter is first
	poke chan struct{} // a guard of this Locker released the resource (buffered)
}

// enqueue adds a waiter for resource, first if nobody waits.
func (l *Locker) enqueue(resource string) (*waiter, *queue) {
	w := &waiter{turn: make(chan struct{}), poke: make(chan struct{}, 1)}
	l.qmu.Lock()
	defer l.qmu.Unlock()
	q := l.queues[resource]
	if q == nil {
		q = &queue{}
		l.queues[resource] = q
	}
	q.waiters = append(q.waiters, w)
	if len(q.waiters) == 1 {
		close(w.turn)
	}
	return w, q
}

// queued reports whether Acquire calls of this Locker wait for resource.
func (l *Locker) queued(resource string) bool {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return l.queues[resource] != nil
}

// dequeue removes w from the queue of resource, with the guard it got (if
// any), and hands the turn to the next waiter.
func (l *Locker) dequeue(resource string, w *waiter, got *Guard) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	q := l.queues[resource]
	if q == nil {
		return
	}
	if got != nil {
		q.holder = got
	}
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if i == 0 && len(q.waiters) > 0 {
			close(q.waiters[0].turn)
		}
		break
	}
	if len(q.waiters) == 0 {
		delete(l.queues, resource)
	}
}

// pokeWaiter tells the first waiter for g's resource, if any, that g, a
// guard of this Locker, has just released it, so that it tries at once.
// A waiter that took the lock since (woken by its watch before the poke)
// has handed the turn on: the next waiter waits for that waiter's guard,
// not for g, and a poke of g would only cost it a store call that finds
// the lock held. A guard that did not come from the queue (a TryAcquire)
// pokes while the queue's last guard has ended.
func (l *Locker) pokeWaiter(g *Guard) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if q := l.queues[g.resource]; q != nil && len(q.waiters) > 0 &&
		(q.holder == nil || q.holder == g || q.holder.Err() != nil) {
		select {
		case q.waiters[0].poke <- struct{}{}:
		default:
		}
	}
}

// localHolder returns the guard of this Locker that holds the resource of
// q, if the last waiter of q left with one that has not ended.
func (l *Locker) localHolder(q *queue) *Guard {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if q.holder != nil && q.holder.Err() == nil {
		return q.holder
	}
	return nil
}

// wait is a waiting Acquire: it queues behind the calls of this Locker
// that wait for the same resource, then tries, and waits for the watch, a
// release by this Locker or its next poll before it tries again.
func (c *contender) wait() (*Guard, error) {
	l, ctx := c.l, c.ctx
	sawOther := false
	session := "" // the session of the last holder seen, watched too
	tried := false
	if !l.queued(c.resource) {
		// Nobody of this Locker waits for the resource: try at once, as a
		// TryAcquire would, before queueing and watching.
		g, holder, err := c.attempt(false)
		switch {
		case g != nil:
			return g, nil
		case err != nil && fatal(err):
			return nil, fmt.Errorf("lock: acquire %s: %w", c.resource, err)
		case err == nil:
			tried, sawOther, session = true, true, holder.Session
		}
	}
	w, q := l.enqueue(c.resource)
	var got *Guard
	defer func() { l.dequeue(c.resource, w, got) }()
	// First at once after the attempt above: watch before trying again.
	skip := false
	select {
	case <-w.turn:
		skip = tried
	default:
		select {
		case <-w.turn:
		case <-ctx.Done():
			return nil, ctxError(ctx, c.resource)
		case <-l.closing:
			return nil, fmt.Errorf("lock: acquire %s: %w", c.resource, lease.ErrClosed)
		}
	}

	var watch watches
	defer watch.stop()
	poll := backoff.Backoff{Policy: pollPolicy(c.cfg.EffectiveStandbyRetryInterval())}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	seen, seenAt := "", time.Time{} // the holder's session, since when
	// The waiter before this one may have just taken the lock: then wait
	// for its release (which pokes) instead of asking the store.
	if g := l.localHolder(q); g != nil {
		skip, session, sawOther = true, g.sessionID(), true
	}
	for {
		if !skip {
			g, holder, err := c.attempt(sawOther)
			switch {
			case g != nil:
				got = g
				return g, nil
			case err != nil && fatal(err):
				return nil, fmt.Errorf("lock: acquire %s: %w", c.resource, err)
			case err != nil:
				l.log.Debug("lock: acquisition failed; retrying", "lease_id", c.cfg.LeaseID, "error", err)
			default:
				sawOther, session = true, holder.Session
			}
		}
		skip = false
		// Watches are opened after the first attempt (an uncontended
		// Acquire opens none); each reports the key's current state first,
		// so a release between the attempt and the watch is not missed.
		now := time.Now()
		if session != seen {
			seen, seenAt = session, now
		}
		// A session is watched once its lock has stayed held under it for
		// sessionWatchDelay: a lock that changes hands quickly costs no
		// watch of each holder's session (its key's watch sees releases),
		// and one held by a session that dies is still taken over as soon
		// as the session expires.
		wait := seenAt.Add(sessionWatchDelay).Sub(now)
		if wait > 0 {
			watch.follow(c, "")
		} else {
			watch.follow(c, session)
		}
		delay := poll.Failed(now)
		if session != "" && wait > 0 {
			delay = min(delay, wait)
		}
		if c.expiresIn > 0 {
			delay = min(delay, c.expiresIn+time.Millisecond)
		}
		if timer == nil {
			timer = time.NewTimer(delay)
		} else {
			timer.Reset(delay)
		}
		if err := watch.wait(ctx, l.closing, w.poke, timer.C); err != nil {
			if err == lease.ErrClosed {
				return nil, fmt.Errorf("lock: acquire %s: %w", c.resource, err)
			}
			return nil, ctxError(ctx, c.resource)
		}
	}
}

// sessionWatchDelay is how long a waiting Acquire sees its lock held under
// one session before it watches that session too.
const sessionWatchDelay = 100 * time.Millisecond

// watches are the watches of a waiting Acquire: of the lock's key, and of
// the session its holder holds it under, if any.
type watches struct {
	key, session         <-chan lease.Event
	stopKey, stopSession func()
	watching             string // the session watched
}

// follow opens the key's watch if it is not open, and watches session
// (instead of any other), or no session when it is "".
func (w *watches) follow(c *contender, session string) {
	l := c.l
	if l.watcher == nil {
		return
	}
	if w.key == nil {
		w.key, w.stopKey = c.open(c.cfg.LeaseID)
	}
	if session != w.watching {
		w.stopSessionWatch()
		if session != "" {
			w.session, w.stopSession = c.open(session)
			if w.session != nil {
				w.watching = session
			}
		}
	}
}

// open watches id until the call returns, or returns nil when the store
// cannot (the waiter then polls).
func (c *contender) open(id string) (<-chan lease.Event, func()) {
	wctx, cancel := context.WithCancel(c.ctx)
	ch, err := c.l.watcher.Watch(wctx, id)
	if err != nil {
		cancel()
		c.l.log.Debug("lock: no watch; polling only", "lease_id", id, "error", err)
		return nil, nil
	}
	return ch, cancel
}

func (w *watches) stopSessionWatch() {
	if w.stopSession != nil {
		w.stopSession()
	}
	w.session, w.stopSession, w.watching = nil, nil, ""
}

func (w *watches) stop() {
	if w.stopKey != nil {
		w.stopKey()
	}
	w.key, w.stopKey = nil, nil
	w.stopSessionWatch()
}

// wait returns nil when it is time to try again: a watch reported the key
// or the session free, this Locker released the resource (poke), or the
// poll timer fired. It returns ctx's error or lease.ErrClosed when the call
// must end. A watch that ends is dropped (follow opens it again).
func (w *watches) wait(ctx context.Context, closing <-chan struct{}, poke <-chan struct{}, timer <-chan time.Time) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-closing:
			return lease.ErrClosed
		case ev, ok := <-w.key:
			if !ok {
				w.stopKey()
				w.key, w.stopKey = nil, nil
				continue
			}
			if ev.Kind == lease.EventFree {
				return nil
			}
		case ev, ok := <-w.session:
			if !ok {
				w.stopSessionWatch()
				continue
			}
			if ev.Kind == lease.EventFree {
				return nil
			}
		case <-poke:
			return nil
		case <-timer:
			return nil
		}
	}
}

// attempt makes one acquisition. It returns the guard, or the current
// holder, or the store's error.
func (c *contender) attempt(handover bool) (*Guard, lease.Holder, error) {
	l := c.l
	if err := c.ctx.Err(); err != nil {
		return nil, lease.Holder{}, ctxError(c.ctx, c.resource)
	}
	if c.under {
		return c.attemptUnder(handover)
	}
	sent := leasehold.Now()
	opCtx, cancel := context.WithTimeout(c.ctx, leasehold.OpTimeout(c.cfg))
	a, err := l.store.Acquire(opCtx, lease.Claim{LeaseID: c.cfg.LeaseID, OwnerID: c.cfg.OwnerID, Term: c.term,
		TTL: c.cfg.EffectiveTTL()})
	cancel()
	c.expiresIn = a.ExpiresIn
	if err != nil {
		return nil, lease.Holder{}, err
	}
	if !a.Acquired {
		return nil, a.Holder, nil
	}
	hold, err := leasehold.NewHold(c.cfg, a.Lease, sent)
	if err != nil { // cannot happen with a validated config: give the lease back
		l.giveBack(a.Lease)
		return nil, lease.Holder{}, err
	}
	g := &Guard{l: l, t: hold, hold: hold, resource: c.resource}
	if !l.register(g, c.cfg) {
		hold.MarkReleased()
		l.giveBack(a.Lease)
		return nil, lease.Holder{}, lease.ErrClosed
	}
	if l.isClosed() {
		// Close started after the keeper took the guard: Close releases it.
		return nil, lease.Holder{}, lease.ErrClosed
	}
	l.acquired(g, handover)
	return g, lease.Holder{}, nil
}

// attemptUnder makes one acquisition under the Locker's session, opening
// the session first when there is none.
func (c *contender) attemptUnder(handover bool) (*Guard, lease.Holder, error) {
	l := c.l
	s, err := l.session(c.ctx)
	if err != nil {
		return nil, lease.Holder{}, err
	}
	opCtx, cancel := context.WithTimeout(c.ctx, leasehold.OpTimeout(s.cfg))
	a, err := l.sessions.AcquireUnder(opCtx, lease.Claim{LeaseID: c.cfg.LeaseID, OwnerID: c.cfg.OwnerID, Term: c.term,
		TTL: s.cfg.EffectiveTTL()}, s.hold.Lease())
	cancel()
	c.expiresIn = a.ExpiresIn
	if err != nil {
		return nil, lease.Holder{}, err
	}
	if !a.Acquired {
		return nil, a.Holder, nil
	}
	b, err := leasehold.NewBound(s.hold, a.Lease)
	if err != nil { // cannot happen: the store returned a valid lease
		l.giveBack(a.Lease)
		return nil, lease.Holder{}, err
	}
	g := &Guard{l: l, t: b, bound: b, sess: s, resource: c.resource}
	if !s.add(g) {
		// The session ended (lost, or Close) after the lock was written
		// under it: the lock is free already; clean its key up.
		l.giveBack(a.Lease)
		if l.isClosed() {
			return nil, lease.Holder{}, lease.ErrClosed
		}
		return nil, lease.Holder{}, fmt.Errorf("%w: the session ended while the lock was taken", lease.ErrUnavailable)
	}
	l.acquired(g, handover)
	return g, lease.Holder{}, nil
}
