package lock_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

func TestPoisonWhenRenewalsKeepFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second,
			SafetyMargin: time.Second, StopTimeout: 2 * time.Second})
		g, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		start := time.Now()
		r.faults.FailAll(leasetest.OpRenew, lease.ErrUnavailable)

		<-g.Lost()
		assert.Equal(t, start.Add(7*time.Second), time.Now(), "poisoned at the renew deadline: TTL - margin - stop")
		_, err = g.Token()
		var lost *lease.LostError
		require.ErrorAs(t, err, &lost)
		assert.Equal(t, lease.LossDeadline, lost.Reason)
		assert.ErrorIs(t, err, lease.ErrLost)
		assert.ErrorIs(t, err, lease.ErrUnavailable, "the last store error is kept")
		assert.ErrorIs(t, context.Cause(g.Context()), lease.ErrLost)
		assert.ErrorIs(t, g.Err(), lease.ErrLost)
		assert.Zero(t, g.Remaining())
		_, _, ok := r.holder("res")
		assert.True(t, ok, "poisoned before the key expires at the store")

		synctest.Wait() // the watchdog reports after it has poisoned the guard
		assert.Greater(t, count[lock.LockRenewalFailed](r.rec), 2, "retried before giving up")
		assert.Equal(t, 1, count[lock.LockPoisoned](r.rec))
		assert.Zero(t, r.locker.Held(), "the keeper stopped the poisoned watchdog")
		calls := r.faults.Calls(leasetest.OpRenew)
		time.Sleep(time.Minute)
		assert.Equal(t, calls, r.faults.Calls(leasetest.OpRenew), "no renewal after the poison")
		assert.ErrorIs(t, g.Extend(t.Context(), 20*time.Second), lease.ErrLost)
	})
}

func TestPoisonAtOnceWhenTheStoreSaysLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{TTL: 9 * time.Second}) // renewals every 3 s
		g, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		start := time.Now()
		r.mem.Tamper("res", "intruder", time.Minute) // an operator hands the key to someone else

		<-g.Lost()
		assert.Equal(t, start.Add(3*time.Second), time.Now(), "poisoned at the first renewal")
		var lost *lease.LostError
		require.ErrorAs(t, g.Err(), &lost)
		assert.Equal(t, lease.LossTaken, lost.Reason)
		assert.Equal(t, 1, r.faults.Calls(leasetest.OpRenew), "no retry")
	})
}

func TestTransientRenewalFailuresDoNotPoison(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{TTL: 9 * time.Second})
		g, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		r.faults.FailRenewals(3)
		time.Sleep(31 * time.Second) // not at a renewal tick (helpers_test.go)
		synctest.Wait()
		_, err = g.Token()
		require.NoError(t, err)
		assert.Equal(t, 3, count[lock.LockRenewalFailed](r.rec))
		assert.Zero(t, count[lock.LockPoisoned](r.rec))
	})
}

func TestWatchdogThatStopsPoisonsItsGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		defer mem.Close()
		l, err := lock.New(panicOnRenew{mem}, lock.Config{TTL: 9 * time.Second})
		require.NoError(t, err)
		defer l.Close(context.Background())
		g, err := l.Acquire(t.Context(), "res")
		require.NoError(t, err)
		<-g.Lost()
		assert.ErrorIs(t, g.Err(), lock.ErrWatchdogStopped)
		assert.ErrorIs(t, g.Err(), lease.ErrLost)
		synctest.Wait()
		assert.Zero(t, l.Held())
	})
}

// panicOnRenew is a store with a bug: its Renew panics.
type panicOnRenew struct{ lease.Store }

func (panicOnRenew) Renew(context.Context, lease.Lease) (lease.Lease, error) { panic("renew bug") }

func TestExtendChangesWhatTheWatchdogRenews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		defer mem.Close()
		faults := leasetest.NewFaultStore(mem)
		store := &recordingStore{Store: faults}
		l, err := lock.New(store, lock.Config{TTL: 3 * time.Second}) // renew every 1 s
		require.NoError(t, err)
		defer l.Close(context.Background())
		g, err := l.Acquire(t.Context(), "res")
		require.NoError(t, err)
		start := time.Now()

		time.Sleep(2500 * time.Millisecond)
		require.NoError(t, g.Extend(t.Context(), 12*time.Second))
		extendedAt := time.Now()
		assert.Equal(t, 12*time.Second, g.TTL())
		assert.Equal(t, 12*time.Second-1200*time.Millisecond, g.Remaining(), "renewed at once with the new TTL")

		time.Sleep(21 * time.Second)
		synctest.Wait()
		renewed, at := store.renewals()
		// 1 s, 2 s with 3 s; 2.5 s (Extend) then every 4 s (12 s / 3) with 12 s.
		want := []time.Duration{1000, 2000, 2500, 6500, 10500, 14500, 18500, 22500} // ms
		require.Len(t, renewed, len(want))
		for i, w := range want {
			assert.Equal(t, start.Add(w*time.Millisecond), at[i], "renewal %d", i)
			ttl := 3 * time.Second
			if !at[i].Before(extendedAt) {
				ttl = 12 * time.Second
			}
			assert.Equal(t, ttl, renewed[i].TTL, "renewal %d writes the TTL in force", i)
		}

		// The store keeps the key for the new TTL: with renewals failing
		// from now on, it outlives the old 3 s TTL by far.
		faults.FailAll(leasetest.OpRenew, lease.ErrUnavailable)
		last := at[len(at)-1]
		other, err := lock.New(mem, lock.Config{OwnerID: "other"})
		require.NoError(t, err)
		defer other.Close(context.Background())
		time.Sleep(time.Until(last.Add(11 * time.Second)))
		_, err = other.TryAcquire(t.Context(), "res")
		assert.ErrorIs(t, err, lock.ErrHeld, "3 s after the last renewal")
		assert.True(t, closed(g.Lost()), "the holder gave up before the key expired")
		time.Sleep(time.Until(last.Add(12 * time.Second)))
		_, err = other.TryAcquire(t.Context(), "res")
		assert.NoError(t, err, "expired 12 s after the last renewal")
	})
}

func TestExtendRefusesBadTTLs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{TTL: 6 * time.Second})
		g, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		assert.ErrorIs(t, g.Extend(t.Context(), 0), lease.ErrInvalid)
		assert.ErrorIs(t, g.Extend(t.Context(), time.Millisecond), lease.ErrInvalid, "too short for the margins")
		assert.Equal(t, 6*time.Second, g.TTL(), "nothing changed")
		_, err = g.Token()
		require.NoError(t, err)

		require.NoError(t, g.Release(t.Context()))
		assert.ErrorIs(t, g.Extend(t.Context(), 10*time.Second), lease.ErrReleased)
	})
}

func TestExtendWaitsAtMostForItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{TTL: 10 * time.Second})
		g, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		r.faults.Delay(leasetest.OpRenew, time.Hour) // a hanging store
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = g.Extend(ctx, 20*time.Second)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, start.Add(500*time.Millisecond), time.Now())
	})
}

func TestReleaseAfterLossLeavesTheNewOwnersKey(t *testing.T) {
	t.Run("poisoned, expired and taken", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := leasetest.NewMemStore()
			a := newRigOn(t, mem, lock.Config{OwnerID: "node-a", TTL: 10 * time.Second})
			b := newRigOn(t, mem, lock.Config{OwnerID: "node-b"})
			ga, err := a.locker.Acquire(t.Context(), "res")
			require.NoError(t, err)
			a.faults.FailAll(leasetest.OpRenew, lease.ErrUnavailable)
			gb, err := b.locker.Acquire(t.Context(), "res") // after A's key expired
			require.NoError(t, err)
			owner, rev, _ := mem.Holder("res")

			// In the background, A's Locker tried to give back the key of the
			// lock lost at its renew deadline, and found it expired.
			synctest.Wait()
			calls := a.faults.Calls(leasetest.OpRelease)
			err = ga.Release(t.Context())
			assert.ErrorIs(t, err, lease.ErrLost, "nothing of A's left to release")
			assert.Equal(t, calls, a.faults.Calls(leasetest.OpRelease), "a poisoned guard does not even ask")
			o2, r2, ok := mem.Holder("res")
			require.True(t, ok)
			assert.Equal(t, owner, o2)
			assert.Equal(t, rev, r2)
			assert.Equal(t, gb.OwnerID(), o2.OwnerID)
			assert.ErrorIs(t, ga.Release(t.Context()), lease.ErrLost, "idempotent")
			assert.Equal(t, 1, count[lock.LockNotReleased](a.rec))
			assert.Zero(t, count[lock.LockReleased](a.rec))
		})
	})
	t.Run("taken before the watchdog noticed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, lock.Config{TTL: 30 * time.Second})
			g, err := r.locker.Acquire(t.Context(), "res")
			require.NoError(t, err)
			r.mem.Tamper("res", "newer-owner", time.Minute)
			_, rev, _ := r.holder("res")

			err = g.Release(t.Context())
			assert.ErrorIs(t, err, lease.ErrLost, "the compare-and-swap fails")
			assert.Equal(t, 1, r.faults.Calls(leasetest.OpRelease))
			owner, rev2, ok := r.holder("res")
			require.True(t, ok)
			assert.Equal(t, "newer-owner", owner)
			assert.Equal(t, rev, rev2, "untouched")
		})
	})
	t.Run("expired while the holder was paused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := leasetest.NewMemStore()
			a := newRigOn(t, mem, lock.Config{OwnerID: "node-a", TTL: 10 * time.Second})
			b := newRigOn(t, mem, lock.Config{OwnerID: "node-b"})
			ga, err := a.locker.Acquire(t.Context(), "res")
			require.NoError(t, err)
			a.faults.Delay(leasetest.OpRenew, time.Hour) // renewals hang: A looks paused
			gb, err := b.locker.Acquire(t.Context(), "res")
			require.NoError(t, err)
			_, rev, _ := mem.Holder("res")
			assert.Error(t, ga.Release(t.Context()))
			owner, rev2, ok := mem.Holder("res")
			require.True(t, ok)
			assert.Equal(t, gb.OwnerID(), owner.OwnerID)
			assert.Equal(t, rev, rev2)
		})
	})
}

func TestReleaseIsIdempotentUnderConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{})
		g, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { assert.NoError(t, g.Release(t.Context())) })
		}
		wg.Wait()
		assert.Equal(t, 1, r.faults.Calls(leasetest.OpRelease))
		assert.Equal(t, 1, count[lock.LockReleased](r.rec))
	})
}

func TestReleaseRetriesAfterATransientFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{})
		g, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		r.faults.FailNext(leasetest.OpRelease, 1, lease.ErrUnavailable)
		assert.ErrorIs(t, g.Release(t.Context()), lease.ErrUnavailable)
		_, err = g.Token()
		assert.ErrorIs(t, err, lease.ErrReleased, "no token once a release started")
		_, _, ok := r.holder("res")
		assert.True(t, ok, "still at the store")
		time.Sleep(5 * time.Second) // no watchdog renews it meanwhile, but it is still valid
		require.NoError(t, g.Release(t.Context()))
		_, _, ok = r.holder("res")
		assert.False(t, ok)
		assert.NoError(t, g.Release(t.Context()))
		assert.Equal(t, 2, r.faults.Calls(leasetest.OpRelease))
	})
}

func TestReleaseAfterTheValidityDoesNotDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{TTL: 10 * time.Second})
		g, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		r.faults.FailNext(leasetest.OpRelease, 1, lease.ErrUnavailable)
		assert.Error(t, g.Release(t.Context()))
		time.Sleep(9 * time.Second) // validity: TTL - margin = 9 s
		err = g.Release(t.Context())
		assert.ErrorIs(t, err, lease.ErrExpired)
		assert.Equal(t, 1, r.faults.Calls(leasetest.OpRelease), "never deletes after the validity")
	})
}

func TestStaleHolderIsFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		a := newRigOn(t, mem, lock.Config{OwnerID: "node-a", TTL: 10 * time.Second})
		b := newRigOn(t, mem, lock.Config{OwnerID: "node-b"})
		var fence lease.Fence
		var log []lease.Token
		write := func(tok lease.Token) error { log = append(log, tok); return nil }

		ga, err := a.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		require.NoError(t, ga.Fenced(&fence, write))
		stale := ga.Tenure() // A keeps its token, then pauses past its TTL
		staleToken := stale.Token
		a.faults.Delay(leasetest.OpRenew, time.Hour)

		gb, err := b.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		require.NoError(t, gb.Fenced(&fence, write))

		// A woke up: the guard refuses, and a write with the token it kept
		// is refused by the fence.
		assert.ErrorIs(t, ga.Fenced(&fence, write), lease.ErrLost)
		err = fence.Do(stale, func() error { return write(staleToken) })
		assert.ErrorIs(t, err, lease.ErrStaleToken)
		st := fence.Stats()
		assert.Equal(t, uint64(2), st.Accepted)
		assert.Equal(t, uint64(1), st.Rejected)
		tb, _ := gb.Token()
		assert.Equal(t, tb, st.Highest.Token)
		assert.Equal(t, []lease.Token{staleToken, tb}, log, "the stale write never happened")
	})
}
