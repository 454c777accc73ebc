package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// Guard is one held lock. A lock with a lease of its own has a watchdog
// that renews the lease until the guard is released, or poisons it when
// renewals cannot succeed in time or the store says the lease is lost; a
// lock held under the Locker's session (Config.Session) is valid while the
// session is, and is lost with it. From that moment Token fails, Lost is
// closed and Context is cancelled with the cause.
//
// A Guard is safe for concurrent use. A guard that is never released is
// held until its Locker closes.
type Guard struct {
	l        *Locker
	t        tenure           // hold or bound
	hold     *leasehold.Hold  // a lease of its own; nil under a session
	bound    *leasehold.Bound // under a session; nil otherwise
	sess     *session         // the session of bound
	pend     *pendingGuard    // while its watchdog has not started (Locker.pending.mu)
	resource string
	// prev and next link the guards held under sess (session.mu), so that
	// a lock under a session costs no map entry.
	prev, next *Guard

	mu       sync.Mutex
	released bool // a release reached a final answer: relErr
	relErr   error
}

// boundGuard is a Guard under a session and its Bound, in one allocation.
type boundGuard struct {
	g Guard
	b leasehold.Bound
}

// newBoundGuard returns the guard of a lock on resource held under s as l.
// It returns an error matching lease.ErrInvalid when l is not a valid
// lease.
func newBoundGuard(l *Locker, s *session, resource string, le lease.Lease) (*Guard, error) {
	bg := new(boundGuard)
	if err := bg.b.Init(s.hold, le); err != nil {
		return nil, err
	}
	g := &bg.g
	g.l, g.t, g.bound, g.sess, g.resource = l, &bg.b, &bg.b, s, resource
	return g, nil
}

// tenure is what a Guard reads of its lease: a leasehold.Hold, or a
// leasehold.Bound under a session.
type tenure interface {
	Token() (lease.Token, error)
	Lost() <-chan struct{}
	Context() context.Context
	Err() error
	Remaining() time.Duration
	ValidUntil() time.Time
	TTL() time.Duration
	Lease() lease.Lease
	MarkReleased() bool
}

var (
	_ tenure = (*leasehold.Hold)(nil)
	_ tenure = (*leasehold.Bound)(nil)
)

// Token returns the fencing token of this acquisition while the lock is
// held and valid. It fails with lease.ErrReleased once released, with an error
// matching lease.ErrLost (an *lease.LostError) once poisoned, and with
// lease.ErrExpired (also matching lease.ErrLost) once the validity has
// passed without a renewal. Read it before every fenced write.
func (g *Guard) Token() (lease.Token, error) { return g.t.Token() }

// Lost returns a channel that is closed when the guard ends: poisoned
// (the lock is lost) or released.
func (g *Guard) Lost() <-chan struct{} { return g.t.Lost() }

// Context returns a context cancelled when the guard ends, with the cause
// (context.Cause): an error matching lease.ErrLost when the lock was lost,
// lease.ErrReleased when it was released. Run the critical section under it.
func (g *Guard) Context() context.Context { return g.t.Context() }

// Err returns nil while the guard is held, and the cause once it has ended.
func (g *Guard) Err() error { return g.t.Err() }

// Remaining returns how long the lock stays valid without another
// renewal (of its lease, or of its session), on this process's monotonic
// clock, or 0 once it has ended or expired.
func (g *Guard) Remaining() time.Duration { return g.t.Remaining() }

// ValidUntil returns until when the holder may act: the send time of the
// last successful acquire or renew (of the lock's lease, or of its
// session), plus its TTL, minus the safety margin.
func (g *Guard) ValidUntil() time.Time { return g.t.ValidUntil() }

// TTL returns the TTL the watchdog renews with (changed by Extend); under
// a session, the session's.
func (g *Guard) TTL() time.Duration { return g.t.TTL() }

// OwnerID returns the owner ID of the Locker that holds the lock, as
// written in the store.
func (g *Guard) OwnerID() string { return g.t.Lease().OwnerID }

// Term returns the identity of this guard's tenure, as written in the
// store: fresh for every acquisition.
func (g *Guard) Term() string { return g.t.Lease().Term }

// Tenure returns the guard's token and term, for a lease.Fence or a
// database's fencing rule (see lease.Fence). Unlike Token it is not checked
// against the clock: read Token before every write.
func (g *Guard) Tenure() lease.Tenure { return g.t.Lease().Tenure() }

// Resource returns the resource the lock is named after.
func (g *Guard) Resource() string { return g.resource }

// Session returns the lease ID of the session the lock is held under, or
// "" for a lock with a lease of its own.
func (g *Guard) Session() string { return g.sessionID() }

func (g *Guard) sessionID() string {
	if g.sess == nil {
		return ""
	}
	return g.sess.cfg.LeaseID
}

// Fenced reads the token and runs write with it under f (lease.Fence.Do):
// write runs only while the lock is held and valid, and only if f has not
// admitted a newer token. It returns Token's error, a stale-token error
// matching lease.ErrStaleToken, or write's error.
func (g *Guard) Fenced(f *lease.Fence, write func(lease.Token) error) error {
	token, err := g.Token()
	if err != nil {
		return fmt.Errorf("lock: %s: %w", g.resource, err)
	}
	return f.Do(lease.Tenure{Token: token, Term: g.t.Lease().Term}, func() error { return write(token) })
}

// Extend renews the lock at once with ttl, and makes the watchdog renew
// with ttl from then on. It returns nil when the renewal with ttl
// succeeded. An error matching lease.ErrInvalid means ttl does not fit the
// lock's margins and nothing changed; any other error means the renewal
// with ttl has not succeeded yet: the watchdog keeps ttl and goes on
// retrying, or has poisoned the guard (the error then matches
// lease.ErrLost).
//
// A TTL below the store's own floor (natsstore: 1 s) is refused by the
// store with an error matching lease.ErrInvalid: the lock is kept, with
// its previous TTL. A lock held under the session cannot be extended
// (lease.ErrInvalid): acquire it WithOwnLease.
func (g *Guard) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		return &lease.FieldError{Field: "ttl", Reason: "must be positive, got " + ttl.String()}
	}
	if g.hold == nil {
		return &lease.FieldError{Field: "ttl", Reason: "a lock held under the session lasts as long as the " +
			"session; acquire it WithOwnLease to extend it"}
	}
	if err := g.hold.Err(); err != nil {
		return fmt.Errorf("lock: extend %s: %w", g.resource, err)
	}
	// The watchdog answers while it runs; when it stops, the Hold has
	// ended and its context stops the wait.
	le := g.hold.Lease()
	reply := make(chan leasehold.ExtendResult, 1)
	if !g.l.startNow(g) || !g.l.sendKeeper(extendWatchdog{key: guardKey{le.ID, le.Token}, ext: leasehold.Extend{TTL: ttl, Reply: reply}}) {
		return fmt.Errorf("lock: extend %s: %w", g.resource, lease.ErrClosed)
	}
	select {
	case r := <-reply:
		if r.Err != nil {
			return fmt.Errorf("lock: extend %s to %v: %w", g.resource, ttl, r.Err)
		}
		return nil
	case <-g.hold.Context().Done():
		return fmt.Errorf("lock: extend %s to %v: %w", g.resource, ttl, context.Cause(g.hold.Context()))
	case <-ctx.Done():
		return fmt.Errorf("lock: extend %s to %v: %w", g.resource, ttl, context.Cause(ctx))
	}
}

// Release gives the lock up: it ends the guard (Token fails with
// lease.ErrReleased from now on), stops its watchdog and deletes the key with a
// compare-and-swap on the revision of the last renewal, so that a newer
// owner's key is never deleted. A lock under the session is deleted the
// same way; the session stays.
//
// It is idempotent: once a release has reached a final answer, later calls
// return it. nil means the key was deleted. An error matching
// lease.ErrLost means there was nothing of ours to delete: the lock had
// been lost (poisoned, taken over or expired) and the store was not
// changed. Another error (the store unavailable, ctx done) leaves the
// outcome open: the key expires by its TTL (or with its session), and a
// later Release retries while the validity lasts. Release never deletes
// after the validity.
func (g *Guard) Release(ctx context.Context) error { return g.release(ctx, true) }

func (g *Guard) release(ctx context.Context, stopDog bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return g.relErr
	}
	var err error
	if g.bound != nil {
		g.sess.remove(g)
		err = leasehold.ReleaseBound(ctx, g.l.store, g.bound)
	} else {
		// A lock released before its watchdog started never gets one, and
		// was never renewed: its revision is final.
		never := g.l.unpend(g)
		// No token and no new renewal from now on; a renewal in flight is
		// aborted. When the Hold had already ended (poisoned, or marked by
		// Close or by an earlier attempt), its watchdog is stopped or being
		// stopped by the keeper: sending to it would only make dead letters.
		ended, inFlight := g.hold.MarkReleasedInFlight()
		switch {
		case never:
			g.l.unheld()
		case stopDog && ended:
			g.stopWatchdog(ctx, inFlight)
		}
		err = leasehold.Release(ctx, g.l.store, g.hold)
	}
	le := g.t.Lease()
	if err == nil || errors.Is(err, lease.ErrLost) || fatal(err) {
		g.released, g.relErr = true, err
	}
	g.l.queues.poke(g)
	if err != nil {
		err = fmt.Errorf("lock: release %s: %w", g.resource, err)
		if g.released {
			g.relErr = err
		}
		g.l.log.Debug("lock: not released", "lease_id", le.ID, "token", uint64(le.Token), "error", err)
		g.l.emit(LockNotReleased{Subject: subject(le), Token: le.Token, Err: err})
		return err
	}
	if g.l.debug() {
		g.l.log.Debug("lock: released", "lease_id", le.ID, "token", uint64(le.Token))
	}
	if g.l.cfg.OnEvent != nil {
		g.l.emit(LockReleased{Subject: subject(le), Token: le.Token})
	}
	return nil
}

// finish records the final answer of a release Close made for g.
func (g *Guard) finish(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.released {
		g.released, g.relErr = true, err
	}
}

// stopWatchdog has the keeper stop the guard's watchdog. When a renewal was
// in flight, it waits until the watchdog has terminated (that renewal
// finished, so that the revision does not move under the compare-and-swap),
// at most the stop timeout and never past ctx; otherwise no renewal can
// start any more, and it does not wait.
func (g *Guard) stopWatchdog(ctx context.Context, inFlight bool) {
	le := g.hold.Lease()
	var stopped chan struct{}
	if inFlight {
		stopped = make(chan struct{})
	}
	if !g.l.sendKeeper(stopWatchdog{key: guardKey{le.ID, le.Token}, stopped: stopped}) || !inFlight {
		return // Close is stopping every watchdog, or there is nothing to wait for
	}
	t := time.NewTimer(g.l.cfg.leaseConfig("", "", le.TTL, 0).EffectiveStopTimeout())
	defer t.Stop()
	select {
	case <-stopped:
	case <-g.l.host.done: // closed: every watchdog has stopped
	case <-t.C:
		g.l.log.Debug("lock: watchdog did not stop in time; releasing anyway", "lease_id", le.ID)
	case <-ctx.Done():
	}
}

// closeRelease releases g for Close, unless a release already reached a
// final answer or g was lost before: tried reports whether it tried.
func (g *Guard) closeRelease(ctx context.Context) (tried bool, err error) {
	g.mu.Lock()
	done := g.released
	g.mu.Unlock()
	var lost *lease.LostError
	if done || errors.As(g.t.Err(), &lost) {
		return false, nil
	}
	return true, g.release(ctx, false)
}
