package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// Guard is one held lock. Its watchdog renews the lease until the guard is
// released, or poisons it when renewals cannot succeed in time or the store
// says the lease is lost. From that moment Token fails, Lost is closed and
// Context is cancelled with the cause.
//
// A Guard is safe for concurrent use. A guard that is never released is
// renewed until its Locker closes.
type Guard struct {
	l        *Locker
	hold     *leasehold.Hold
	resource string

	mu       sync.Mutex
	dog      *actor.PID // set by the keeper before the guard is handed out
	released bool       // a release reached a final answer: relErr
	relErr   error
}

// Token returns the fencing token of this acquisition while the lock is
// held and valid. It fails with lease.ErrReleased once released, with an error
// matching lease.ErrLost (an *lease.LostError) once poisoned, and with
// lease.ErrExpired (also matching lease.ErrLost) once the validity has
// passed without a renewal. Read it before every fenced write.
func (g *Guard) Token() (lease.Token, error) { return g.hold.Token() }

// Lost returns a channel that is closed when the guard ends: poisoned
// (the lock is lost) or released.
func (g *Guard) Lost() <-chan struct{} { return g.hold.Lost() }

// Context returns a context cancelled when the guard ends, with the cause
// (context.Cause): an error matching lease.ErrLost when the lock was lost,
// lease.ErrReleased when it was released. Run the critical section under it.
func (g *Guard) Context() context.Context { return g.hold.Context() }

// Err returns nil while the guard is held, and the cause once it has ended.
func (g *Guard) Err() error { return g.hold.Err() }

// Remaining returns how long the lock stays valid without another
// renewal, on this process's monotonic clock, or 0 once it has ended or
// expired.
func (g *Guard) Remaining() time.Duration { return g.hold.Remaining() }

// ValidUntil returns until when the holder may act: the send time of the
// last successful acquire or renew, plus its TTL, minus the safety margin.
func (g *Guard) ValidUntil() time.Time { return g.hold.ValidUntil() }

// TTL returns the TTL the watchdog renews with (changed by Extend).
func (g *Guard) TTL() time.Duration { return g.hold.TTL() }

// OwnerID returns the owner ID of the Locker that holds the lock, as
// written in the store.
func (g *Guard) OwnerID() string { return g.hold.Lease().OwnerID }

// Term returns the identity of this guard's tenure, as written in the
// store: fresh for every acquisition.
func (g *Guard) Term() string { return g.hold.Lease().Term }

// Tenure returns the guard's token and term, for a lease.Fence or a
// database's fencing rule (see lease.Fence). Unlike Token it is not checked
// against the clock: read Token before every write.
func (g *Guard) Tenure() lease.Tenure { return g.hold.Lease().Tenure() }

// Resource returns the resource the lock is named after.
func (g *Guard) Resource() string { return g.resource }

// Fenced reads the token and runs write with it under f (lease.Fence.Do):
// write runs only while the lock is held and valid, and only if f has not
// admitted a newer token. It returns Token's error, a stale-token error
// matching lease.ErrStaleToken, or write's error.
func (g *Guard) Fenced(f *lease.Fence, write func(lease.Token) error) error {
	token, err := g.Token()
	if err != nil {
		return fmt.Errorf("lock: %s: %w", g.resource, err)
	}
	return f.Do(lease.Tenure{Token: token, Term: g.hold.Lease().Term}, func() error { return write(token) })
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
// its previous TTL.
func (g *Guard) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		return &lease.FieldError{Field: "ttl", Reason: "must be positive, got " + ttl.String()}
	}
	if err := g.hold.Err(); err != nil {
		return fmt.Errorf("lock: extend %s: %w", g.resource, err)
	}
	// The watchdog answers while it runs; when it stops, the Hold has
	// ended and its context stops the wait.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(g.hold.Context(), func() { cancel(context.Cause(g.hold.Context())) })
	defer stop()
	if _, err := leasehold.RequestExtend(ctx, g.l.sys.Root, g.watchdog(), ttl); err != nil {
		return fmt.Errorf("lock: extend %s to %v: %w", g.resource, ttl, err)
	}
	return nil
}

// Release gives the lock up: it ends the guard (Token fails with
// lease.ErrReleased from now on), stops its watchdog and deletes the key with a
// compare-and-swap on the revision of the last renewal, so that a newer
// owner's key is never deleted.
//
// It is idempotent: once a release has reached a final answer, later calls
// return it. nil means the key was deleted. An error matching
// lease.ErrLost means there was nothing of ours to delete: the lock had
// been lost (poisoned, taken over or expired) and the store was not
// changed. Another error (the store unavailable, ctx done) leaves the
// outcome open: the key expires by its TTL, and a later Release retries
// while the validity lasts. Release never deletes after the validity.
func (g *Guard) Release(ctx context.Context) error { return g.release(ctx, true) }

func (g *Guard) release(ctx context.Context, stopDog bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return g.relErr
	}
	// No token and no new renewal from now on; a renewal in flight is
	// aborted. When the Hold had already ended (poisoned, or marked by
	// Close or by an earlier attempt), its watchdog is stopped or being
	// stopped by the keeper: sending to it would only make dead letters.
	ended := g.hold.MarkReleased()
	if stopDog && ended {
		g.stopWatchdog(ctx)
	}
	err := leasehold.Release(ctx, g.l.store, g.hold)
	le := g.hold.Lease()
	if err == nil || errors.Is(err, lease.ErrLost) || fatal(err) {
		g.released, g.relErr = true, err
	}
	if err != nil {
		err = fmt.Errorf("lock: release %s: %w", g.resource, err)
		if g.released {
			g.relErr = err
		}
		g.l.log.Debug("lock: not released", "lease_id", le.ID, "token", uint64(le.Token), "error", err)
		g.l.emit(actors.NotReleased{Subject: subject(le), Token: le.Token, Err: err})
		return err
	}
	g.l.log.Debug("lock: released", "lease_id", le.ID, "token", uint64(le.Token))
	g.l.emit(actors.Released{Subject: subject(le), Token: le.Token})
	return nil
}

// stopWatchdog has the keeper stop the guard's watchdog, and waits until it
// has terminated (the renewal in flight, if any, finished, so that the
// revision does not move under the compare-and-swap), at most the stop
// timeout and never past ctx.
func (g *Guard) stopWatchdog(ctx context.Context) {
	le := g.hold.Lease()
	stopped := make(chan struct{})
	if !g.l.sendKeeper(stopWatchdog{key: guardKey{le.ID, le.Token}, stopped: stopped}) {
		stopped = nil // Close is stopping every watchdog
	}
	t := time.NewTimer(g.l.cfg.leaseConfig("", "", le.TTL, 0).EffectiveStopTimeout())
	defer t.Stop()
	select {
	case <-stopped:
	case <-g.l.keeperDone: // closed: every watchdog has stopped
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
	if done || errors.As(g.hold.Err(), &lost) {
		return false, nil
	}
	return true, g.release(ctx, false)
}

func (g *Guard) watchdog() *actor.PID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dog
}

func (g *Guard) setWatchdog(pid *actor.PID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dog = pid
}
