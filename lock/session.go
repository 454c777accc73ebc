package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// session is the Locker's session (Config.Session): one lease, renewed by
// one watchdog, under which locks are held (lease.SessionStore). It ends
// when its Hold is poisoned (every lock under it is then lost) or when
// Close releases it.
type session struct {
	hold *leasehold.Hold
	cfg  lease.Config

	mu    sync.Mutex
	ended bool
	head  *Guard // the locks held under it, linked by Guard.prev and next
}

// sessionSlot holds a Locker's current session, and the opening of the
// next one.
type sessionSlot struct {
	mu      sync.Mutex
	cur     *session      // nil before the first
	opening chan struct{} // closed when the session being opened is there
}

// sessionKey is the lease ID of a session of term.
func (l *Locker) sessionKey(term string) string { return l.cfg.Prefix + "session." + term }

// session returns the Locker's session, opening one when there is none
// (or the last one ended). Concurrent callers share one opening.
func (l *Locker) session(ctx context.Context) (*session, error) {
	slot := &l.slot
	for {
		slot.mu.Lock()
		s, opening := slot.cur, slot.opening
		if s != nil && s.live() {
			slot.mu.Unlock()
			return s, nil
		}
		if opening == nil {
			slot.opening = make(chan struct{})
			opening = slot.opening
			slot.mu.Unlock()
			s, err := l.openSession(ctx)
			slot.mu.Lock()
			slot.opening = nil
			slot.mu.Unlock()
			close(opening)
			return s, err
		}
		slot.mu.Unlock()
		select {
		case <-opening:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.life.closing:
			return nil, lease.ErrClosed
		}
	}
}

// live reports whether locks may be taken under s: it has not ended and is
// valid now. A session past its validity but not poisoned yet (its
// renewals are failing) takes no new lock.
func (s *session) live() bool {
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	return !ended && s.hold.Remaining() > 0
}

// openSession acquires a new session lease and starts its watchdog.
func (l *Locker) openSession(ctx context.Context) (*session, error) {
	term := lease.NewTerm()
	cfg := l.cfg.leaseConfig(l.sessionKey(term), l.owner, 0, 0)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The session's watchdog needs the actor system: start it (if it is not
	// running) while the session's key is written.
	l.startHost()
	sent := leasehold.Now()
	opCtx, cancel := context.WithTimeout(ctx, leasehold.OpTimeout(cfg))
	a, err := l.store.Acquire(opCtx, lease.Claim{LeaseID: cfg.LeaseID, OwnerID: cfg.OwnerID, Term: term, TTL: cfg.EffectiveTTL()})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("open a session: %w", err)
	}
	if !a.Acquired { // a fresh key: only a tampered bucket holds it
		return nil, fmt.Errorf("open a session: %w: its key %s is held by %s", lease.ErrUnavailable, cfg.LeaseID, a.Holder.OwnerID)
	}
	hold, err := leasehold.NewHold(cfg, a.Lease, sent)
	if err != nil {
		l.giveBack(a.Lease)
		return nil, err
	}
	s := &session{hold: hold, cfg: cfg}
	// The session is the Locker's before its watchdog starts, so that a
	// Close that starts now finds it and releases it.
	l.slot.mu.Lock()
	if l.life.isClosed() {
		l.slot.mu.Unlock()
		hold.MarkReleased()
		l.giveBack(a.Lease)
		return nil, lease.ErrClosed
	}
	l.slot.cur = s
	l.slot.mu.Unlock()
	if !l.sendKeeper(spawnSession{s: s}) {
		return nil, lease.ErrClosed // Close releases it
	}
	l.log.Debug("lock: session opened", "lease_id", cfg.LeaseID, "owner_id", cfg.OwnerID, "token", uint64(a.Lease.Token))
	return s, nil
}

// add counts g as held under s, unless s has ended or is no longer valid.
func (s *session) add(g *Guard) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.hold.Err() != nil {
		return false
	}
	g.next = s.head
	if s.head != nil {
		s.head.prev = g
	}
	s.head = g
	g.l.held.add(1)
	return true
}

// remove forgets g, released; it reports whether g was still counted.
func (s *session) remove(g *Guard) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head != g && g.prev == nil {
		return false // not (or no longer) in the list
	}
	if g.prev != nil {
		g.prev.next = g.next
	} else {
		s.head = g.next
	}
	if g.next != nil {
		g.next.prev = g.prev
	}
	g.prev, g.next = nil, nil
	g.l.held.add(-1)
	return true
}

// end marks s ended and returns the guards still held under it, no longer
// counted. It returns nil when s had ended already.
func (s *session) end(l *Locker) []*Guard {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return nil
	}
	s.ended = true
	var guards []*Guard
	for g := s.head; g != nil; {
		next := g.next
		g.prev, g.next = nil, nil // a guard kept by its user keeps no other alive
		guards = append(guards, g)
		g = next
	}
	s.head = nil
	s.mu.Unlock()
	l.slot.mu.Lock()
	if l.slot.cur == s {
		l.slot.cur = nil
	}
	l.slot.mu.Unlock()
	if n := int64(len(guards)); n > 0 {
		l.held.add(-n)
	}
	return guards
}

// sessionLost ends a session whose watchdog stopped (its Hold poisoned):
// every lock under it is lost.
func (l *Locker) sessionLost(s *session) {
	guards := s.end(l)
	cause := s.hold.Err()
	le := s.hold.Lease()
	if len(guards) > 0 {
		l.log.Warn("lock: session lost; every lock under it is lost", "lease_id", le.ID, "owner_id", le.OwnerID,
			"locks", len(guards), "error", cause)
	}
	if l.cfg.OnEvent == nil {
		return
	}
	reason := lease.LossUnknown
	var lost *lease.LostError
	if errors.As(cause, &lost) {
		reason = lost.Reason
	}
	for _, g := range guards {
		gl := g.t.Lease()
		l.emit(LockPoisoned{Subject: subject(gl), Token: gl.Token, Reason: reason, Err: cause})
	}
}

// closeSession ends the current session for Close: no lock is taken under
// it any more, and its guards are marked released. It returns the session
// (nil if none) and those guards.
func (l *Locker) closeSession() (*session, []*Guard) {
	l.slot.mu.Lock()
	s := l.slot.cur
	l.slot.mu.Unlock()
	if s == nil {
		return nil, nil
	}
	guards := s.end(l)
	for _, g := range guards {
		g.t.MarkReleased()
	}
	s.hold.MarkReleased() // no token from now on; its watchdog stops renewing
	return s, guards
}

// releaseSession releases the session for Close, once its watchdog has
// stopped: one write that frees every lock under it at once (as etcd
// revokes a session's lease). It then deletes the locks' keys, a few at a
// time, with a compare-and-swap on their revisions, so that contenders
// find them free without reading the session; a key taken over meanwhile
// is left alone. It returns the locks that stay held (until the session's
// TTL runs out) because neither the session nor their key could be
// released.
func (l *Locker) releaseSession(ctx context.Context, s *session, guards []*Guard) []NotReleased {
	if s == nil {
		return nil
	}
	serr := leasehold.Release(ctx, l.store, s.hold)
	freed := serr == nil || errors.Is(serr, lease.ErrLost) // released, or not ours any more
	if !freed {
		l.log.Warn("lock: could not release the session; its locks expire with it", "lease_id", s.cfg.LeaseID,
			"locks", len(guards), "error", serr)
	}
	return l.releaseEach(ctx, guards, func(g *Guard) (bool, error) {
		err := l.store.Release(ctx, g.t.Lease())
		if errors.Is(err, lease.ErrLost) {
			err = nil // taken over since the session's release: nothing of ours left
		}
		if freed {
			err = nil // free since the session's release; the key is only tidied up
		}
		g.finish(err)
		return true, err
	})
}
