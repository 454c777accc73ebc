package natsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore/internal/expiry"
)

// serverExpiryGrace covers the server's expiry timer and a loaded server:
// a key whose value and expiry marker have both run out this long ago would
// have been emptied by the server, had nobody written it (writes.emptied).
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

// rules are the facts of the bucket the take decision rests on.
func (w *writes) rules() expiry.Rules {
	return expiry.Rules{MaxTTL: w.maxTTL, Emptied: w.emptied}
}

// emptied is how long after a value with TTL ttl was seen the server has
// emptied its subject by itself, had nobody written it since: the value's
// TTL on the server, its expiry marker's and a margin for a loaded server
// (serverExpiryGrace); 0 without per-message TTLs, where nothing expires.
func (w *writes) emptied(ttl time.Duration) time.Duration {
	if w.expiry() != ExpiryServer {
		return 0
	}
	return w.cfg.serverTTL(ttl) + w.markerTTL + serverExpiryGrace
}

// judge decides whether c may take the key whose last message is m (Sequence
// 0 for an empty subject): it reads the message, and expiry.Decide makes
// the decision.
func (w *writes) judge(ctx context.Context, deadline time.Time, c lease.Claim, m *jetstream.RawStreamMsg) (verdict, error) {
	key, rev := c.LeaseID, m.Sequence
	sight, rec, err := w.sighting(key, m)
	sight.Own = (sight.State == expiry.Held || sight.State == expiry.Bound) && rec.Term == c.Term && rec.Owner == c.OwnerID
	var h keyHolder
	if sight.State == expiry.Held || sight.State == expiry.Bound {
		h = rec.keyHolder(rev)
	}
	prev, _, d := w.keys.decide(key, sight, h, w.rules())
	if err != nil { // not a lease: never free
		w.reportCorrupt(key, rev, err)
		return verdict{}, err
	}
	if d.Confirm {
		if err := w.confirmExpiry(ctx, deadline, key); err != nil {
			return verdict{}, err
		}
		w.keys.put(key, freeState(rev))
	}
	if d.Vanished {
		w.reportVanished(key, rev, prev.Rev)
	}
	if d.Verdict == expiry.AskSession {
		return w.judgeBound(ctx, deadline, key, rev, rec)
	}
	return w.verdict(key, d, sight, rec), nil
}

// verdict is judge's answer for a decision d that needs no session.
func (w *writes) verdict(key string, d expiry.Decision, sight expiry.Sighting, rec record) verdict {
	switch {
	case d.Verdict == expiry.Take && sight.State == expiry.Held && !sight.Own:
		w.log.Info("natsstore: lease judged expired: its revision did not change for its TTL",
			"lease", key, "owner", rec.Owner, "term", rec.Term, "revision", sight.Rev, "ttl", rec.TTL)
	case d.Verdict != expiry.Take && sight.State == expiry.Held:
		return verdict{holder: rec.holder(sight.Rev)}
	}
	return verdict{free: d.Verdict == expiry.Take, rev: d.Rev}
}

// sighting reads m, key's last message, for expiry.Decide, with the held
// record in it if any. The error is a CorruptError for a message that is
// not a lease's.
func (w *writes) sighting(key string, m *jetstream.RawStreamMsg) (expiry.Sighting, record, error) {
	if m.Sequence == 0 {
		return expiry.Sighting{}, record{}, nil
	}
	sight := expiry.Sighting{Rev: m.Sequence}
	kind, rec, err := w.classify(key, m)
	switch kind {
	case msgHeld:
		sight.State, sight.TTL = expiry.Held, rec.TTL
		if rec.Session != "" { // held while its session is: never judged by its own TTL
			sight.State = expiry.Bound
		}
	case msgFree:
		sight.State = expiry.Free
		if rec.Kind != kindReleased {
			// An expiry marker. A bucket edited to have a MaxAge writes the
			// same marker when it removes a held value early: trusted once
			// a check begun after it was read found no MaxAge.
			sight.State = expiry.Marker
		}
	case msgRemoved: // deleted or purged by someone else than its owner
		sight.State = expiry.Vanished
	}
	return sight, rec, err
}

// reportCorrupt reports, once per revision, a key whose message at rev is
// not a lease's (err).
func (w *writes) reportCorrupt(key string, rev uint64, err error) {
	var ce *CorruptError
	if w.keys.note(key, rev, notedCorrupt) && errors.As(err, &ce) {
		w.log.Warn(err.Error(), "lease", key, "revision", rev)
		w.emit(CorruptKey{Bucket: w.bucket, Key: key, Revision: rev, Reason: ce.Reason})
	}
}

// reportVanished reports, once per revision, a key that vanished without a
// release at rev (0: its subject was found empty after a value at prev),
// and has the bucket checked: a deleted or re-created bucket empties every
// key.
func (w *writes) reportVanished(key string, rev, prev uint64) {
	if !w.keys.note(key, rev, notedVanished) {
		return
	}
	emptied := rev == 0
	if emptied {
		rev = prev
	}
	ev := KeyVanished{Bucket: w.bucket, Key: key, Revision: rev, Emptied: emptied}
	w.log.Warn("natsstore: "+ev.String(), "lease", key, "wait", w.maxTTL)
	w.emit(ev)
	w.poke()
}

// confirmExpiry returns nil once the bucket's stream, read now, is the one
// the store opened and has the configuration it needs (in particular no
// MaxAge). It reads the stream alone, without waiting for a check of the
// bucket that may be running: the stream's leader answers that, while a
// check also needs the meta group's, which a failover can leave without one
// for seconds after the stream is back. A stream that is not as it should
// be has the bucket checked, which says what is wrong.
func (w *writes) confirmExpiry(ctx context.Context, deadline time.Time, key string) error {
	if be := w.broken.Load(); be != nil {
		return fmt.Errorf("natsstore: acquire %s: %w", key, be)
	}
	if w.js == nil {
		return nil // a store over a fake bucket, in tests
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var f bucketFacts
	_, err := w.resending(rctx, func(sctx context.Context) error { return readStream(sctx, w.js, w.bucket, &f) })
	if err == nil && f.created.Equal(w.created) && len(bucketProblems(f.cfg)) == 0 {
		return nil
	}
	if err == nil || mayMeanChange(err) {
		err = w.checkSince(ctx, deadline, time.Now())
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
func (w *writes) classify(key string, m *jetstream.RawStreamMsg) (msgKind, record, error) {
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
		return msgCorrupt, record{}, w.corrupt(key, m.Sequence, fmt.Sprintf("unknown KV operation %q", m.Header.Get(hdrOperation)))
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
		return msgCorrupt, r, w.corrupt(key, m.Sequence, err.Error())
	case r.Kind != kindHeld:
		return msgCorrupt, r, w.corrupt(key, m.Sequence, "a "+r.Kind.String()+" record outside a delete marker")
	}
	return msgHeld, r, nil
}

func (b *openedBucket) corrupt(key string, rev uint64, reason string) error {
	return fmt.Errorf("%w; delete it (nats kv del %s %s): contenders then wait the bucket's MaxTTL (%v) before "+
		"taking the lease, since its last holder may still act", &CorruptError{Bucket: b.bucket, Key: key, Revision: rev,
		Reason: reason}, b.bucket, key, b.maxTTL)
}
