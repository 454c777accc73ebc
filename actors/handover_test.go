package actors

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/supervision"
)

// eventsOf returns the events of one owner.
func eventsOf[T Event](r *recorder, owner string) ([]T, []time.Time) {
	evs, at := all[T](r)
	var out []T
	var outAt []time.Time
	for i, ev := range evs {
		if _, o := ev.Lease(); o == owner {
			out = append(out, ev)
			outAt = append(outAt, at[i])
		}
	}
	return out, outAt
}

func TestStandbyTakesOverThroughTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		lc := lease.Config{TTL: 10 * time.Second, StandbyRetryInterval: time.Minute}
		a, b := &counter{}, &counter{}
		runA := start(r.supervisor(t, r.config("node-a", a.workload(), lc)))
		synctest.Wait()
		runB := start(r.supervisor(t, r.config("node-b", b.workload(), lc)))
		time.Sleep(5 * time.Second)
		require.Equal(t, "node-a", r.holder())
		standby, _ := eventsOf[Standby](r.rec, "node-b")
		require.Len(t, standby, 1)
		assert.Equal(t, "node-a", standby[0].Holder.OwnerID)

		require.NoError(t, runA.stop())
		synctest.Wait()
		_, releasedAt := eventsOf[Released](r.rec, "node-a")
		acquired, acquiredAt := eventsOf[Acquired](r.rec, "node-b")
		require.Len(t, acquired, 1)
		assert.Equal(t, releasedAt[0], acquiredAt[0], "B took over in the same instant, not after a poll")
		assert.True(t, acquired[0].Handover)
		aAcq, _ := eventsOf[Acquired](r.rec, "node-a")
		assert.Greater(t, acquired[0].Token, aAcq[0].Token)
		assert.EqualValues(t, 1, b.started.Load())
		require.NoError(t, runB.stop())
	})
}

func TestStandbyPollsWhenTheWatchIsSilent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(r *supRig) lease.Store
	}{
		{"silenced watch", func(r *supRig) lease.Store { r.faults.SilenceWatch(true); return r.faults }},
		{"store without watch", func(r *supRig) lease.Store { return struct{ lease.Store }{r.faults} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newSupRig(t)
				lc := lease.Config{TTL: 10 * time.Second, StandbyRetryInterval: 4 * time.Second}
				runA := start(r.supervisor(t, r.config("node-a", (&counter{}).workload(), lc)))
				synctest.Wait()
				cfgB := r.config("node-b", (&counter{}).workload(), lc)
				cfgB.Store = tc.store(r)
				runB := start(r.supervisor(t, cfgB))
				time.Sleep(10 * time.Second)
				require.NoError(t, runA.stop())
				stoppedA := time.Now()
				time.Sleep(10 * time.Second)
				_, acquiredAt := eventsOf[Acquired](r.rec, "node-b")
				require.Len(t, acquiredAt, 1)
				wait := acquiredAt[0].Sub(stoppedA)
				assert.Greater(t, wait, time.Duration(0), "no watch: not at once")
				assert.LessOrEqual(t, wait, 5*time.Second, "within the jittered retry interval (5/4 of 4 s)")
				require.NoError(t, runB.stop())
			})
		})
	}
}

func TestStandbyTakesOverAfterExpiryThroughTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		lc := lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, StandbyRetryInterval: time.Minute}
		a := &counter{}
		cut := leasetest.NewFaultStore(r.mem) // A's own connection to the store
		cfgA := r.config("node-a", a.workload(), lc)
		cfgA.Store = cut
		cfgA.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Hour, Cap: time.Hour}}
		runA := start(r.supervisor(t, cfgA))
		synctest.Wait()
		runB := start(r.supervisor(t, r.config("node-b", (&counter{}).workload(), lc)))
		time.Sleep(3 * time.Second)                        // one renewal, at 2 s
		cut.FailAll(leasetest.OpAll, lease.ErrUnavailable) // A is partitioned from the store
		time.Sleep(30 * time.Second)

		renewedA, renewedAt := eventsOf[Renewed](r.rec, "node-a")
		require.NotEmpty(t, renewedA)
		expiry := renewedAt[len(renewedAt)-1].Add(lc.TTL)
		_, acquiredAt := eventsOf[Acquired](r.rec, "node-b")
		require.Len(t, acquiredAt, 1)
		assert.Equal(t, expiry, acquiredAt[0], "B acquired when the key expired, woken by the watch")
		require.Len(t, a.stoppedAt, 1)
		assert.True(t, a.stoppedAt[0].Before(acquiredAt[0]), "A's workload stopped before B could start")
		assert.ErrorIs(t, a.lastCause(), lease.ErrLost)
		require.NoError(t, runB.stop())
		cut.Heal()
		require.NoError(t, runA.stop())
	})
}

// heldOnly is a store whose watch reports writes but never a free key, as a
// store that judges expiry by observation (natsstore on a server before
// 2.11) reports no expiry.
type heldOnly struct{ *leasetest.FaultStore }

func (h heldOnly) Watch(ctx context.Context, id string) (<-chan lease.Event, error) {
	in, err := h.FaultStore.Watch(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make(chan lease.Event, 1)
	go func() {
		defer close(out)
		for ev := range in {
			if ev.Kind == lease.EventHeld {
				select {
				case out <- ev:
				default:
				}
			}
		}
	}()
	return out, nil
}

// A standby whose store reports no expiry tries again one TTL after the
// last write it saw, not at its next poll: the takeover after a crash is
// about a TTL, not a TTL plus the retry interval.
func TestStandbyTriesAgainOneTTLAfterTheLastWriteItSaw(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		lc := lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, StandbyRetryInterval: time.Hour}
		aStore := leasetest.NewFaultStore(r.mem)
		cfgA := r.config("node-a", (&counter{}).workload(), lc)
		cfgA.Store = aStore
		runA := start(r.supervisor(t, cfgA))
		synctest.Wait()
		cfgB := r.config("node-b", (&counter{}).workload(), lc)
		cfgB.Store = heldOnly{r.faults}
		runB := start(r.supervisor(t, cfgB))
		time.Sleep(5 * time.Second) // node-b saw the renewals at 2 and 4 s
		crash := time.Now()
		aStore.FailAll(leasetest.OpAll, lease.ErrUnavailable) // node-a is gone: its key expires at 14 s
		time.Sleep(20 * time.Second)
		acquired, at := all[Acquired](r.rec)
		require.Len(t, acquired, 2)
		assert.Equal(t, "node-b", acquired[1].OwnerID)
		took := at[1].Sub(crash)
		assert.Greater(t, took, 8*time.Second, "not before node-a's key expired")
		assert.Less(t, took, 10*time.Second, "one TTL after the last renewal it saw, not after an hour's poll")
		require.NoError(t, runB.stop())
		aStore.Heal()
		_ = runA.stop()
	})
}

// expiringIn answers every Acquire that finds the lease held as a store that
// judges expiry itself does (natsstore): with when it will let the caller
// take it. It has no watch.
type expiringIn struct {
	lease.Store
	in time.Duration
}

func (e expiringIn) Acquire(ctx context.Context, c lease.Claim) (lease.Acquisition, error) {
	a, err := e.Store.Acquire(ctx, c)
	if err == nil && !a.Acquired {
		a.ExpiresIn = e.in
	}
	return a, err
}

// A standby without a watch tries again when the store said the holder's
// lease would expire (Acquisition.ExpiresIn), not at its next poll.
func TestStandbyTriesAgainWhenTheStoreSaysTheLeaseExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		lc := lease.Config{TTL: 10 * time.Second, StandbyRetryInterval: time.Hour}
		runA := start(r.supervisor(t, r.config("node-a", (&counter{}).workload(), lc)))
		synctest.Wait()
		bStore := leasetest.NewFaultStore(r.mem)
		cfgB := r.config("node-b", (&counter{}).workload(), lc)
		cfgB.Store = expiringIn{Store: bStore, in: 3 * time.Second}
		runB := start(r.supervisor(t, cfgB))
		time.Sleep(10 * time.Second)
		// At 0, then 3 s (and 1 ms) after each answer: 0, 3, 6 and 9 s.
		assert.Equal(t, 4, bStore.Calls(leasetest.OpAcquire), "tries when told, not after an hour's poll")
		require.NoError(t, runB.stop())
		require.NoError(t, runA.stop())
	})
}

// A workload that steps down holds its instance off for a retry interval so
// that another takes over; once another term has taken the lease, the hold
// off has done its work. Three candidates whose terms are shorter than the
// retry interval hand over to each other at once, round after round, and
// never leave the lease free for a retry interval.
func TestSteppedDownCompetesAgainOnceAnotherHasLed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		lc := lease.Config{TTL: 10 * time.Second, StandbyRetryInterval: time.Minute}
		brief := WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			return nil // steps down
		})
		var runs []*running
		for _, owner := range []string{"node-a", "node-b", "node-c"} {
			runs = append(runs, start(r.supervisor(t, r.config(owner, brief, lc))))
			synctest.Wait()
		}
		time.Sleep(time.Second)
		end := time.Now()
		for _, run := range runs {
			require.NoError(t, run.stop())
		}
		// Only the terms begun while all three ran: once the others have
		// stopped, the last one holds off for its retry interval.
		_, at := all[Acquired](r.rec)
		at = slices.DeleteFunc(at, func(a time.Time) bool { return a.After(end) })
		require.GreaterOrEqual(t, len(at), 30, "a term every 20 ms for a second, not one per retry interval")
		for i := 1; i < len(at); i++ {
			assert.Less(t, at[i].Sub(at[i-1]), 100*time.Millisecond, "term %d began %v after the one before", i, at[i].Sub(at[i-1]))
		}
	})
}

// A Resign's hold off is the caller's: it lasts its full time even after
// another instance has led and stepped down.
func TestResignHoldsOffForItsFullTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		lc := lease.Config{TTL: 10 * time.Second, StandbyRetryInterval: time.Minute}
		supA := r.supervisor(t, r.config("node-a", (&counter{}).workload(), lc))
		runA := start(supA)
		synctest.Wait()
		briefB := WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			return nil
		})
		runB := start(r.supervisor(t, r.config("node-b", briefB, lc)))
		synctest.Wait()
		require.NoError(t, supA.Resign(t.Context(), 10*time.Second))
		time.Sleep(5 * time.Second)
		acqA, _ := eventsOf[Acquired](r.rec, "node-a")
		assert.Len(t, acqA, 1, "A does not compete within the 10 s it asked for, although B stepped down")
		time.Sleep(10 * time.Second)
		acqA, _ = eventsOf[Acquired](r.rec, "node-a")
		assert.Len(t, acqA, 2, "A leads again once its hold off has passed")
		require.NoError(t, runA.stop())
		require.NoError(t, runB.stop())
	})
}
