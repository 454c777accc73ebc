package leasehold

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

func TestWatchdogRenewsEveryPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 3 * time.Second, RenewInterval: time.Second})
		token, err := r.hold.Token()
		require.NoError(t, err)
		for range 10 {
			time.Sleep(time.Second)
			synctest.Wait()
			require.True(t, r.held(), "the lease is held at %v", time.Now())
		}
		renewed, at := all[Renewed](r.rec)
		require.Len(t, renewed, 10)
		for i := 1; i < len(at); i++ {
			assert.Equal(t, time.Second, at[i].Sub(at[i-1]), "renewal %d", i)
		}
		last := renewed[len(renewed)-1]
		assert.Equal(t, token, last.Token, "renewal never changes the token")
		assert.Equal(t, r.hold.Lease().Revision, last.Revision)
		assert.Equal(t, at[len(at)-1].Add(3*time.Second-300*time.Millisecond), r.hold.ValidUntil())
		assert.Zero(t, count[RenewalFailed](r.rec))
	})
}

func TestWatchdogRetriesTransientFailuresWithoutPoison(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		r.faults.FailRenewals(4)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		assert.Equal(t, 4, count[RenewalFailed](r.rec))
		assert.Zero(t, count[Poisoned](r.rec))
		assert.Empty(t, r.poison)
		_, err := r.hold.Token()
		require.NoError(t, err)
		require.True(t, r.held())
		failed, at := all[RenewalFailed](r.rec)
		assert.Equal(t, []int{1, 2, 3, 4}, []int{failed[0].Attempt, failed[1].Attempt, failed[2].Attempt, failed[3].Attempt})
		renewed, rat := all[Renewed](r.rec)
		require.NotEmpty(t, renewed)
		// Retry ceilings for a 2 s period: 100, 200, 400, 800 ms (full jitter below them).
		policy := retryPolicy(2 * time.Second)
		for i := 1; i < len(at); i++ {
			assert.LessOrEqual(t, at[i].Sub(at[i-1]), policy.Ceiling(i-1), "retry %d", i)
		}
		assert.LessOrEqual(t, rat[0].Sub(at[3]), policy.Ceiling(3), "retries are short, not a renew period")
		assert.ErrorIs(t, failed[0].Err, lease.ErrUnavailable)
	})
}

func TestWatchdogPersistentFailurePoisonsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second,
			SafetyMargin: time.Second, StopTimeout: 2 * time.Second}
		r := newWatchdogRig(t, cfg)
		start := time.Now()
		r.faults.FailAll(leasetest.OpRenew, lease.ErrUnavailable)
		p := <-r.poison
		poisonedAt := time.Now()
		assert.Equal(t, lease.LossDeadline, p.Reason)
		assert.ErrorIs(t, p.Err, lease.ErrLost)
		assert.ErrorIs(t, p.Err, lease.ErrUnavailable, "the last store error is kept")
		// Deadline = acquisition + TTL - margin - stop = 7 s.
		assert.Equal(t, start.Add(7*time.Second), poisonedAt, "poisoned exactly at the renew deadline")
		assert.True(t, r.held(), "the lease has not expired at the store yet")
		_, err := r.hold.Token()
		var lost *lease.LostError
		require.ErrorAs(t, err, &lost)
		assert.Equal(t, lease.LossDeadline, lost.Reason)
		assert.ErrorIs(t, context.Cause(r.hold.Context()), lease.ErrLost)
		select {
		case <-r.hold.Lost():
		default:
			t.Fatal("Lost is not closed")
		}
		assert.Greater(t, count[RenewalFailed](r.rec), 3, "retried several times before giving up")
		calls := r.faults.Calls(leasetest.OpRenew)
		time.Sleep(time.Minute)
		assert.Equal(t, calls, r.faults.Calls(leasetest.OpRenew), "no renewal after the poison")
		assert.Equal(t, 1, count[Poisoned](r.rec))
	})
}

func TestWatchdogHangingStorePoisonsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second}
		r := newWatchdogRig(t, cfg)
		start := time.Now()
		r.faults.Delay(leasetest.OpRenew, time.Hour)
		p := <-r.poison
		assert.Equal(t, lease.LossDeadline, p.Reason)
		assert.Equal(t, start.Add(8*time.Second), time.Now(), "TTL 10 s - margin 1 s - stop 1 s")
		assert.True(t, r.held())
	})
}

func TestWatchdogLostOwnershipPoisonsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(r *watchdogRig)
		reason lease.LossReason
		is     error
	}{
		{"answered lost", func(r *watchdogRig) { r.faults.LoseRenewals(1) }, lease.LossTaken, lease.ErrLost},
		{"taken by another owner", func(r *watchdogRig) { r.mem.Tamper(r.cfg.LeaseID, "owner-b", time.Minute) }, lease.LossTaken, lease.ErrLost},
		{"deleted", func(r *watchdogRig) { r.mem.Tamper(r.cfg.LeaseID, "", 0) }, lease.LossTaken, lease.ErrLost},
		{"corrupt", func(r *watchdogRig) { r.faults.FailNext(leasetest.OpRenew, 1, lease.ErrCorrupt) }, lease.LossStoreError, lease.ErrCorrupt},
		{"store closed", func(r *watchdogRig) { _ = r.mem.Close() }, lease.LossStoreError, lease.ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
				start := time.Now()
				tc.break_(r)
				p := <-r.poison
				assert.Equal(t, start.Add(2*time.Second), time.Now(), "poisoned at the first renewal")
				assert.Equal(t, tc.reason, p.Reason)
				assert.ErrorIs(t, p.Err, lease.ErrLost)
				assert.ErrorIs(t, p.Err, tc.is)
				assert.Equal(t, 1, r.faults.Calls(leasetest.OpRenew), "no retry")
				assert.Zero(t, count[RenewalFailed](r.rec))
				_, err := r.hold.Token()
				assert.ErrorIs(t, err, lease.ErrLost)
			})
		})
	}
}

func TestWatchdogDroppedAnswerIsSafe(t *testing.T) {
	// A renewal that lands but whose answer is lost leaves the hold with an
	// old revision; the store cannot tell a replay from a rival here, so the
	// next renewal is refused and the watchdog poisons: never a stale owner.
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		r.faults.DropAfterApply(leasetest.OpRenew, 1)
		p := <-r.poison
		assert.Equal(t, lease.LossTaken, p.Reason)
		assert.Equal(t, 1, count[RenewalFailed](r.rec))
	})
}

func TestWatchdogTTLShorterThanInterval(t *testing.T) {
	t.Run("config", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// 900 ms < TTL, but TTL/2 is shorter: renew every 500 ms.
			r := newWatchdogRig(t, lease.Config{TTL: time.Second, RenewInterval: 900 * time.Millisecond})
			for range 40 {
				time.Sleep(250 * time.Millisecond)
				synctest.Wait()
				require.True(t, r.held())
			}
			_, at := all[Renewed](r.rec)
			require.Len(t, at, 20)
			assert.Equal(t, 500*time.Millisecond, at[1].Sub(at[0]))
		})
	})
	t.Run("extend", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newWatchdogRig(t, lease.Config{TTL: time.Minute, RenewInterval: 10 * time.Second})
			res, err := RequestExtend(t.Context(), r.sys.Root, r.dog, 3*time.Second)
			require.NoError(t, err)
			assert.Equal(t, 3*time.Second, res.Lease.TTL)
			assert.Equal(t, 3*time.Second, r.hold.TTL())
			for range 60 {
				time.Sleep(500 * time.Millisecond)
				synctest.Wait()
				require.True(t, r.held(), "a 3 s lease renewed with a 10 s interval is still held")
			}
			_, at := all[Renewed](r.rec)
			for i := 1; i < len(at); i++ {
				assert.LessOrEqual(t, at[i].Sub(at[i-1]), 1500*time.Millisecond)
			}
		})
	})
}

func TestWatchdogExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		before := r.hold.Lease()
		time.Sleep(500 * time.Millisecond)
		res, err := RequestExtend(t.Context(), r.sys.Root, r.dog, 30*time.Second)
		require.NoError(t, err)
		assert.Greater(t, res.Lease.Revision, before.Revision, "renewed at once")
		assert.Equal(t, before.Token, res.Lease.Token)
		assert.Equal(t, time.Now().Add(27*time.Second), res.ValidUntil, "30 s - 10 % margin")
		assert.Equal(t, res.ValidUntil, r.hold.ValidUntil())

		_, err = RequestExtend(t.Context(), r.sys.Root, r.dog, 0)
		require.ErrorIs(t, err, lease.ErrInvalid)
		assert.Equal(t, 30*time.Second, r.hold.TTL(), "a refused TTL changes nothing")

		r.faults.FailRenewals(1)
		_, err = RequestExtend(t.Context(), r.sys.Root, r.dog, 20*time.Second)
		require.ErrorIs(t, err, lease.ErrUnavailable)
		assert.Equal(t, 20*time.Second, r.hold.TTL(), "the new TTL stays and is retried")
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, 20*time.Second, r.hold.Lease().TTL)

		r.faults.LoseRenewals(1)
		_, err = RequestExtend(t.Context(), r.sys.Root, r.dog, 20*time.Second)
		require.ErrorIs(t, err, lease.ErrLost)
		<-r.poison
		_, err = RequestExtend(t.Context(), r.sys.Root, r.dog, 20*time.Second)
		require.ErrorIs(t, err, lease.ErrLost, "extending a poisoned hold fails")
	})
}

func TestWatchdogStopsWhenReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		r.faults.Delay(leasetest.OpRenew, time.Hour)
		time.Sleep(3 * time.Second) // a renewal is in flight
		synctest.Wait()
		start := time.Now()
		require.True(t, r.hold.MarkReleased())
		require.NoError(t, r.sys.Root.StopFuture(r.dog).Wait())
		assert.Equal(t, start, time.Now(), "the renewal in flight was aborted at once")
		assert.Zero(t, count[Poisoned](r.rec))
		assert.Zero(t, count[RenewalFailed](r.rec))
		_, err := r.hold.Token()
		assert.ErrorIs(t, err, lease.ErrReleased)
		assert.ErrorIs(t, context.Cause(r.hold.Context()), lease.ErrReleased)
		assert.Equal(t, time.Duration(0), r.hold.Remaining())
		assert.False(t, r.hold.Poison(lease.LossTaken, nil), "a released hold cannot be poisoned")
	})
}

func TestWatchdogTimerCancelledOnStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		time.Sleep(3 * time.Second)
		require.NoError(t, r.sys.Root.StopFuture(r.dog).Wait())
		calls := r.faults.Calls(leasetest.OpRenew)
		time.Sleep(time.Minute)
		assert.Equal(t, calls, r.faults.Calls(leasetest.OpRenew))
		_, err := r.hold.Token()
		assert.ErrorIs(t, err, lease.ErrExpired, "no renewal: the validity ran out")
		assert.True(t, errors.Is(err, lease.ErrLost))
	})
}

func TestHoldValidation(t *testing.T) {
	l := lease.Lease{ID: "x", OwnerID: "o", Term: "t", Token: 5, TTL: time.Second, Revision: 5}
	_, err := NewHold(lease.Config{}, l, Now())
	require.NoError(t, err)
	_, err = NewHold(lease.Config{SafetyMargin: 2 * time.Second}, l, Now())
	require.ErrorIs(t, err, lease.ErrInvalid)
	l.Token = 0
	_, err = NewHold(lease.Config{}, l, Now())
	require.ErrorIs(t, err, lease.ErrInvalid)
}

func TestRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		time.Sleep(5 * time.Second)
		r.hold.MarkReleased()
		require.NoError(t, r.sys.Root.StopFuture(r.dog).Wait())
		require.NoError(t, Release(t.Context(), r.faults, r.hold))
		assert.False(t, r.held(), "released at the store")
		assert.ErrorIs(t, Release(t.Context(), r.faults, r.hold), lease.ErrLost, "a second release finds nothing")
	})
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		require.NoError(t, r.sys.Root.StopFuture(r.dog).Wait())
		time.Sleep(9 * time.Second) // past the validity (9 s), not yet expired at the store (10 s)
		require.True(t, r.held())
		require.ErrorIs(t, Release(t.Context(), r.faults, r.hold), lease.ErrExpired)
		assert.Zero(t, r.faults.Calls(leasetest.OpRelease), "never released after the validity ended")
	})
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		r.faults.LoseRenewals(1)
		<-r.poison
		require.ErrorIs(t, Release(t.Context(), r.faults, r.hold), lease.ErrLost)
		assert.Zero(t, r.faults.Calls(leasetest.OpRelease), "a poisoned hold is not released")
	})
}

func TestWatchdogExtendByRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		res, err := r.sys.Root.RequestFuture(r.dog, Extend{TTL: 20 * time.Second}, time.Second).Result()
		require.NoError(t, err)
		got, ok := res.(ExtendResult)
		require.True(t, ok, "%T", res)
		require.NoError(t, got.Err)
		assert.Equal(t, 20*time.Second, got.Lease.TTL)
	})
}

// A watchdog that wakes up past its renew deadline without a failed renewal
// (the process was paused) poisons with ErrRenewDeadline, not a nil error.
func TestWatchdogPausedPastTheDeadlinePoisonsWithACause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := lease.Config{LeaseID: "test.paused", OwnerID: "owner-a", TTL: 10 * time.Second,
			RenewInterval: 2 * time.Second, SafetyMargin: time.Second, StopTimeout: time.Second}
		mem := leasetest.NewMemStore()
		defer mem.Close()
		// The acquisition was sent 8.5 s ago: its renew deadline (8 s after
		// it) passed before the watchdog first ran, as after a pause.
		_, poison, stop := lonelyWatchdog(t, cfg, mem, mem, time.Now().Add(-8500*time.Millisecond))
		p := <-poison
		assert.Equal(t, lease.LossDeadline, p.Reason)
		assert.ErrorIs(t, p.Err, ErrRenewDeadline)
		assert.ErrorIs(t, p.Err, lease.ErrLost)
		stop()
	})
}
