package lock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// A lock whose renewals all failed until its renew deadline is lost
// (lease.LossDeadline): the store did not answer, or the process was
// paused. Its guard has ended and nothing renews its key, which a store
// that keeps values past their TTL (natsstore's ExpiryGrace) may still
// hold when it answers again, while the waiters, whose own attempts failed
// through the same outage, count the TTL again from then. So the Locker
// gives the key back in the background: a release with a compare-and-swap
// on the revision of the lock's last write, retried until the store
// answers, from the lock's TTL after that write (when a store without a
// grace expires it) to twice the TTL after it. A lock taken over
// or expired meanwhile is left alone (the compare-and-swap fails), and the
// release only frees a key that nobody else holds: it changes when the
// waiters may take it, never who may act.

// giveBackRetry paces the releases of a lost lock's key.
var giveBackRetry = backoff.Policy{Base: 25 * time.Millisecond, Cap: 250 * time.Millisecond, Jitter: backoff.Full}

// giveBackLapsed starts giving back the key of h, whose watchdog has
// stopped, if h was lost at its renew deadline.
func (l *Locker) giveBackLapsed(h *leasehold.Hold) {
	var lost *lease.LostError
	if !errors.As(h.Err(), &lost) || lost.Reason != lease.LossDeadline {
		return
	}
	le := h.Lease()
	from, until := h.RenewedAt().Add(le.TTL), h.RenewedAt().Add(2*le.TTL)
	if !time.Now().Before(until) {
		return
	}
	l.life.lapses.Add(1)
	go func() {
		defer l.life.lapses.Done()
		l.releaseLapsed(le, from, until)
	}()
}

// releaseLapsed releases le until the store answers or until passes.
func (l *Locker) releaseLapsed(le lease.Lease, from, until time.Time) {
	// Not before the key would have expired at a store that expires keys
	// at their TTL (its TTL after the last write was sent, past the lock's
	// validity): such a store has nothing left to give back then, and the
	// guard's owner, told at the renew deadline, has had its stop budget.
	if !sleepUntil(l.life.bg, from) {
		return
	}
	b := backoff.Backoff{Policy: giveBackRetry}
	opTimeout := leasehold.OpTimeout(l.cfg.leaseConfig(le.ID, le.OwnerID, le.TTL, 0))
	for {
		deadline := time.Now().Add(opTimeout)
		if until.Before(deadline) {
			deadline = until
		}
		ctx, cancel := context.WithDeadline(l.life.bg, deadline)
		err := l.store.Release(ctx, le)
		cancel()
		switch {
		case err == nil:
			l.log.LogAttrs(context.Background(), slog.LevelInfo, "lock: the key of a lock lost at its renew deadline was given back",
				slog.String("lease_id", le.ID), slog.Uint64("token", uint64(le.Token)))
			return
		case errors.Is(err, lease.ErrLost) || fatal(err):
			return // taken over, expired or released meanwhile
		}
		wait := b.Failed(time.Now())
		if l.life.bg.Err() != nil || !time.Now().Add(wait).Before(until) {
			l.log.LogAttrs(context.Background(), slog.LevelDebug, "lock: the key of a lost lock was not given back",
				slog.String("lease_id", le.ID), slog.Uint64("token", uint64(le.Token)), slog.Any("error", err))
			return
		}
		sleepUntil(l.life.bg, time.Now().Add(wait))
	}
}

// sleepUntil waits until t, and reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
