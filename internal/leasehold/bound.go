package leasehold

import (
	"context"
	"sync"
	"time"

	"github.com/asterforge/aster/lease"
)

// Bound is the state of one lease held under a session
// (lease.SessionStore.AcquireUnder): a lock guard's token and identity,
// valid for as long as the session's Hold is. It is never renewed and has
// no watchdog of its own: the session's Watchdog keeps it alive, and its
// poison ends every Bound under it at once. It is safe for concurrent use.
//
// A Bound ends exactly once: released (MarkReleased) or poisoned, with
// its own cause, or when its session's Hold ends, with that Hold's cause.
// From then on Token fails, Lost is closed and Context is cancelled.
// Independently of that, Token fails with lease.ErrExpired once the
// session's validity has passed.
//
// Its context is made on first use (Lost or Context), so that a Bound that
// nobody waits on costs no context, nor a field for one: a process may
// hold many.
type Bound struct {
	session *Hold
	lease   lease.Lease

	mu  sync.Mutex
	err error     // nil while held, or while only the session has ended
	ctx *boundCtx // nil until Context or Lost is called
}

// boundCtx is a Bound's context, made on first use.
type boundCtx struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// NewBound returns the Bound of l, acquired under the session whose Hold
// is session. It returns an error matching lease.ErrInvalid when l is not
// a valid lease.
func NewBound(session *Hold, l lease.Lease) (*Bound, error) {
	b := new(Bound)
	if err := b.Init(session, l); err != nil {
		return nil, err
	}
	return b, nil
}

// Init makes the zero Bound b the Bound of l, as NewBound does, for a
// Bound kept inside a larger struct (one allocation per lock instead of
// two). b must not be shared yet.
func (b *Bound) Init(session *Hold, l lease.Lease) error {
	if err := lease.ValidateLease(l); err != nil {
		return err
	}
	b.session, b.lease = session, l
	return nil
}

// Session returns the Hold of the session the lease is held under.
func (b *Bound) Session() *Hold { return b.session }

// Token returns the fencing token while the lease is held and its session
// valid. It fails with the Bound's cause once it has ended (the session's,
// when the session ended first), and with lease.ErrExpired once the
// session's validity has passed.
func (b *Bound) Token() (lease.Token, error) {
	b.mu.Lock()
	err := b.err
	b.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if _, err := b.session.Token(); err != nil {
		return 0, err
	}
	return b.lease.Token, nil
}

// Lease returns the lease as acquired: it is never written again.
func (b *Bound) Lease() lease.Lease { return b.lease }

// TTL returns the session's TTL, as the lease records it.
func (b *Bound) TTL() time.Duration { return b.lease.TTL }

// ValidUntil returns the session's validity.
func (b *Bound) ValidUntil() time.Time { return b.session.ValidUntil() }

// Remaining returns how long the lease stays valid, or 0 once it has
// ended or expired.
func (b *Bound) Remaining() time.Duration {
	if b.Err() != nil {
		return 0
	}
	return b.session.Remaining()
}

// Err returns nil while the lease is held, and the cause once it (or its
// session) has ended. It does not report expiry; Token does.
func (b *Bound) Err() error {
	b.mu.Lock()
	err := b.err
	b.mu.Unlock()
	if err != nil {
		return err
	}
	return b.session.Err()
}

// Context returns a context cancelled when the Bound ends, with its cause
// (context.Cause): the session's when the session ended first.
func (b *Bound) Context() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		c := new(boundCtx)
		c.ctx, c.cancel = context.WithCancelCause(b.session.ctx)
		if b.err != nil {
			c.cancel(b.err)
		}
		b.ctx = c
	}
	return b.ctx.ctx
}

// Lost returns a channel closed when the Bound ends.
func (b *Bound) Lost() <-chan struct{} { return b.Context().Done() }

// Poison ends the Bound with a *lease.LostError, and reports whether this
// call ended it.
func (b *Bound) Poison(reason lease.LossReason, err error) bool {
	return b.end(&lease.LostError{Reason: reason, Err: err})
}

// MarkReleased ends the Bound with lease.ErrReleased, before the lease is
// released at the store, so that no token is handed out from then on. It
// reports whether this call ended it (false when it, or its session, had
// already ended).
func (b *Bound) MarkReleased() bool { return b.end(lease.ErrReleased) }

func (b *Bound) end(cause error) bool {
	b.mu.Lock()
	if b.err != nil || b.session.Err() != nil {
		b.mu.Unlock()
		return false
	}
	b.err = cause
	c := b.ctx
	b.mu.Unlock()
	if c != nil {
		c.cancel(cause)
	}
	return true
}

// ReleaseBound ends b (MarkReleased) and, if it was held, releases its
// lease at the store with a compare-and-swap on its revision, bounded by
// the session's validity: never after it. It returns the Bound's cause when
// it, or its session, had ended otherwise (nothing is released), and
// lease.ErrExpired when the validity has passed. lease.ErrLost from the
// store means there was nothing of ours left to release.
func ReleaseBound(ctx context.Context, store lease.Store, b *Bound) error {
	b.MarkReleased()
	if cause := b.Err(); cause != lease.ErrReleased {
		return cause
	}
	remaining := b.session.Remaining()
	if remaining <= 0 {
		return lease.ErrExpired
	}
	ctx, cancel := context.WithTimeout(ctx, remaining)
	defer cancel()
	return store.Release(ctx, b.lease)
}
