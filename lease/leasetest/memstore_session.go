package leasetest

import (
	"context"

	"github.com/asterforge/aster/lease"
)

var _ lease.SessionStore = (*MemStore)(nil)

// AcquireUnder implements lease.SessionStore. The lease is held, with no
// expiry of its own, while its session's key is live and held by the
// session's term; a session key deleted by hand (Tamper) keeps it held
// until that key's own TTL runs out, as natsstore waits for a vanished key.
func (s *MemStore) AcquireUnder(ctx context.Context, c lease.Claim, session lease.Lease) (lease.Acquisition, error) {
	if err := lease.ValidateUnder(c, session); err != nil {
		return lease.Acquisition{}, err
	}
	if err := ctx.Err(); err != nil {
		return lease.Acquisition{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return lease.Acquisition{}, lease.ErrClosed
	}
	if e := s.live(c.LeaseID); e != nil && (e.holder.Term != c.Term || e.holder.OwnerID != c.OwnerID) {
		return lease.Acquisition{Holder: e.holder}, nil
	}
	s.rev++
	rev := s.rev
	h := lease.Holder{OwnerID: c.OwnerID, Term: c.Term, Token: lease.Token(rev), TTL: session.TTL, Meta: c.Meta,
		Session: session.ID}
	if t := s.expiryTimer[c.LeaseID]; t != nil {
		t.Stop()
		delete(s.expiryTimer, c.LeaseID)
	}
	s.keys[c.LeaseID] = &memEntry{holder: h, rev: rev, expires: lease.Config{TTL: 1 << 62}.ExpiresAt(s.now()),
		sessionTerm: session.Term}
	s.notify(lease.Event{LeaseID: c.LeaseID, Kind: lease.EventHeld, Holder: h, Revision: rev})
	return lease.Acquisition{Acquired: true, Lease: lease.Lease{ID: c.LeaseID, OwnerID: c.OwnerID, Term: c.Term,
		Token: lease.Token(rev), TTL: session.TTL, Revision: rev, Meta: c.Meta}}, nil
}

// sessionLive reports whether the session a lease is held under is still
// held by the term the lease names. s.mu must be held.
func (s *MemStore) sessionLive(e *memEntry) bool {
	se := s.keys[e.holder.Session]
	if se == nil || se.sessionTerm != "" || !s.now().Before(se.expires) {
		return false // gone, expired, or not a session (a lease held under another)
	}
	// A session key deleted by hand (no owner) may still be held by its
	// former owner until its TTL runs out.
	return se.holder.OwnerID == "" || se.holder.Term == e.sessionTerm
}
