package natsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// serverExpiryGrace covers the server's expiry timer and a loaded server:
// a key whose value and expiry marker have both run out this long ago would
// have been emptied by the server, had nobody written it (Store.stale).
const serverExpiryGrace = 2 * time.Second

// verdict is what judge decided about a key's last message.
type verdict struct {
	free   bool         // Acquire may write at rev
	rev    uint64       // the revision to write at
	holder lease.Holder // the holder, when not free; zero if unknown
	// proof, when free, is a write over another key (a session's) that
	// must land before Acquire writes at rev.
	proof *sessionProof
}

// judge decides whether c may take the key whose last message is m (Sequence
// 0 for an empty subject).
func (s *Store) judge(ctx context.Context, deadline time.Time, c lease.Claim, m *jetstream.RawStreamMsg) (verdict, error) {
	key := c.LeaseID
	if m.Sequence == 0 {
		return s.judgeEmpty(key), nil
	}
	rev := m.Sequence
	switch kind, rec, err := s.classify(key, m); kind {
	case msgCorrupt:
		s.keys.put(key, keyState{rev: rev})
		if s.keys.note(key, rev, notedCorrupt) {
			var ce *CorruptError
			if errors.As(err, &ce) {
				s.log.Warn(err.Error(), "lease", key, "revision", rev)
				s.emit(CorruptKey{Bucket: s.bucket, Key: key, Revision: rev, Reason: ce.Reason})
			}
		}
		return verdict{}, err
	case msgFree:
		if rec.Kind != kindReleased {
			// An expiry marker. A bucket edited to have a MaxAge writes the
			// same marker when it removes a held value early: trust it only
			// once a check begun after it was read found no MaxAge.
			if st, ok := s.keys.get(key); !ok || st.rev != rev || !st.free {
				if err := s.confirmExpiry(ctx, deadline, key); err != nil {
					return verdict{}, err
				}
			}
		}
		s.keys.put(key, keyState{rev: rev, free: true})
		return verdict{free: true, rev: rev}, nil
	case msgHeld:
		st := heldState(rev, rec)
		if rec.Term == c.Term && rec.Owner == c.OwnerID {
			// Our own term's write, which landed although we did not learn
			// it: take it over with a new write (and a new token).
			s.keys.put(key, st)
			return verdict{free: true, rev: rev}, nil
		}
		if rec.Session != "" { // held while its session is: never judged by its own TTL
			return s.judgeBound(ctx, deadline, key, st, rec)
		}
		// Expired once seen unchanged for its TTL, in either mode: in
		// ExpiryServer mode the server keeps the value for a grace beyond
		// (Config.ExpiryGrace), so that its holder can renew after an
		// outage that held its renewals up; a failed Acquire meanwhile
		// restarts the count (keyCache.interrupt).
		if s.keys.observe(key, st, rec.TTL) {
			s.log.Info("natsstore: lease judged expired: its revision did not change for its TTL",
				"lease", key, "owner", rec.Owner, "term", rec.Term, "revision", rev, "ttl", rec.TTL)
			return verdict{free: true, rev: rev}, nil
		}
		return verdict{holder: rec.holder(rev)}, nil
	default: // msgRemoved: deleted or purged by someone else than its owner
		if s.keys.observe(key, keyState{rev: rev, gone: true}, s.maxTTL) {
			return verdict{free: true, rev: rev}, nil
		}
		if s.keys.note(key, rev, notedVanished) {
			s.vanished(key, rev, false)
		}
		return verdict{}, nil
	}
}

// judgeEmpty decides whether a key whose subject is empty is free. A
// subject is empty when the key was never used, when the marker of its
// release or expiry ran out, or when a stream purge removed whatever was
// there, leaving no trace: a held value's holder may then act until its TTL
// runs out. So an empty subject is free at once only if this store knows
// nothing of the key, last saw it free, or saw it so long ago that the
// key's own expiry explains the emptiness as well as a purge does (server
// mode: the value's TTL and its expiry marker's have both run out since);
// otherwise the key vanished, and is free once the bucket's maximum lease
// TTL has passed.
func (s *Store) judgeEmpty(key string) verdict {
	prev, known := s.keys.get(key)
	if !known || prev.free || !prev.gone && s.stale(prev) {
		s.keys.put(key, keyState{free: true})
		return verdict{free: true}
	}
	if s.keys.observe(key, keyState{gone: true}, s.maxTTL) {
		s.keys.put(key, keyState{free: true})
		return verdict{free: true}
	}
	if prev.rev != 0 {
		s.vanished(key, prev.rev, true)
	}
	return verdict{}
}

// stale reports whether a sighting of a key is too old to tell a purge from
// the key's own expiry: in server mode, once the TTL of the value seen (if
// any) and the bucket's marker TTL have passed since, the server would have
// emptied the subject by itself had nobody written the key again. Without
// per-message TTLs nothing expires, and no sighting is stale.
func (s *Store) stale(st keyState) bool {
	if s.Expiry() != ExpiryServer || st.bound { // a value under a session never expires by itself
		return false
	}
	return s.keys.now().Sub(st.seen) > s.cfg.serverTTL(st.ttl)+s.markerTTL+serverExpiryGrace
}

// vanished reports a key that disappeared without a release, and has the
// bucket checked: a deleted or re-created bucket empties every key.
func (s *Store) vanished(key string, rev uint64, emptied bool) {
	ev := KeyVanished{Bucket: s.bucket, Key: key, Revision: rev, Emptied: emptied}
	s.log.Warn("natsstore: "+ev.String(), "lease", key, "wait", s.maxTTL)
	s.emit(ev)
	s.poke()
}

// confirmExpiry returns nil once the bucket's stream, read now, is the one
// the store opened and has the configuration it needs (in particular no
// MaxAge). It reads the stream alone, without waiting for a check of the
// bucket that may be running: the stream's leader answers that, while a
// check also needs the meta group's, which a failover can leave without one
// for seconds after the stream is back. A stream that is not as it should
// be has the bucket checked, which says what is wrong.
func (s *Store) confirmExpiry(ctx context.Context, deadline time.Time, key string) error {
	if be := s.broken.Load(); be != nil {
		return fmt.Errorf("natsstore: acquire %s: %w", key, be)
	}
	if s.js == nil {
		return nil // a store over a fake bucket, in tests
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var f bucketFacts
	_, err := s.resending(rctx, func(sctx context.Context) error { return readStream(sctx, s.js, s.bucket, &f) })
	if err == nil && f.created.Equal(s.created) && len(bucketProblems(f.cfg)) == 0 {
		return nil
	}
	if err == nil || mayMeanChange(err) {
		err = s.checkSince(ctx, deadline, time.Now())
	}
	var be *BucketError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &be):
		return fmt.Errorf("natsstore: acquire %s: %w", key, be)
	default:
		return unavailable(rctx, "acquire "+key+": check the bucket before trusting an expiry marker", err)
	}
}

type msgKind uint8

const (
	msgCorrupt msgKind = iota // the zero value is the safe one: never free
	msgHeld                   // a held record
	msgFree                   // a release marker of ours or an expiry marker
	msgRemoved                // a delete or purge marker of someone else
)

// classify reads a key's last message.
func (s *Store) classify(key string, m *jetstream.RawStreamMsg) (msgKind, record, error) {
	switch m.Header.Get(hdrOperation) {
	case opDelete:
		if r, err := parseRecord(m.Data); err == nil && r.Kind == kindReleased {
			return msgFree, r, nil
		}
		return msgRemoved, record{}, nil
	case opPurge:
		return msgRemoved, record{}, nil
	case "":
	default:
		return msgCorrupt, record{}, s.corrupt(key, m.Sequence, fmt.Sprintf("unknown KV operation %q", m.Header.Get(hdrOperation)))
	}
	switch reason := m.Header.Get(hdrMarkerReason); reason {
	case "":
	case reasonMaxAge:
		return msgFree, record{}, nil
	default: // "Purge", "Remove": removed through the stream API
		return msgRemoved, record{}, nil
	}
	r, err := parseRecord(m.Data)
	switch {
	case err != nil:
		return msgCorrupt, r, s.corrupt(key, m.Sequence, err.Error())
	case r.Kind != kindHeld:
		return msgCorrupt, r, s.corrupt(key, m.Sequence, "a "+r.Kind.String()+" record outside a delete marker")
	}
	return msgHeld, r, nil
}

func (s *Store) corrupt(key string, rev uint64, reason string) error {
	return fmt.Errorf("%w; delete it (nats kv del %s %s): contenders then wait the bucket's MaxTTL (%v) before "+
		"taking the lease, since its last holder may still act", &CorruptError{Bucket: s.bucket, Key: key, Revision: rev,
		Reason: reason}, s.bucket, key, s.maxTTL)
}
