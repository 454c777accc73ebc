package actors

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// runs is a function workload that records when each run started and
// stopped, and with which token.
type runs struct {
	mu sync.Mutex
	ran
}

// ran is what runs recorded: the token, start and stop of each run.
type ran struct {
	tokens []lease.Token
	from   []time.Time
	to     []time.Time
}

// snapshot returns a copy of what r recorded.
func (r *runs) snapshot() ran {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ran{tokens: append([]lease.Token(nil), r.tokens...), from: append([]time.Time(nil), r.from...),
		to: append([]time.Time(nil), r.to...)}
}

func (r *runs) workload() Workload {
	return WorkloadFunc(func(ctx context.Context, token lease.Token) error {
		r.mu.Lock()
		r.tokens, r.from = append(r.tokens, token), append(r.from, time.Now())
		r.mu.Unlock()
		<-ctx.Done()
		r.mu.Lock()
		r.to = append(r.to, time.Now())
		r.mu.Unlock()
		return nil
	})
}

// lapseRig starts node-a on a rig with TTL 10 s (renewals every 2 s, renew
// deadline 8 s after the last), lets it renew once (at 2 s) and makes the
// store stop answering at 3 s, so that the term lapses at 10 s and its lease
// expires at the store at 12 s.
func lapseRig(t *testing.T) (*supRig, *runs, *LeaseSupervisor, *running, *sdkmetric.ManualReader) {
	t0 := time.Now()
	r := newSupRig(t)
	w := &runs{}
	cfg := r.config("node-a", w.workload(), lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second,
		SafetyMargin: time.Second, StopTimeout: time.Second, StandbyRetryInterval: time.Minute})
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	cfg.MeterProvider = mp
	s := r.supervisor(t, cfg)
	run := start(s)
	time.Sleep(3 * time.Second)
	r.faults.FailAll(leasetest.OpAcquire|leasetest.OpRenew|leasetest.OpRelease, lease.ErrUnavailable)
	time.Sleep(7*time.Second + time.Millisecond) // the renew deadline, 10 s
	synctest.Wait()
	require.Equal(t, 1, count[Poisoned](r.rec), "lapsed at the renew deadline")
	assert.Equal(t, t0.Add(22*time.Second), s.Status().ResumableUntil, "tried until the last write + 2 TTL")
	return r, w, s, run, reader
}

// A store outage longer than the renew deadline but shorter than the TTL
// stops the workload at the deadline and then costs no handover: the same
// term goes on with the same token once the store answers, the workload
// never running in between.
func TestLapsedTermResumesWithItsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, rw, s, run, reader := lapseRig(t)
		time.Sleep(time.Second) // the store answers again at 11 s, before the lease expires there
		healed := time.Now()
		r.faults.Heal()
		time.Sleep(time.Second)
		synctest.Wait()

		w := rw.snapshot()
		require.Len(t, w.tokens, 2)
		assert.Equal(t, w.tokens[0], w.tokens[1], "the same token")
		require.Len(t, w.to, 1)
		assert.True(t, w.to[0].Before(healed), "stopped during the outage")
		assert.False(t, w.from[1].Before(healed), "not started again before the store answered")
		assert.LessOrEqual(t, w.from[1].Sub(healed), resumeRetry.Cap, "resumed within a retry of the store's return")

		acquired, _ := all[Acquired](r.rec)
		require.Len(t, acquired, 2)
		assert.True(t, acquired[1].Resumed)
		assert.False(t, acquired[1].Handover)
		assert.Equal(t, 1, r.faults.Calls(leasetest.OpAcquire), "acquired once")
		h, _, _ := r.mem.Holder(testLease)
		assert.Equal(t, w.tokens[0], h.Token)
		assert.Zero(t, s.Status().ResumableUntil)
		assert.Equal(t, StateLeading, s.Status().State)
		sums := collect(t, reader).sums
		assert.Equal(t, int64(1), sums[metricResumptions])
		assert.Equal(t, int64(1), sums[metricAcquisitions], "a resumption is not an acquisition")
		assert.Equal(t, int64(1), sums[metricLeader])
		require.NoError(t, run.stop())
	})
}

// A lapsed lease that another term wrote over is not resumed: the renewal
// is refused (lease.ErrLost), and the standby acquires as usual.
func TestLapsedTermTakenOverIsNotResumed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, rw, _, run, _ := lapseRig(t)
		r.mem.Tamper(testLease, "intruder", time.Second)
		time.Sleep(500 * time.Millisecond)
		r.faults.Heal()
		time.Sleep(3 * time.Second) // the intruder's lease expires at 11.5 s
		synctest.Wait()

		w := rw.snapshot()
		require.Len(t, w.tokens, 2)
		assert.Greater(t, w.tokens[1], w.tokens[0], "a new acquisition, with a new token")
		acquired, _ := all[Acquired](r.rec)
		require.Len(t, acquired, 2)
		assert.False(t, acquired[1].Resumed)
		require.NoError(t, run.stop())
	})
}

// A lapsed lease that the store expired is not resumed (the renewal is
// refused), and a store that never answers is tried until one TTL after
// the lease could have expired: the last write's send time + 2 TTL.
func TestLapsedTermIsNotResumedAfterItsTTL(t *testing.T) {
	for _, answers := range []bool{true, false} {
		t.Run(fmt.Sprintf("store answers %v", answers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Now()
				r, rw, s, run, _ := lapseRig(t)
				if answers {
					time.Sleep(2*time.Second + time.Millisecond) // 12 s: the lease expired at the store
					r.faults.Heal()
					time.Sleep(resumeRetry.Cap) // the next try: refused
				} else {
					time.Sleep(12 * time.Second) // 22 s: the tries stop
				}
				synctest.Wait()
				assert.Zero(t, s.Status().ResumableUntil)
				renewals := r.faults.Calls(leasetest.OpRenew)
				if !answers {
					time.Sleep(time.Second)
					assert.Equal(t, renewals, r.faults.Calls(leasetest.OpRenew), "no renewal after 22 s")
					r.faults.Heal()
				}
				time.Sleep(75 * time.Second) // acquired again at the next poll, at the latest
				synctest.Wait()

				acquired, at := all[Acquired](r.rec)
				require.Len(t, acquired, 2)
				assert.False(t, acquired[1].Resumed)
				assert.True(t, at[1].After(t0.Add(12*time.Second)))
				w := rw.snapshot()
				require.Len(t, w.tokens, 2)
				assert.Greater(t, w.tokens[1], w.tokens[0], "a new acquisition, with a new token")
				require.NoError(t, run.stop())
			})
		})
	}
}

// Resigning, or shutting down, while the term has lapsed gives the lapsed
// lease back, so that a standby elsewhere takes over at once.
func TestLapsedLeaseIsReleasedOnResignAndShutdown(t *testing.T) {
	for _, how := range []string{"resign", "shutdown"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, rw, s, run, _ := lapseRig(t)
				r.faults.Heal()
				r.faults.FailAll(leasetest.OpAcquire|leasetest.OpRenew, lease.ErrUnavailable) // releases answer
				if how == "resign" {
					require.NoError(t, s.Resign(context.Background(), time.Minute))
				}
				require.NoError(t, run.stop())
				h, _, _ := r.mem.Holder(testLease)
				assert.Empty(t, h.OwnerID, "released")
				w := rw.snapshot()
				assert.Len(t, w.tokens, 1, "never resumed")
			})
		})
	}
}

// pushWatch is a store whose Watch delivers what the test sends.
type pushWatch struct {
	lease.Store
	events chan lease.Event
}

func (p *pushWatch) Watch(ctx context.Context, _ string) (<-chan lease.Event, error) {
	out := make(chan lease.Event)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-p.events:
				out <- ev
			}
		}
	}()
	return out, nil
}

// A watch that sees the lapsed term still holding the key (a KV watch made
// again once a stream has a leader delivers the key's state) resumes the
// term at once, not at the next retry, and does not put the retry off to
// the standby poll.
func TestLapsedTermResumesWhenItsWatchSeesItsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := &runs{}
		store := &pushWatch{Store: r.faults, events: make(chan lease.Event)}
		cfg := r.config("node-a", w.workload(), lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second,
			SafetyMargin: time.Second, StopTimeout: time.Second, StandbyRetryInterval: time.Minute})
		cfg.Store = store
		// The resume retry must not be what resumes it: its first delay is
		// at least 25 ms.
		run := start(r.supervisor(t, cfg))
		time.Sleep(3 * time.Second)
		r.faults.FailAll(leasetest.OpAcquire|leasetest.OpRenew|leasetest.OpRelease, lease.ErrUnavailable)
		time.Sleep(7*time.Second + 200*time.Millisecond) // lapsed at 10 s, standing by after the restart backoff
		synctest.Wait()
		h, _, _ := r.mem.Holder(testLease)
		r.faults.Heal()
		seen := time.Now()
		store.events <- lease.Event{LeaseID: testLease, Kind: lease.EventHeld, Holder: h}
		synctest.Wait()

		got := w.snapshot()
		require.Len(t, got.tokens, 2)
		assert.Equal(t, seen, got.from[1], "resumed as the watch saw the key")
		require.NoError(t, run.stop())
	})
}
