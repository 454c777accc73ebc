package natsstore

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

var _ lease.SessionStore = (*Store)(nil)

// AcquireUnder implements lease.SessionStore: one conditional write, as
// Acquire makes, of a held record that names session (its lease ID and
// term) and has no per-message TTL. The key is then held for as long as
// that term holds the session's key, in either expiry mode.
//
// A contender (Acquire or AcquireUnder) that finds such a record reads the
// session's key and takes the lease, with a compare-and-swap on its
// revision, when the session has ended: released, expired (as Acquire
// judges an expiry), held by another term, or deleted or purged by hand and
// the bucket's maximum lease TTL has passed since the contender saw it
// vanish. An empty session key that this store did not see released counts
// as vanished too: a stream purge leaves no trace, and the leases that name
// the session show that it existed. A session key that is not a lease
// (ErrCorrupt) holds its leases until an operator deletes it.
//
// Deleting or purging by hand a key held under a session frees it for
// contenders once the bucket's maximum lease TTL has passed, as for any
// lease, but its holder, which never renews it, is not told: delete the
// session's key instead, which ends every lease under it safely (see
// docs/guarantees.md).
func (s *Store) AcquireUnder(ctx context.Context, c lease.Claim, session lease.Lease) (lease.Acquisition, error) {
	if err := s.validTTL(lease.ValidateUnder(c, session), session.TTL); err != nil {
		return lease.Acquisition{}, err
	}
	c.TTL = session.TTL
	rec := record{Kind: kindHeld, Owner: c.OwnerID, Term: c.Term, TTL: ttlMillis(session.TTL), Meta: c.Meta,
		Session: session.ID, SessionTerm: session.Term}
	deadline, err := s.begin(ctx)
	if err != nil {
		return lease.Acquisition{}, err
	}
	return s.acquire(ctx, deadline, c, rec, 0, nil)
}

// judgeBound decides whether a key held under a session (st, rec) is free:
// it is when that session has ended. It reads the session's key.
func (s *Store) judgeBound(ctx context.Context, deadline time.Time, key string, st keyState, rec record) (verdict, error) {
	s.keys.put(key, st)
	m, err := s.read(ctx, deadline, rec.Session)
	if err != nil {
		return verdict{}, s.failOp(ctx, deadline, "acquire "+key+": read its session "+rec.Session, err)
	}
	ended, err := s.sessionEnded(ctx, deadline, rec.Session, rec.SessionTerm, orNotFound(m))
	if err != nil || !ended {
		return verdict{holder: rec.holder(st.rev)}, err
	}
	s.log.Debug("natsstore: the session of a lease has ended; the lease is free", "lease", key,
		"owner", rec.Owner, "term", rec.Term, "session", rec.Session, "revision", st.rev)
	return verdict{free: true, rev: st.rev}, nil
}

// sessionEnded reports whether the session id, whose key's last message is
// m, is no longer held by term.
func (s *Store) sessionEnded(ctx context.Context, deadline time.Time, id, term string, m *jetstream.RawStreamMsg) (bool, error) {
	if m.Sequence == 0 {
		// Empty: the marker of its release or expiry ran out, or a purge
		// emptied it. Ended only if this store saw it end, or saw it held
		// so long ago that its own expiry explains the emptiness; otherwise
		// it vanished, and has ended once the bucket's maximum TTL passed.
		prev, known := s.keys.get(id)
		if known && (prev.free || !prev.gone && prev.rev != 0 && s.stale(prev)) {
			return true, nil
		}
		if s.keys.observe(id, keyState{gone: true}, s.maxTTL) {
			return true, nil
		}
		if s.keys.note(id, 0, notedVanished) {
			s.vanished(id, prev.rev, true)
		}
		return false, nil
	}
	switch kind, r, _ := s.classify(id, m); {
	case kind == msgCorrupt:
		// Never free, as a corrupt lease key is not; judge reports it.
	case kind == msgHeld && r.Term != term:
		return true, nil // the session ended, and another term took its key
	case kind == msgHeld && r.Session != "":
		return false, nil // not a session: cannot tell; held (never judged in a loop)
	}
	v, err := s.judge(ctx, deadline, lease.Claim{LeaseID: id}, m)
	if errors.Is(err, lease.ErrCorrupt) {
		return false, nil
	}
	return v.free, err
}
