package natsstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// acquire takes c.LeaseID for c's term by writing rec (with a per-message
// TTL when ttl > 0): Acquire, and AcquireUnder with a record naming the
// session and no TTL, within deadline (from writes.begin). When it leads a
// flight f, it tells f before each read of the key whose answer it may
// report (see flights).
//
// Each attempt is a compare-and-swap in four steps: 1. write at the
// revision expected, when there is one; 2. read the key, unless the write's
// answer did; 3. judge what was read; 4. write at the revision judged in
// the next attempt.
func (w *writes) acquire(ctx context.Context, deadline time.Time, c lease.Claim, rec record, ttl time.Duration,
	f *flight) (lease.Acquisition, error) {

	rec.Acquired = time.Now().UnixMilli()
	expect, write, err := w.fastPath(ctx, deadline, c.LeaseID, c.OwnerID, c.Term)
	if err != nil {
		return lease.Acquisition{}, err
	}
	a := &acquiring{c: c, rec: rec, ttl: ttl, f: f, deadline: deadline, expect: expect, write: write,
		sent: make([]sentWrite, 0, maxAttempts)}
	for attempt := range maxAttempts {
		// 1. Write at the revision expected: a write that landed, or
		// failed, ends the call; one refused, or whose outcome is unknown,
		// goes on.
		if a.write {
			if res, done, err := w.acquireWrite(ctx, a); done {
				return res, err
			}
		}
		// 2. Read the key, unless step 1 read it back.
		if a.last == nil {
			switch res, next, err := w.acquireRead(ctx, a); next {
			case stepDone:
				return res, err
			case stepAgain:
				continue
			}
		}
		// 3. Judge it: held, or not a lease, ends the call.
		v, res, next, err := w.acquireJudge(ctx, a, attempt)
		switch next {
		case stepDone:
			return res, err
		case stepAgain:
			continue
		}
		// 4. Write at the revision judged in the next attempt.
		if err := a.advance(ctx, attempt, v.rev); err != nil {
			return lease.Acquisition{}, w.failOp(ctx, deadline, a.what(), err)
		}
	}
	return lease.Acquisition{}, gaveUp(a.what(), a.moved, a.expect)
}

// acquiring is the state of one acquire's compare-and-swap loop.
type acquiring struct {
	c        lease.Claim
	rec      record        // the value to write; each write has a nonce of its own
	ttl      time.Duration // the writes' per-message TTL, none when 0
	f        *flight       // the flight the call leads, if any
	deadline time.Time
	expect   uint64                  // the revision the next write expects (0: no message)
	write    bool                    // the next attempt writes at expect before reading
	last     *jetstream.RawStreamMsg // the key's last message, read after a failed write
	readAt   readMark                // when last was asked for
	refused  bool                    // the last write was refused: the key was not at expect
	moved    bool                    // a refused write was followed by a change of the key
	sent     []sentWrite             // the call's writes
}

// what names the call in errors.
func (a *acquiring) what() string { return "acquire " + a.c.LeaseID }

// step is where an acquire goes after one of its steps.
type step uint8

const (
	stepOn    step = iota // on to the attempt's next step
	stepAgain             // to the next attempt
	stepDone              // the call is over, with the step's answer
)

// acquireWrite is step 1 of an attempt: a write of a.rec at a.expect. It is
// done when the write landed (the key is taken) or failed; after a refused
// write a.refused is set, and after one whose outcome is unknown a.last is
// the key as read back.
func (w *writes) acquireWrite(ctx context.Context, a *acquiring) (lease.Acquisition, bool, error) {
	a.rec.Nonce = rand.Uint64()
	a.sent = append(a.sent, sentWrite{nonce: a.rec.Nonce, before: w.top.Load()})
	ack, err := w.publish(ctx, a.deadline, a.c.LeaseID, a.rec, a.expect, a.ttl)
	switch outcome(ctx, err) {
	case written:
		w.keys.put(a.c.LeaseID, heldState(ack.Sequence, a.rec))
		return acquired(a.c, ack.Sequence), true, nil
	case conflict:
		a.last, a.refused = nil, true
		return lease.Acquisition{}, false, nil
	case unknown:
		// The write may have landed: read the key back. Our nonce
		// there means it did, and its revision is the token.
		w.flights.reading(a.f)
		m, mark, rerr := w.readMarked(ctx, a.deadline, a.c.LeaseID)
		a.readAt = mark
		if rerr != nil {
			return lease.Acquisition{}, true, w.failOp(ctx, a.deadline, a.what(), worse(err, rerr))
		}
		if res, ok, err := w.mine(ctx, a, m); ok {
			return res, true, err
		}
		a.last, a.refused = orNotFound(m), false
		return lease.Acquisition{}, false, nil
	default:
		return lease.Acquisition{}, true, w.failOp(ctx, a.deadline, a.what(), err)
	}
}

// acquireRead is step 2 of an attempt: a read of the key into a.last. A key
// found free by a direct get while reads are refused (see readOrFree) is
// written at once, in the next attempt.
func (w *writes) acquireRead(ctx context.Context, a *acquiring) (lease.Acquisition, step, error) {
	w.flights.reading(a.f)
	m, mark, err := w.readOrFree(ctx, a.deadline, a.c.LeaseID)
	a.readAt = mark
	var free *freeAt
	if errors.As(err, &free) {
		if !a.refused || free.rev != a.expect {
			a.expect, a.write, a.refused = free.rev, true, false
			return lease.Acquisition{}, stepAgain, nil
		}
		// The replica that answered is behind the stream leader, which
		// refused that write: wait for a read.
		err = free.read
	}
	if err != nil {
		return lease.Acquisition{}, stepDone, w.failOp(ctx, a.deadline, a.what(), err)
	}
	if a.refused {
		if res, ok, err := w.mine(ctx, a, m); ok {
			return res, stepDone, err // refused by a deposed leader, taken by the new one
		}
	}
	a.last = orNotFound(m)
	return lease.Acquisition{}, stepOn, nil
}

// acquireJudge is step 3 of an attempt: the judgement of a.last. A key held
// by another ends the call, once the stream's leader confirms the read; one
// free because its session ended goes on once a write ends the session.
func (w *writes) acquireJudge(ctx context.Context, a *acquiring, attempt int) (verdict, lease.Acquisition, step, error) {
	v, err := w.judge(ctx, a.deadline, a.c, a.last)
	if err == nil && !v.free {
		// Held by another: an answer given without a write to prove it.
		switch err := w.confirmHeld(ctx, a, attempt); {
		case errors.Is(err, errMovedOn):
			a.write, a.last = false, nil
			return v, lease.Acquisition{}, stepAgain, nil
		case err != nil:
			return v, lease.Acquisition{}, stepDone, err
		}
	}
	if err != nil || !v.free {
		return v, lease.Acquisition{Holder: v.holder}, stepDone, err
	}
	if v.proof != nil {
		// Free because its session ended: end the session with a write
		// at the revision judged, or take nothing (an old answer).
		if ok, err := w.proveSessionEnded(ctx, a.deadline, a.c, v.proof); err != nil || !ok {
			return v, lease.Acquisition{Holder: v.holder}, stepDone, err
		}
	}
	return v, lease.Acquisition{}, stepOn, nil
}

// confirmHeld has the stream's leader confirm a read that showed the key
// held (writes.currentUnless). Should the key change while that is confirmed
// (its watch saw a release), it reads it again (errMovedOn), in the first
// attempt only: the revision the watch saw may be one the stream leader has
// yet to apply.
func (w *writes) confirmHeld(ctx context.Context, a *acquiring, attempt int) error {
	var changed func() bool
	if attempt == 0 {
		read := a.last.Sequence
		changed = func() bool { st, _ := w.keys.get(a.c.LeaseID); return st.Rev > read }
	}
	return w.currentUnless(ctx, a.deadline, a.what(), a.readAt, changed)
}

// advance is step 4 of an attempt: the next attempt writes at rev, the
// revision judged free. A write refused at the revision the key still has
// is given time to land first.
func (a *acquiring) advance(ctx context.Context, attempt int, rev uint64) error {
	switch {
	case a.refused && rev == a.expect:
		// Refused, yet unchanged: a write in flight (replicated streams
		// check against writes not yet applied), or a stream that cannot
		// take writes. Give the first time to land.
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	case a.refused:
		a.moved = true
	}
	a.expect, a.write, a.last, a.refused = rev, true, nil, false
	return nil
}

// mine returns the acquisition a write of a that landed at m made, if m is
// one (see isWrite).
func (w *writes) mine(ctx context.Context, a *acquiring, m *jetstream.RawStreamMsg) (lease.Acquisition, bool, error) {
	sw, ok := isWrite(m, a.rec, a.sent)
	if !ok {
		return lease.Acquisition{}, false, nil
	}
	if err := w.landed(a.c.LeaseID, m.Sequence, sw.before); err != nil {
		return lease.Acquisition{}, true, w.failOp(ctx, a.deadline, a.what(), err)
	}
	r, _ := heldRecord(m)
	w.keys.put(a.c.LeaseID, heldState(m.Sequence, r))
	return acquired(a.c, m.Sequence), true, nil
}
