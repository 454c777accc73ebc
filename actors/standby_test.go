package actors

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// Acquisition failures. A store reports each class of failure with its
// sentinel (natsstore's tests show which keys and buckets make it do so);
// the fault store injects the sentinels here. The standby's watch is
// silenced so that attempts are made by its timer only.

// standbyConfig is a config whose standby polls about every second.
func standbyConfig(r *supRig) SupervisorConfig {
	return r.config("node-a", (&counter{}).workload(),
		lease.Config{TTL: 10 * time.Second, StandbyRetryInterval: time.Second})
}

func TestStandbyRetriesAnUnavailableStoreAtTheRetryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.faults.SilenceWatch(true)
		r.faults.FailNext(leasetest.OpAcquire, 3, lease.ErrUnavailable)
		run := start(r.supervisor(t, standbyConfig(r)))
		time.Sleep(10 * time.Second)
		require.NoError(t, run.stop())

		failed, failedAt := all[AcquisitionFailed](r.rec)
		require.Len(t, failed, 3)
		for i, ev := range failed {
			assert.ErrorIs(t, ev.Err, lease.ErrUnavailable, "attempt %d", i+1)
			assert.Equal(t, i+1, ev.Attempt, "failures in a row")
			assert.Equal(t, Subject{LeaseID: testLease, OwnerID: "node-a"}, ev.Subject)
			// The standby poll interval, jittered in [3/4, 5/4]: no growing backoff.
			assert.GreaterOrEqual(t, ev.RetryIn, 750*time.Millisecond, "attempt %d", i+1)
			assert.LessOrEqual(t, ev.RetryIn, 1250*time.Millisecond, "attempt %d", i+1)
			if i > 0 {
				assert.Equal(t, failed[i-1].RetryIn, failedAt[i].Sub(failedAt[i-1]), "tried again after RetryIn")
			}
		}
		_, acquiredAt := all[Acquired](r.rec)
		require.Len(t, acquiredAt, 1, "acquired once the store answers")
		assert.Equal(t, failed[2].RetryIn, acquiredAt[0].Sub(failedAt[2]))
		assert.Equal(t, 4, r.faults.Calls(leasetest.OpAcquire))
		assert.Zero(t, count[GaveUp](r.rec), "an unavailable store is waited for, not escalated")
	})
}

func TestStandbyCountsFailuresInARowOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.faults.SilenceWatch(true)
		r.mem.Tamper(testLease, "node-b", time.Hour)
		r.faults.FailNext(leasetest.OpAcquire, 2, lease.ErrUnavailable)
		run := start(r.supervisor(t, standbyConfig(r)))
		for count[Standby](r.rec) == 0 { // the third attempt finds node-b holding the lease
			time.Sleep(100 * time.Millisecond)
		}
		r.faults.FailNext(leasetest.OpAcquire, 1, lease.ErrUnavailable)
		time.Sleep(2 * time.Second)
		require.NoError(t, run.stop())

		failed, _ := all[AcquisitionFailed](r.rec)
		require.Len(t, failed, 3)
		attempts := []int{failed[0].Attempt, failed[1].Attempt, failed[2].Attempt}
		assert.Equal(t, []int{1, 2, 1}, attempts, "an answer from the store ends a series of failures")
	})
}

func TestStandbyBacksOffFromACorruptKeyOrAMisconfiguredStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		// A value under the key that is not a lease (garbage, a foreign
		// format, a newer version).
		{"corrupt key", lease.ErrCorrupt},
		// A bucket or server that cannot keep the lease's promises.
		{"misconfigured store", lease.ErrStoreConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newSupRig(t)
				r.faults.SilenceWatch(true)
				r.faults.FailNext(leasetest.OpAcquire, 6, tc.err)
				run := start(r.supervisor(t, standbyConfig(r)))
				time.Sleep(2 * time.Minute)
				require.NoError(t, run.stop(), "retried, not escalated")

				failed, failedAt := all[AcquisitionFailed](r.rec)
				require.Len(t, failed, 6)
				for i, ev := range failed {
					assert.ErrorIs(t, ev.Err, tc.err, "attempt %d", i+1)
					assert.ErrorIs(t, ev.Err, leasetest.ErrInjected)
					assert.Equal(t, i+1, ev.Attempt)
					// From the retry interval, doubling up to 20 times it,
					// with equal jitter: [ceiling/2, ceiling].
					ceiling := min(time.Second<<i, 20*time.Second)
					assert.GreaterOrEqual(t, ev.RetryIn, ceiling/2, "attempt %d", i+1)
					assert.LessOrEqual(t, ev.RetryIn, ceiling, "attempt %d", i+1)
					if i > 0 {
						assert.Equal(t, failed[i-1].RetryIn, failedAt[i].Sub(failedAt[i-1]), "tried again after RetryIn")
					}
				}
				assert.Zero(t, count[GaveUp](r.rec))
				_, acquiredAt := all[Acquired](r.rec)
				require.Len(t, acquiredAt, 1, "acquired once the key or the store is fixed")
				assert.Equal(t, failed[5].RetryIn, acquiredAt[0].Sub(failedAt[5]))
			})
		})
	}
}

func TestStandbyEscalatesErrorsThatRetryingCannotFix(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"claim refused", lease.ErrInvalid},
		{"store closed", lease.ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newSupRig(t)
				r.faults.SilenceWatch(true)
				r.faults.FailNext(leasetest.OpAcquire, 2, lease.ErrUnavailable)
				s := r.supervisor(t, standbyConfig(r))
				done := make(chan error, 1)
				go func() { done <- s.Run(context.Background()) }()
				for count[AcquisitionFailed](r.rec) < 2 {
					time.Sleep(100 * time.Millisecond)
				}
				r.faults.FailAll(leasetest.OpAcquire, tc.err)
				err := <-done
				require.ErrorIs(t, err, tc.err, "Run returns what escalated")

				failed, failedAt := all[AcquisitionFailed](r.rec)
				require.Len(t, failed, 3, "no attempt after the fatal one")
				last := failed[2]
				assert.ErrorIs(t, last.Err, tc.err)
				assert.Equal(t, 3, last.Attempt, "the third failure in a row")
				assert.Zero(t, last.RetryIn, "no retry")
				gaveUp, gaveUpAt := all[GaveUp](r.rec)
				require.Len(t, gaveUp, 1)
				assert.ErrorIs(t, gaveUp[0].Err, tc.err)
				assert.Equal(t, failedAt[2], gaveUpAt[0], "escalated at once")
				assert.Equal(t, 3, r.faults.Calls(leasetest.OpAcquire))
			})
		})
	}
}

// Standby logs.

// logRecords is a slog.Handler that keeps every record.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// find returns the attributes of the records with message msg.
func (h *logRecords) find(msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		attrs := map[string]string{"level": r.Level.String()}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, attrs)
	}
	return out
}

const (
	logHeldByOther = "lease held by another instance; standing by"
	logVanished    = "lease not free yet: its key vanished without a release, " +
		"and its last holder may act until the longest TTL it could have had has run out; standing by"
)

func TestStandbyLogsALeaseHeldByAnotherInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.mem.Tamper(testLease, "node-b", time.Minute)
		logs := &logRecords{}
		cfg := standbyConfig(r)
		cfg.Logger = slog.New(logs)
		run := start(r.supervisor(t, cfg))
		time.Sleep(5 * time.Second) // a few polls: the holder is logged once
		require.NoError(t, run.stop())

		held := logs.find(logHeldByOther)
		require.Len(t, held, 1)
		assert.Equal(t, "INFO", held[0]["level"])
		assert.Equal(t, "node-b", held[0]["owner"])
		assert.Equal(t, "tampered", held[0]["term"])
		assert.NotEmpty(t, held[0]["holder_token"])
		assert.Equal(t, testLease, held[0]["lease_id"])
		assert.Empty(t, logs.find(logVanished))
	})
}

func TestStandbyLogsAVanishedKeyAsNotFreeYet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.mem.Tamper(testLease, "node-b", time.Minute)
		logs := &logRecords{}
		cfg := standbyConfig(r)
		cfg.Logger = slog.New(logs)
		run := start(r.supervisor(t, cfg))
		time.Sleep(5 * time.Second)
		require.Len(t, logs.find(logHeldByOther), 1)
		r.mem.Tamper(testLease, "", 0) // deleted by hand: node-b may act until its TTL has run out
		time.Sleep(5 * time.Second)

		vanished := logs.find(logVanished)
		require.Len(t, vanished, 1)
		assert.Equal(t, "INFO", vanished[0]["level"])
		assert.Equal(t, testLease, vanished[0]["lease_id"])
		assert.NotContains(t, vanished[0], "owner", "nobody is named as the holder")
		assert.Contains(t, vanished[0], "free_at", "when the store lets it be taken")
		assert.Contains(t, vanished[0], "wait")
		assert.Len(t, logs.find(logHeldByOther), 1, "nobody holds it now")
		standby, _ := all[Standby](r.rec)
		require.Len(t, standby, 2)
		assert.Equal(t, "node-b", standby[0].Holder.OwnerID)
		assert.Empty(t, standby[1].Holder.OwnerID)
		assert.Zero(t, count[Acquired](r.rec), "not free yet")

		time.Sleep(time.Minute) // node-b's TTL runs out
		require.NoError(t, run.stop())
		assert.Equal(t, 1, count[Acquired](r.rec))
		assert.Len(t, logs.find(logHeldByOther), 1)
	})
}

// A standby whose first look finds the key vanished (deleted by hand while
// its holder's TTL runs) says so, as it does when it sees the key vanish.
func TestStandbyLogsAKeyFoundVanished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.mem.Tamper(testLease, "node-b", time.Minute)
		r.mem.Tamper(testLease, "", 0)
		logs := &logRecords{}
		cfg := standbyConfig(r)
		cfg.Logger = slog.New(logs)
		run := start(r.supervisor(t, cfg))
		time.Sleep(5 * time.Second) // a few polls: logged once
		vanished := logs.find(logVanished)
		require.Len(t, vanished, 1)
		assert.Equal(t, testLease, vanished[0]["lease_id"])
		standby, _ := all[Standby](r.rec)
		require.Len(t, standby, 1)
		assert.Empty(t, standby[0].Holder.OwnerID)
		assert.Zero(t, count[Acquired](r.rec), "not free yet")
		require.NoError(t, run.stop())
	})
}
