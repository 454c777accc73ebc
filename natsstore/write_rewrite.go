package natsstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// rewrite writes rec (a renewal or a release of l) over l's key with a
// compare-and-swap on the revision l last wrote, and returns the revision
// of the write. When the key has moved on, it reads it: a later write of the
// same term (a renewal of ours that landed after we gave up on it) is
// written over again; anything else is ErrLost. A write whose outcome is
// unknown is read back, and recognised by its nonce.
func (w *writes) rewrite(ctx context.Context, op string, l lease.Lease, rec record) (uint64, error) {
	if err := w.validTTL(lease.ValidateLease(l), l.TTL); err != nil {
		return 0, err
	}
	deadline, err := w.begin(ctx)
	if err != nil {
		return 0, err
	}
	expect, acquiredAt, err := w.precheck(ctx, deadline, op, l)
	if err != nil {
		return 0, err
	}
	rec.Acquired = acquiredAt
	ttl := w.ttlFor(l.TTL)
	if rec.Kind == kindReleased {
		ttl = w.releaseTTL()
	}
	rw := &rewriting{op: op, l: l, rec: rec, ttl: ttl, deadline: deadline, expect: expect,
		sent: make([]sentWrite, 0, maxAttempts)}
	for attempt := range maxAttempts {
		// 1. Write at the revision expected, and read the key back when
		// the write was refused or its outcome is unknown.
		m, rev, done, err := w.rewriteOnce(ctx, rw, attempt)
		if done {
			return rev, err
		}
		// 2. Write again over a later write of l's own term only.
		if !ours(m, l) {
			return 0, w.lost(ctx, deadline, l, m)
		}
		rw.expect = m.Sequence
	}
	return 0, gaveUp(rw.what(), rw.moved, rw.expect)
}

// rewriting is the state of one rewrite's compare-and-swap loop.
type rewriting struct {
	op       string // "renew" or "release"
	l        lease.Lease
	rec      record        // the value to write; each write has a nonce of its own
	ttl      time.Duration // the writes' per-message TTL, none when 0
	deadline time.Time
	expect   uint64      // the revision the next write expects
	moved    bool        // a refused write was followed by a change of the key
	sent     []sentWrite // the call's writes
}

// what names the call in errors.
func (rw *rewriting) what() string { return rw.op + " " + rw.l.ID }

// rewriteOnce writes rw.rec at rw.expect. It is done when the write landed,
// or was found to have landed, (with its revision) or failed; otherwise it
// returns the key's last message, read back.
func (w *writes) rewriteOnce(ctx context.Context, rw *rewriting, attempt int) (*jetstream.RawStreamMsg, uint64, bool, error) {
	rw.rec.Nonce = rand.Uint64()
	rw.sent = append(rw.sent, sentWrite{nonce: rw.rec.Nonce, before: w.top.Load()})
	ack, err := w.publish(ctx, rw.deadline, rw.l.ID, rw.rec, rw.expect, rw.ttl)
	switch outcome(ctx, err) {
	case written:
		return nil, w.rewritten(rw.l.ID, rw.rec, ack.Sequence), true, nil
	case conflict:
		return w.rewriteRefused(ctx, rw, attempt)
	case unknown:
		return w.rewriteUnknown(ctx, rw, err)
	default:
		return nil, 0, true, w.failOp(ctx, rw.deadline, rw.what(), err)
	}
}

// rewriteRefused reads the key after a write of rw was refused. A write of
// rw found there (refused by a deposed leader, taken by the new one) is done;
// a key still at rw.expect is given time for a write in flight to land.
func (w *writes) rewriteRefused(ctx context.Context, rw *rewriting, attempt int) (*jetstream.RawStreamMsg, uint64, bool, error) {
	m, err := w.read(ctx, rw.deadline, rw.l.ID)
	if err != nil {
		return nil, 0, true, w.failOp(ctx, rw.deadline, rw.what(), err)
	}
	if sw, ok := isWrite(m, rw.rec, rw.sent); ok {
		rev, err := w.rewriteMine(ctx, rw, m.Sequence, sw)
		return nil, rev, true, err
	}
	if m.Sequence != rw.expect {
		rw.moved = true
	} else if err := pause(ctx, attempt); err != nil {
		return nil, 0, true, w.failOp(ctx, rw.deadline, rw.what(), err)
	}
	return m, 0, false, nil
}

// rewriteUnknown reads the key back after a write of rw whose outcome is
// unknown (werr). A write of rw found there is done; a key still at rw.expect
// means that the write did not land (yet). Unless a copy of the write was
// refused as a conflict (errResent): a stream leader then had the key past
// rw.expect, so a read that shows rw.expect may be behind it (a leader just
// elected answers before it has applied what it committed). The key is read
// again after pauses of 5 to 80 ms (155 ms in all, within the call's time),
// and then written again at rw.expect: a compare-and-swap, refused if the
// earlier copy landed (rewriteRefused then reads it back), taken if the
// conflict came from a deposed leader.
func (w *writes) rewriteUnknown(ctx context.Context, rw *rewriting, werr error) (*jetstream.RawStreamMsg, uint64, bool, error) {
	for wait := 5 * time.Millisecond; ; wait *= 2 {
		m, err := w.read(ctx, rw.deadline, rw.l.ID)
		if err != nil {
			return nil, 0, true, w.failOp(ctx, rw.deadline, rw.what(), worse(werr, err))
		}
		if sw, ok := isWrite(m, rw.rec, rw.sent); ok {
			rev, err := w.rewriteMine(ctx, rw, m.Sequence, sw)
			return nil, rev, true, err
		}
		if m == nil || m.Sequence != rw.expect {
			return m, 0, false, nil
		}
		if !errors.Is(werr, errResent) {
			return nil, 0, true, w.failOp(ctx, rw.deadline, rw.what(),
				fmt.Errorf("the %s did not land (yet): %w", opNoun(rw.op), werr))
		}
		if wait > 80*time.Millisecond || !sleepWithin(ctx, rw.deadline, wait) {
			return m, 0, false, nil
		}
	}
}

// sleepWithin waits d, unless ctx ends or deadline comes first; it reports
// whether it waited d.
func sleepWithin(ctx context.Context, deadline time.Time, d time.Duration) bool {
	return time.Until(deadline) > d && sleep(ctx, d)
}

// rewriteMine takes a write of rw found at rev (see isWrite), sent when the
// highest revision seen was sw.before.
func (w *writes) rewriteMine(ctx context.Context, rw *rewriting, rev uint64, sw sentWrite) (uint64, error) {
	if err := w.landed(rw.l.ID, rev, sw.before); err != nil {
		return 0, w.failOp(ctx, rw.deadline, rw.what(), err)
	}
	return w.rewritten(rw.l.ID, rw.rec, rev), nil
}

// rewritten records rec, a renewal or a release of key, written at rev, and
// returns rev.
func (b *keyBook) rewritten(key string, rec record, rev uint64) uint64 {
	if rec.Kind == kindReleased {
		b.keys.put(key, freeState(rev))
	} else {
		b.keys.put(key, heldState(rev, rec))
	}
	return rev
}
