package natsstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore/internal/expiry"
)

var _ lease.SessionStore = (*Store)(nil)

// AcquireUnder implements lease.SessionStore: one conditional write of a
// record that names session and has no TTL of its own, so the key is held for
// as long as that term holds the session's key. A contender takes it only
// after ending the session with a compare-and-swap on the session's key (see
// docs/guarantees.md, "Locks held under a session"). To take such a lock away
// by hand, delete its session's key, never the lock's.
func (s *Store) AcquireUnder(ctx context.Context, c lease.Claim, session lease.Lease) (lease.Acquisition, error) {
	if err := s.validTTL(lease.ValidateUnder(c, session), session.TTL); err != nil {
		return lease.Acquisition{}, err
	}
	c.TTL = session.TTL
	rec := record{Kind: kindHeld, Owner: c.OwnerID, Term: c.Term, TTL: ttlMillis(session.TTL), Meta: c.Meta,
		Session: session.ID, SessionTerm: session.Term}
	deadline, err := s.writes.begin(ctx)
	if err != nil {
		return lease.Acquisition{}, err
	}
	a, err := s.writes.acquire(ctx, deadline, c, rec, 0, nil)
	return s.writes.settle(c.LeaseID, a, err), err
}

// judgeBound decides whether a key held under a session (rec, at rev) is
// free: it is when that session has ended. It reads the session's key. A
// free verdict that rests on the session key's state at a revision the
// session could still write over carries the proof Acquire must write
// first (sessionProof).
func (w *writes) judgeBound(ctx context.Context, deadline time.Time, key string, rev uint64, rec record) (verdict, error) {
	m, err := w.read(ctx, deadline, rec.Session)
	if err != nil {
		return verdict{}, w.failOp(ctx, deadline, "acquire "+key+": read its session "+rec.Session, err)
	}
	end, err := w.sessionEnded(ctx, deadline, rec, rev, orNotFound(m))
	if err != nil || !end.ended {
		return verdict{holder: rec.holder(rev)}, err
	}
	w.log.Debug("natsstore: the session of a lease has ended; the lease is free", "lease", key,
		"owner", rec.Owner, "term", rec.Term, "session", rec.Session, "revision", rev, "proof", end.proof != nil)
	return verdict{free: true, rev: rev, proof: end.proof, holder: rec.holder(rev)}, nil
}

// The metadata of the release marker that ends a session (proveSessionEnded).
const (
	metaEndedBy  = "ended-by"  // the owner of the claim that ended it
	metaEndedFor = "ended-for" // the lease that claim took
)

// sessionEnd is what sessionEnded decided.
type sessionEnd struct {
	ended bool
	// proof, when not nil, is the write that must land before the lease is
	// taken: the session ended by what a contender saw (a revision unchanged
	// for its TTL, a key vanished for the bucket's maximum TTL, a marker
	// older than the lease), which an old answer can show of a session that
	// lives. It is nil when the session key moved past the lease's own
	// revision to something the session's term can never write over.
	proof *sessionProof
}

// sessionProof is a release marker to write over a session's key at rev:
// it ends the session's term for good (its next renewal is refused) and
// proves that the key was still at rev.
type sessionProof struct {
	key string
	rev uint64 // 0: the subject is empty
	rec record // a release record of the session's term
}

// sessionEnded reports whether the session of rec, a lease written at rev
// under it, has ended, given m, the session key's last message, and the
// write that must prove it (expiry.Session and expiry.Ended decide).
func (w *writes) sessionEnded(ctx context.Context, deadline time.Time, rec record, rev uint64, m *jetstream.RawStreamMsg) (sessionEnd, error) {
	id, term := rec.Session, rec.SessionTerm
	sight, r, err := w.sighting(id, m)
	sight.Existed = true // the leases that name it show that it existed
	sameTerm := (sight.State == expiry.Held || sight.State == expiry.Bound) && r.Term == term
	if err != nil {
		sight.State = expiry.Unknown // never free, as a corrupt lease key is not; judge reports it
	}
	ended, ask := expiry.Session(rev, sight, sameTerm)
	if !ask {
		return sessionEnd{ended: ended}, nil
	}
	proofRec := record{Kind: kindReleased, Owner: rec.Owner, Term: term}
	var d expiry.Decision
	if m.Sequence == 0 {
		prev, _, dd := w.keys.decide(id, sight, keyHolder{}, w.rules())
		if dd.Vanished {
			w.reportVanished(id, 0, prev.Rev)
		}
		d = dd
	} else {
		if sight.State == expiry.Held {
			proofRec.Owner, proofRec.Token = r.Owner, r.token(m.Sequence)
		}
		v, err := w.judge(ctx, deadline, lease.Claim{LeaseID: id}, m)
		if errors.Is(err, lease.ErrCorrupt) {
			return sessionEnd{}, nil
		}
		if err != nil {
			return sessionEnd{}, err
		}
		if v.free {
			d = expiry.Decision{Verdict: expiry.Take, Rev: v.rev}
		}
	}
	ended, proof := expiry.Ended(rev, id, sight, d)
	if !ended || proof == nil {
		return sessionEnd{ended: ended}, nil
	}
	return sessionEnd{ended: true, proof: &sessionProof{key: id, rev: proof.Rev, rec: proofRec}}, nil
}

// proveSessionEnded writes p, the proof of a session's end a lease's take
// rests on, and reports whether it landed: false when the session's key was
// not at the revision read (an old answer; the session may live), after
// which its observation starts again. A write whose outcome is unknown is
// read back.
func (w *writes) proveSessionEnded(ctx context.Context, deadline time.Time, c lease.Claim, p *sessionProof) (bool, error) {
	lockKey := c.LeaseID
	rec := p.rec
	rec.Nonce = rand.Uint64()
	rec.Meta = map[string]string{metaEndedBy: c.OwnerID, metaEndedFor: lockKey} // for operators; never its owner's release
	what := "acquire " + lockKey + ": end its session " + p.key
	sent := []sentWrite{{nonce: rec.Nonce, before: w.top.Load()}}
	ack, err := w.publish(ctx, deadline, p.key, rec, p.rev, w.releaseTTL())
	rev := uint64(0)
	switch outcome(ctx, err) {
	case written:
		rev = ack.Sequence
	case conflict:
		w.keys.restart(p.key)
		return false, nil
	case unknown:
		m, rerr := w.read(ctx, deadline, p.key)
		if rerr != nil {
			return false, w.failOp(ctx, deadline, what, worse(err, rerr))
		}
		sw, ok := isWrite(m, rec, sent)
		if !ok {
			w.keys.restart(p.key)
			return false, nil
		}
		if err := w.landed(p.key, m.Sequence, sw.before); err != nil {
			return false, w.failOp(ctx, deadline, what, err)
		}
		rev = m.Sequence
	default:
		return false, w.failOp(ctx, deadline, what, err)
	}
	w.keys.put(p.key, freeState(rev))
	ev := SessionEnded{Bucket: w.bucket, Session: p.key, Owner: rec.Owner, Term: rec.Term, Revision: rev, Lease: lockKey}
	w.log.Info("natsstore: "+ev.String(), "lease", lockKey, "session", p.key)
	w.emit(ev)
	return true, nil
}
