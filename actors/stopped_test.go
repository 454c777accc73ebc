package actors

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// stoppingStore is a fault store that can stop for good, as a
// natsstore.Store does once its bucket is deleted: every call then fails
// with the error it stopped with, which Err returns.
type stoppingStore struct {
	*leasetest.FaultStore
	err atomic.Pointer[error]
}

func (s *stoppingStore) Err() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

// stop makes the store stop with err.
func (s *stoppingStore) stop(err error) {
	s.err.Store(&err)
	s.FailAll(leasetest.OpAll, err)
}

// errBucketDeleted is what a store that stopped answers: it matches
// lease.ErrStoreConfig, as natsstore's *BucketError does.
var errBucketDeleted = fmt.Errorf(`natsstore: bucket "leases": bucket deleted: %w`, lease.ErrStoreConfig)

// awaitRun returns what Run returned, or fails the test when it has not
// returned within limit (of virtual time).
func awaitRun(t *testing.T, run *running, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-run.done:
		return err
	case <-time.After(limit):
		err := run.stop()
		t.Fatalf("Run did not return within %v of the store stopping (it returned %v once cancelled)", limit, err)
		return nil
	}
}

// TestStoppedStoreEndsRun: a store that stopped for good (it answers
// lease.ErrStoreConfig, and its Err says why) ends Run with its error, from
// standby and from a term alike, so that the process exits and its
// supervisor (or Kubernetes) restarts it: no retrying can help, and before
// this a standby backed off forever while the process stayed not ready.
func TestStoppedStoreEndsRun(t *testing.T) {
	for _, leading := range []bool{false, true} {
		name := "standby"
		if leading {
			name = "leading"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newSupRig(t)
				store := &stoppingStore{FaultStore: r.faults}
				var w counter
				cfg := r.config("node-a", w.workload(), lease.Config{TTL: 10 * time.Second})
				cfg.Store = store
				if !leading {
					store.stop(errBucketDeleted)
				}
				run := start(r.supervisor(t, cfg))
				if leading {
					synctest.Wait()
					require.Equal(t, "node-a", r.holder())
					store.stop(errBucketDeleted)
				}
				// The renewal that meets it comes within the renew interval.
				err := awaitRun(t, run, 5*time.Second)
				require.ErrorIs(t, err, ErrStoreStopped)
				require.ErrorIs(t, err, lease.ErrStoreConfig)
				assert.ErrorContains(t, err, "bucket deleted")
				gaveUp, _ := all[GaveUp](r.rec)
				require.Len(t, gaveUp, 1)
				assert.ErrorIs(t, gaveUp[0].Err, ErrStoreStopped)
				assert.Equal(t, w.started.Load(), w.stopped.Load(), "no workload runs")
				if leading {
					assert.Equal(t, int32(1), w.started.Load())
					var lost *lease.LostError
					assert.ErrorAs(t, w.lastCause(), &lost)
				}
			})
		})
	}
}

// TestStoreConfigErrorWithoutAStopBacksOff: an error matching
// lease.ErrStoreConfig from a store that does not say it stopped (no Err,
// or Err nil) may be fixed by an operator: a standby backs off and tries
// again, and Run goes on.
func TestStoreConfigErrorWithoutAStopBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		var w counter
		cfg := r.config("node-a", w.workload(), lease.Config{TTL: 10 * time.Second})
		r.faults.FailAll(leasetest.OpAll, errBucketDeleted)
		run := start(r.supervisor(t, cfg))
		time.Sleep(time.Minute)
		select {
		case err := <-run.done:
			t.Fatalf("Run returned %v", err)
		default:
		}
		require.Greater(t, count[AcquisitionFailed](r.rec), 1)
		r.faults.FailAll(leasetest.OpAll, nil)
		time.Sleep(2 * time.Minute) // the backoff grows to 20 retry intervals: 100 s
		assert.Equal(t, int32(1), w.started.Load(), "it acquires once the store answers again")
		require.NoError(t, run.stop())
	})
}

// TestStoppedStoreWatchEndsRunWithoutReportingHolders: a store that stopped
// for good may still deliver its watch's events (natsstore's watch of a
// deleted bucket's stream goes on). A standby that hears one ends Run with
// the store's error at once, and never logs a holder it can no longer
// follow (issue 32: stopped stores kept logging "lease held by another
// instance").
func TestStoppedStoreWatchEndsRunWithoutReportingHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		store := &stoppingStore{FaultStore: r.faults}
		r.mem.Tamper(testLease, "node-b", time.Hour)
		logs := &logRecords{}
		cfg := r.config("node-a", (&counter{}).workload(),
			lease.Config{TTL: 10 * time.Second, StandbyRetryInterval: time.Minute})
		cfg.Store, cfg.Logger = store, slog.New(logs)
		run := start(r.supervisor(t, cfg))
		synctest.Wait()
		require.Len(t, logs.find(logHeldByOther), 1)

		err := errBucketDeleted
		store.err.Store(&err) // stopped, its watch still open
		store.FailAll(leasetest.OpAcquire, errBucketDeleted)
		r.mem.Tamper(testLease, "node-c", time.Hour)
		require.ErrorIs(t, awaitRun(t, run, time.Second), ErrStoreStopped, "ended by the watch event, not the next poll")
		assert.Len(t, logs.find(logHeldByOther), 1, "node-c is not reported")
	})
}
