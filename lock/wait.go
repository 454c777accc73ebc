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

// wait is a waiting Acquire: it queues behind the calls of this Locker
// that wait for the same resource, then tries, and waits for the watch, a
// release by this Locker or its next poll before it tries again.
func (c *contender) wait() (*Guard, error) {
	l := c.l
	s := &waitLoop{c: c, poll: backoff.Backoff{Policy: pollPolicy(c.cfg.EffectiveStandbyRetryInterval())}}
	// 1. Nobody of this Locker waits for the resource: try at once, as a
	//    TryAcquire would, before queueing and watching.
	tried := false
	if !l.queues.queued(c.resource) {
		g, saw, err := s.try(false)
		if g != nil || err != nil {
			return g, err
		}
		tried = saw
	}
	// 2. Queue behind this Locker's other waiters for the resource.
	w, q := l.queues.enqueue(c.resource)
	var got *Guard
	defer func() { l.queues.dequeue(c.resource, w, got) }()
	skip, err := c.turn(w, tried)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	// 3. The waiter before this one may have just taken the lock: then wait
	//    for its release (which pokes) instead of asking the store.
	if g := l.queues.localHolder(q); g != nil {
		skip, s.session, s.handover = true, g.sessionID(), true
	}
	// 4. Try; until the lock is held, wait for a watch, a poke or the poll.
	for {
		if !skip {
			g, _, err := s.try(true)
			if g != nil {
				got = g
				return g, nil
			}
			if err != nil {
				return nil, err
			}
		}
		skip = false
		if err := s.sleep(w.poke); err != nil {
			return nil, err
		}
	}
}

// turn waits until w is first in its queue. It reports skip when w was
// first at once and tried is true: the attempt just made is not repeated
// before watching.
func (c *contender) turn(w *waiter, tried bool) (skip bool, err error) {
	select {
	case <-w.turn:
		return tried, nil
	default:
	}
	select {
	case <-w.turn:
		return false, nil
	case <-c.ctx.Done():
		return false, ctxError(c.ctx, c.resource)
	case <-c.l.life.closing:
		return false, fmt.Errorf("lock: acquire %s: %w", c.resource, lease.ErrClosed)
	}
}

// waitLoop is what a waiting Acquire keeps between its attempts.
type waitLoop struct {
	c        *contender
	handover bool   // another holder was seen: an acquisition is a handover
	session  string // the session of the last holder seen, watched too
	seen     string // the holder's session since seenAt
	seenAt   time.Time
	poll     backoff.Backoff
	timer    *time.Timer
	watch    watches
	failed   error // the last attempt's transient error, until an attempt sees a holder
}

// try makes one attempt. It returns the guard; or saw, true when it found
// another holder; or an error that waiting cannot fix. A transient error is
// logged (when logRetry) and reported as neither.
func (s *waitLoop) try(logRetry bool) (g *Guard, saw bool, err error) {
	c := s.c
	g, holder, err := c.attempt(s.handover)
	switch {
	case g != nil:
		return g, false, nil
	case err != nil && fatal(err):
		return nil, false, fmt.Errorf("lock: acquire %s: %w", c.resource, err)
	case err != nil:
		if logRetry {
			c.l.log.Debug("lock: acquisition failed; retrying", "lease_id", c.cfg.LeaseID, "error", err)
		}
		s.failed = err
		return nil, false, nil
	}
	s.handover, s.session, s.failed = true, holder.Session, nil
	return nil, true, nil
}

// sleep follows the watches and waits until it is time to try again: a
// watch reported the key or the session free, poke (this Locker released
// the resource), or the poll timer. It returns the call's error when the
// call must end (ctx done, or Close).
func (s *waitLoop) sleep(poke <-chan struct{}) error {
	c := s.c
	// Watches are opened after the first attempt (an uncontended Acquire
	// opens none); each reports the key's current state first, so a
	// release between the attempt and the watch is not missed.
	now := time.Now()
	if s.session != s.seen {
		s.seen, s.seenAt = s.session, now
	}
	// A session is watched once its lock has stayed held under it for
	// sessionWatchDelay: a lock that changes hands quickly costs no watch
	// of each holder's session (its key's watch sees releases), and one
	// held by a session that dies is still taken over as soon as the
	// session expires.
	wait := s.seenAt.Add(sessionWatchDelay).Sub(now)
	if wait > 0 {
		s.watch.follow(c, "")
	} else {
		s.watch.follow(c, s.session)
	}
	delay := s.poll.Failed(now)
	if s.session != "" && wait > 0 {
		delay = min(delay, wait)
	}
	if c.expiresIn > 0 {
		delay = min(delay, c.expiresIn+time.Millisecond)
	}
	if s.timer == nil {
		s.timer = time.NewTimer(delay)
	} else {
		s.timer.Reset(delay)
	}
	if err := s.watch.wait(c.ctx, c.l.life.closing, poke, s.timer.C); err != nil {
		if err == lease.ErrClosed {
			return fmt.Errorf("lock: acquire %s: %w", c.resource, err)
		}
		if s.failed != nil {
			// The store's error says why the call waited: only its text,
			// so that the error still matches ctx's alone.
			return fmt.Errorf("%w (the last attempt failed: %v)", ctxError(c.ctx, c.resource), s.failed)
		}
		return ctxError(c.ctx, c.resource)
	}
	return nil
}

// stop stops the watches and the timer.
func (s *waitLoop) stop() {
	s.watch.stop()
	if s.timer != nil {
		s.timer.Stop()
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
	if l.life.isClosed() {
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
	g, err := newBoundGuard(l, s, c.resource, a.Lease)
	if err != nil { // cannot happen: the store returned a valid lease
		l.giveBack(a.Lease)
		return nil, lease.Holder{}, err
	}
	if !s.add(g) {
		// The session ended (lost, or Close) after the lock was written
		// under it: the lock is free already; clean its key up.
		l.giveBack(a.Lease)
		if l.life.isClosed() {
			return nil, lease.Holder{}, lease.ErrClosed
		}
		return nil, lease.Holder{}, fmt.Errorf("%w: the session ended while the lock was taken", lease.ErrUnavailable)
	}
	l.acquired(g, handover)
	return g, lease.Holder{}, nil
}
