package leasehold

import (
	"context"
	"sync"
	"time"

	"github.com/asterforge/aster/lease"
)

// Hold is the shared state of one held lease: the LeaseSupervisor (or a
// lock's Guard) reads it, and the lease's Watchdog updates it after every
// renewal. It is safe for concurrent use.
//
// A Hold starts held. It ends exactly once, either poisoned by the Watchdog
// (the cause is a *lease.LostError, which matches lease.ErrLost) or released on
// purpose (lease.ErrReleased); from that moment Token fails, Lost is closed and
// Context is cancelled with the cause. Independently of that, Token fails
// with lease.ErrExpired once ValidUntil has passed without a renewal.
//
// Validity is judged on this process's monotonic clock, plus the time the
// machine spent suspended since the last successful write was sent (see
// Sent; Linux only): ValidUntil is the send time of the last successful
// acquire or renew, plus the TTL of that write, minus the Config's
// SafetyMargin (lease.Config.ValidUntil), or earlier: a Hold is pessimistic. It assumes that every renewal it sends
// may land, whatever the answer says (a write whose answer was lost, or
// that is still in flight, may be the one the server keeps last), so
// before a renewal is sent ValidUntil is lowered to what that write alone
// would allow, when that is earlier (a shorter TTL, as after an Extend),
// and the renew deadline with it. It stays lowered until a renewal
// succeeds: the server then holds that write last, since a renewal is a
// compare-and-swap on the revision and no write sent before it can land
// after it. A renewal the store refuses as invalid (lease.ErrInvalid)
// wrote nothing, and the validity it lowered is restored.
type Hold struct {
	cfg    lease.Config // margins and intervals; TTL comes from the lease
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu         sync.Mutex
	lease      lease.Lease   // the last successful write
	ttl        time.Duration // the TTL the next renewal writes
	sent       Sent          // send time of the last successful write
	validUntil time.Time     // min over the last successful write and every write sent since, before suspensions
	deadline   time.Time     // renew deadline: validUntil - StopTimeout, lowered with it
	err        error         // nil while held
	// call cancels the renewal in flight, if any, when the Hold ends. A
	// renewal's context is not derived from ctx: a child would leave a
	// children map and a Done channel on every Hold for its whole life.
	call context.CancelFunc
}

// NewHold returns the Hold of a lease just acquired (or renewed) with a
// request sent at sent, taken with Now before the request went out. cfg supplies the SafetyMargin, StopTimeout and RenewInterval; its
// LeaseID, OwnerID and TTL are taken from l. It returns an error matching
// lease.ErrInvalid when l or the margins do not fit together.
func NewHold(cfg lease.Config, l lease.Lease, sent Sent) (*Hold, error) {
	if err := lease.ValidateLease(l); err != nil {
		return nil, err
	}
	cfg.LeaseID, cfg.OwnerID, cfg.TTL = l.ID, l.OwnerID, l.TTL
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Hold{cfg: cfg, lease: l, ttl: l.TTL}
	h.ctx, h.cancel = context.WithCancelCause(context.Background())
	h.setWrite(l, sent)
	return h, nil
}

// setWrite records a successful write sent at sent. h.mu must be held (or h
// not yet shared).
func (h *Hold) setWrite(l lease.Lease, sent Sent) {
	c := h.cfg
	c.TTL = l.TTL
	h.lease, h.sent = l, sent
	h.validUntil, h.deadline = c.ValidUntil(sent.At), c.RenewDeadline(sent.At)
}

// nowLocked returns the time on the clock of validUntil and deadline: the
// monotonic clock, moved on by the machine's suspensions since the last
// successful write was sent. h.mu must be held.
func (h *Hold) nowLocked() time.Time {
	now := time.Now()
	return now.Add(h.sent.since(now))
}

// suspended returns how long the machine has been suspended since the last
// successful write was sent (0 below a millisecond, and off Linux).
func (h *Hold) suspended() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sent.since(time.Now())
}

// Token returns the fencing token while the lease is held and valid. It
// fails with the Hold's cause once poisoned or released, and with
// lease.ErrExpired once ValidUntil has passed.
func (h *Hold) Token() (lease.Token, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return 0, h.err
	}
	if !h.nowLocked().Before(h.validUntil) {
		return 0, lease.ErrExpired
	}
	return h.lease.Token, nil
}

// Lease returns the lease as last written: its Revision changes on every
// renewal, its Token never. Pass it to Store.Release.
func (h *Hold) Lease() lease.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// TTL returns the TTL the next renewal writes (changed by Extend).
func (h *Hold) TTL() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ttl
}

// ValidUntil returns until when the owner may act, on the monotonic clock:
// the end of the validity of the last successful write, or earlier while a
// renewal with a shorter validity may have landed, and earlier by the time
// the machine spent suspended since.
func (h *Hold) ValidUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.validUntil.Add(-h.sent.since(time.Now()))
}

// RenewDeadline returns when the Watchdog gives up renewing:
// ValidUntil - StopTimeout.
func (h *Hold) RenewDeadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline.Add(-h.sent.since(time.Now()))
}

// Remaining returns how long the lease stays valid, or 0 once it has
// ended or expired.
func (h *Hold) Remaining() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return 0
	}
	return max(h.validUntil.Sub(h.nowLocked()), 0)
}

// Lost returns a channel closed when the Hold ends (poisoned or released).
func (h *Hold) Lost() <-chan struct{} { return h.ctx.Done() }

// Context returns a context cancelled when the Hold ends, with the Hold's
// cause (context.Cause): a *lease.LostError matching lease.ErrLost when poisoned,
// lease.ErrReleased when released. It is the lifetime context of the Hold.
func (h *Hold) Context() context.Context { return h.ctx }

// Err returns nil while the Hold is held, and its cause once it has ended.
// It does not report expiry; Token does.
func (h *Hold) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Poison ends the Hold with a *lease.LostError of the given reason and store
// error, and reports whether this call ended it (false if it had already
// ended). Watchdogs call it; a lock may call it when its own store call
// learns that the lease is lost.
func (h *Hold) Poison(reason lease.LossReason, err error) bool {
	return h.end(&lease.LostError{Reason: reason, Err: err})
}

// MarkReleased ends the Hold with lease.ErrReleased, before the lease is released
// at the store, so that no token is handed out and no renewal is started
// from then on. It reports whether this call ended the Hold.
func (h *Hold) MarkReleased() bool { return h.end(lease.ErrReleased) }

// MarkReleasedInFlight is MarkReleased that also reports whether a renewal
// was in flight when this call ended the Hold. It is aborted, but may still
// land and move the revision: the caller then waits for the Watchdog to
// stop before it releases. When none was, none can start any more, and the
// revision is final.
func (h *Hold) MarkReleasedInFlight() (ended, inFlight bool) { return h.endWith(lease.ErrReleased) }

func (h *Hold) end(cause error) bool {
	ended, _ := h.endWith(cause)
	return ended
}

func (h *Hold) endWith(cause error) (ended, inFlight bool) {
	h.mu.Lock()
	if h.err != nil {
		h.mu.Unlock()
		return false, false
	}
	h.err = cause
	call := h.call
	h.call = nil
	h.mu.Unlock()
	if call != nil {
		call() // abort the renewal in flight at once
	}
	h.cancel(cause)
	return true, call != nil
}

// validity is a Hold's validity and renew deadline, saved to be restored.
type validity struct{ until, deadline time.Time }

// sending prepares the Hold for a renewal writing ttl, about to be sent at
// sent: since the write may land whatever the answer says, it lowers the
// validity and the renew deadline to those of that write alone when they
// are earlier. It returns the renew deadline the renewal must meet (on the
// monotonic clock, as RenewDeadline), and the validity before it (for
// restore).
//
// The validity stays on the clock of the last successful write (nowLocked),
// which counts suspensions since that write was sent: for a validity that
// sent lowered, that counts more than since sent, never less.
func (h *Hold) sending(ttl time.Duration, sent Sent) (deadline time.Time, before validity) {
	h.mu.Lock()
	defer h.mu.Unlock()
	before = validity{h.validUntil, h.deadline}
	c := h.cfg
	c.TTL = ttl
	if v := c.ValidUntil(sent.At); v.Before(h.validUntil) {
		h.validUntil = v
	}
	if d := c.RenewDeadline(sent.At); d.Before(h.deadline) {
		h.deadline = d
	}
	return h.deadline.Add(-h.sent.since(time.Now())), before
}

// beginCall registers cancel as the cancel function of the renewal about to
// be sent, so that the Hold's end aborts it. It returns the Hold's cause,
// and registers nothing, once the Hold has ended.
func (h *Hold) beginCall(cancel context.CancelFunc) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	h.call = cancel
	return nil
}

// restore puts back the validity saved by sending, for a renewal that
// the store refused as invalid: it wrote nothing, so the server still
// holds what it held before.
func (h *Hold) restore(v validity) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.validUntil, h.deadline = v.until, v.deadline
}

// endCall forgets the cancel function of the renewal that has returned.
func (h *Hold) endCall() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.call = nil
}

// renewArgs returns what the next renewal sends: the lease with the current
// TTL, the renew deadline (as RenewDeadline), the send time of the last write, and the Hold's
// cause if it has ended.
func (h *Hold) renewArgs() (l lease.Lease, deadline time.Time, sent Sent, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l = h.lease
	l.TTL = h.ttl
	return l, h.deadline.Add(-h.sent.since(time.Now())), h.sent, h.err
}

// renewed records a successful renewal sent at sent. The lease (and its
// revision) is updated even after the Hold ended, so that a release after
// a late renewal still compares and swaps the right revision.
func (h *Hold) renewed(l lease.Lease, sent Sent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setWrite(l, sent)
}

// setTTL changes the TTL of the next renewals.
func (h *Hold) setTTL(ttl time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ttl = ttl
}

// validateTTL reports whether ttl fits the Hold's margins and intervals.
func (h *Hold) validateTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return &lease.FieldError{Field: "TTL", Reason: "must be positive, got " + ttl.String()}
	}
	c := h.cfg
	c.TTL = ttl
	return c.Validate()
}

// Release ends h (MarkReleased) and releases its lease at store with a
// compare-and-swap on the last revision, so that a newer owner's key is
// never deleted. Stop h's Watchdog first, so that no renewal moves the
// revision meanwhile.
//
// It never releases after the validity has ended: it returns lease.ErrExpired
// then, and the call itself is bounded by ValidUntil. A poisoned Hold is not
// released either; its cause is returned. lease.ErrLost from the store means
// there was nothing of ours left to release.
func Release(ctx context.Context, store lease.Store, h *Hold) error {
	h.MarkReleased()
	h.mu.Lock()
	l, remaining, cause := h.lease, h.validUntil.Sub(h.nowLocked()), h.err
	h.mu.Unlock()
	if cause != lease.ErrReleased {
		return cause
	}
	if remaining <= 0 {
		return lease.ErrExpired
	}
	ctx, cancel := context.WithTimeout(ctx, remaining)
	defer cancel()
	return store.Release(ctx, l)
}

// RenewedAt returns the send time of the Hold's last successful write.
func (h *Hold) RenewedAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sent.At
}
