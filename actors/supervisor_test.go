package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/supervision"
)

// The three tests a lease supervisor was first specified by.

func TestSupervisorStartsWorkloadAfterAcquireAndReleasesOnShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := &counter{}
		s := r.supervisor(t, r.config("node-a", w.workload(),
			lease.Config{TTL: 5 * time.Second, RenewInterval: 20 * time.Millisecond}))
		run := start(s)
		time.Sleep(30 * time.Millisecond)
		require.NoError(t, run.stop())

		assert.EqualValues(t, 1, w.started.Load())
		assert.EqualValues(t, 1, w.stopped.Load())
		assert.Equal(t, 1, count[Released](r.rec))
		assert.Equal(t, 1, r.faults.Calls(leasetest.OpRelease))
		assert.Empty(t, r.holder(), "the lease is free after the shutdown")
	})
}

func TestSupervisorStaysStandbyWhenAnotherOwnerHoldsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.mem.Tamper(testLease, "node-b", time.Minute)
		w := &counter{}
		s := r.supervisor(t, r.config("node-a", w.workload(),
			lease.Config{StandbyRetryInterval: 50 * time.Millisecond}))
		run := start(s)
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, run.stop())

		assert.Zero(t, w.started.Load())
		standby, _ := all[Standby](r.rec)
		require.Len(t, standby, 1)
		assert.Equal(t, "node-b", standby[0].Holder.OwnerID)
		assert.Zero(t, r.faults.Calls(leasetest.OpRelease), "nothing of ours to release")
		assert.Equal(t, "node-b", r.holder())
	})
}

func TestSupervisorStopsWorkloadWhenRenewalLosesOwnership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		ctx, cancel := context.WithCancel(context.Background())
		w := &counter{onStop: func(context.Context) { cancel() }} // the supervisor is stopped from inside the workload
		s := r.supervisor(t, r.config("node-a", w.workload(), lease.Config{
			TTL: 5 * time.Second, RenewInterval: 10 * time.Millisecond, StandbyRetryInterval: time.Minute}))
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait()
		r.mem.Tamper(testLease, "node-b", time.Minute) // the next renewal finds another owner
		time.Sleep(40 * time.Millisecond)
		require.NoError(t, <-done)

		assert.EqualValues(t, 1, w.started.Load())
		assert.EqualValues(t, 1, w.stopped.Load())
		assert.ErrorIs(t, w.lastCause(), lease.ErrLost)
		poisoned, _ := all[Poisoned](r.rec)
		require.Len(t, poisoned, 1)
		assert.Equal(t, lease.LossTaken, poisoned[0].Reason)
		assert.Zero(t, r.faults.Calls(leasetest.OpRelease), "a lost lease is not released")
		assert.Equal(t, "node-b", r.holder())
	})
}

// Renewal failures.

func TestSupervisorTransientRenewalFailuresDoNotPoison(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := &counter{}
		s := r.supervisor(t, r.config("node-a", w.workload(), lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second}))
		run := start(s)
		synctest.Wait()
		r.faults.FailRenewals(5)
		time.Sleep(30 * time.Second)
		require.NoError(t, run.stop())

		assert.Equal(t, 5, count[RenewalFailed](r.rec))
		assert.Zero(t, count[Poisoned](r.rec))
		assert.EqualValues(t, 1, w.started.Load(), "the workload ran through")
		assert.ErrorIs(t, w.lastCause(), supervision.ErrShutdown)
		assert.Greater(t, count[Renewed](r.rec), 10)
	})
}

func TestSupervisorPersistentFailureStopsWorkloadBeforeExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		var heldWhenStopped []bool
		w := &counter{onStop: func(context.Context) {
			time.Sleep(500 * time.Millisecond) // a workload that takes a while to stop, within StopTimeout
			heldWhenStopped = append(heldWhenStopped, r.holder() == "node-a")
		}}
		cfg := r.config("node-a", w.workload(), lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second,
			SafetyMargin: time.Second, StopTimeout: time.Second, StandbyRetryInterval: time.Minute})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Hour, Cap: time.Hour}}
		s := r.supervisor(t, cfg)
		run := start(s)
		time.Sleep(3 * time.Second) // one successful renewal, at 2 s
		r.faults.FailAll(leasetest.OpRenew|leasetest.OpRelease, lease.ErrUnavailable)
		time.Sleep(20 * time.Second)

		renewed, renewedAt := all[Renewed](r.rec)
		require.Len(t, renewed, 1)
		lastWrite := renewedAt[0]
		_, poisonedAt := all[Poisoned](r.rec)
		require.Len(t, poisonedAt, 1)
		// Deadline = last write + TTL - margin - stop = +8 s; the store lets it expire at +10 s.
		assert.Equal(t, lastWrite.Add(8*time.Second), poisonedAt[0])
		require.Len(t, w.stoppedAt, 1)
		assert.True(t, w.stoppedAt[0].Before(lastWrite.Add(9*time.Second)), "stopped before the validity ends")
		assert.Equal(t, []bool{true}, heldWhenStopped, "the lease had not expired at the store when the workload stopped")
		assert.ErrorIs(t, w.lastCause(), lease.ErrLost)
		var lost *lease.LostError
		require.ErrorAs(t, w.lastCause(), &lost)
		assert.Equal(t, lease.LossDeadline, lost.Reason)
		assert.Zero(t, count[WorkloadStopTimeout](r.rec))
		restarting, _ := all[Restarting](r.rec)
		require.Len(t, restarting, 1)
		assert.ErrorIs(t, restarting[0].Cause, lease.ErrLost)
		r.faults.Heal()
		require.NoError(t, run.stop())
	})
}

func TestSupervisorLostOwnershipPoisonsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := WorkloadFunc(func(ctx context.Context, token lease.Token) error {
			<-ctx.Done()
			return nil
		})
		cfg := r.config("node-a", w, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Hour, Cap: time.Hour}}
		var acquiredAt time.Time
		cfg.OnEvent = func(ev Event) {
			r.rec.Hook(ev)
			if _, ok := ev.(Acquired); ok {
				acquiredAt = time.Now()
			}
		}
		s := r.supervisor(t, cfg)
		run := start(s)
		synctest.Wait()
		r.faults.LoseRenewals(1)
		time.Sleep(5 * time.Second)
		_, at := all[Poisoned](r.rec)
		require.Len(t, at, 1)
		assert.Equal(t, acquiredAt.Add(2*time.Second), at[0], "poisoned at the first failed renewal, without retry")
		assert.Equal(t, 1, r.faults.Calls(leasetest.OpRenew))
		require.NoError(t, run.stop())
	})
}

func TestSupervisorTTLShorterThanRenewInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := &counter{}
		// RenewInterval >= TTL normalises to max(TTL/2, 1 s) = 1 s.
		s := r.supervisor(t, r.config("node-a", w.workload(), lease.Config{TTL: 2 * time.Second, RenewInterval: 10 * time.Second}))
		run := start(s)
		for range 60 {
			time.Sleep(500 * time.Millisecond)
			synctest.Wait()
			require.Equal(t, "node-a", r.holder())
		}
		require.NoError(t, run.stop())
		assert.Zero(t, count[Poisoned](r.rec))
		assert.EqualValues(t, 1, w.started.Load())
	})
}

// Shutdown.

func TestSupervisorShutdownReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := &counter{}
		s := r.supervisor(t, r.config("node-a", w.workload(), lease.Config{TTL: 10 * time.Second}))
		run := start(s)
		time.Sleep(time.Minute)
		require.Equal(t, "node-a", r.holder())
		require.NoError(t, run.stop())
		assert.Empty(t, r.holder())
		assert.ErrorIs(t, w.lastCause(), supervision.ErrShutdown)
		released, at := all[Released](r.rec)
		require.Len(t, released, 1)
		require.Len(t, w.stoppedAt, 1)
		assert.False(t, at[0].Before(w.stoppedAt[0]), "released after the workload stopped")
		calls := r.faults.Calls(leasetest.OpAll)
		time.Sleep(time.Minute)
		assert.Equal(t, calls, r.faults.Calls(leasetest.OpAll), "no timer survives the shutdown")
	})
}

func TestSupervisorStuckWorkloadIsReportedAndNotReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		unblock := make(chan struct{})
		w := WorkloadFunc(func(ctx context.Context, token lease.Token) error {
			<-unblock // ignores ctx
			return nil
		})
		s := r.supervisor(t, r.config("node-a", w, lease.Config{TTL: 10 * time.Second, StopTimeout: 2 * time.Second}))
		run := start(s)
		time.Sleep(5 * time.Second)
		start := time.Now()
		err := run.stop()
		require.ErrorIs(t, err, ErrWorkloadStuck)
		assert.Equal(t, start.Add(2*time.Second), time.Now(), "the wait is bounded by StopTimeout")
		stuck, _ := all[WorkloadStopTimeout](r.rec)
		require.Len(t, stuck, 1)
		assert.Equal(t, 2*time.Second, stuck[0].Timeout)
		notReleased, _ := all[NotReleased](r.rec)
		require.Len(t, notReleased, 1)
		assert.ErrorIs(t, notReleased[0].Err, ErrWorkloadStuck)
		assert.Zero(t, r.faults.Calls(leasetest.OpRelease))
		assert.Equal(t, "node-a", r.holder(), "the lease is left to expire")
		renewals := r.faults.Calls(leasetest.OpRenew)
		time.Sleep(15 * time.Second)
		assert.Equal(t, renewals, r.faults.Calls(leasetest.OpRenew), "not renewed for a stuck workload")
		assert.Empty(t, r.holder(), "expired at the store")
		close(unblock)
	})
}

func TestSupervisorWorkloadExitReleasesAndRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		boom := errors.New("boom")
		runs := 0
		w := WorkloadFunc(func(ctx context.Context, token lease.Token) error {
			runs++
			if runs == 1 {
				return boom
			}
			<-ctx.Done()
			return nil
		})
		cfg := r.config("node-a", w, lease.Config{TTL: 10 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Second, Cap: time.Second}}
		s := r.supervisor(t, cfg)
		run := start(s)
		time.Sleep(5 * time.Second)
		exited, _ := all[WorkloadExited](r.rec)
		require.Len(t, exited, 1)
		assert.ErrorIs(t, exited[0].Err, boom)
		assert.Equal(t, 1, count[Released](r.rec), "released for another instance")
		acquired, _ := all[Acquired](r.rec)
		require.Len(t, acquired, 2, "back in standby after the backoff, and leading again")
		assert.Greater(t, acquired[1].Token, acquired[0].Token)
		require.NoError(t, run.stop())
	})
}

// Logs and metrics.

func TestSupervisorLogRecordsCarryLeaseAttributes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		var buf syncBuffer
		w := &counter{}
		cfg := r.config("node-a", w.workload(), lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		cfg.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		s := r.supervisor(t, cfg)
		run := start(s)
		synctest.Wait()
		r.faults.FailRenewals(1)
		time.Sleep(3 * time.Second)
		require.NoError(t, run.stop())
		msgs := map[string]bool{}
		for line := range strings.Lines(buf.String()) {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
			if rec["lib"] == "protoactor" {
				continue
			}
			msg := rec["msg"].(string)
			msgs[msg] = true
			assert.Equal(t, testLease, rec["lease_id"], line)
			assert.Equal(t, "node-a", rec["owner_id"], line)
			if msg == "lease acquired; leading" || msg == "lease released" || strings.HasPrefix(msg, "lease renewal failed") {
				assert.NotZero(t, rec["token"], line)
			}
		}
		assert.True(t, msgs["lease acquired; leading"])
		assert.True(t, msgs["lease released"])
		assert.True(t, msgs["lease renewal failed; retrying until the renew deadline"])
	})
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// panickyStore panics in its first Renew: a bug in a store, not an error.
type panickyStore struct {
	lease.Store
	panicked atomic.Bool
}

func (p *panickyStore) Renew(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	if p.panicked.CompareAndSwap(false, true) {
		panic("store bug")
	}
	return p.Store.Renew(ctx, l)
}

func TestSupervisorWatchdogFailurePoisons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := &counter{}
		cfg := r.config("node-a", w.workload(), lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		cfg.Store = &panickyStore{Store: r.faults}
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Second, Cap: time.Second}}
		run := start(r.supervisor(t, cfg))
		time.Sleep(5 * time.Second)
		require.NoError(t, run.stop())
		poisoned, _ := all[Poisoned](r.rec)
		require.Len(t, poisoned, 1)
		assert.Equal(t, lease.LossStoreError, poisoned[0].Reason)
		assert.ErrorIs(t, poisoned[0].Err, errWatchdogStopped)
		assert.EqualValues(t, 2, w.started.Load(), "led again after the backoff")
		w.mu.Lock()
		causes := append([]error(nil), w.causes...)
		w.mu.Unlock()
		require.Len(t, causes, 2)
		assert.ErrorIs(t, causes[0], lease.ErrLost)
	})
}
