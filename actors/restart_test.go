package actors

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/supervision"
)

var errBoom = errors.New("boom")

// failing is a workload that returns errBoom at once, except for the runs
// for which stay returns a duration: it then runs that long (or until
// cancelled) and fails.
func failing(stay func(run int) time.Duration) Workload {
	var runs atomic.Int32
	return WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
		n := int(runs.Add(1))
		if stay != nil {
			if d := stay(n); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return nil
				}
			}
		}
		return errBoom
	})
}

func TestSupervisorRestartBackoffGrowsAndCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		cfg := r.config("node-a", failing(nil), lease.Config{TTL: 10 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Second, Cap: 8 * time.Second}, Intensity: supervision.Unlimited}
		s := r.supervisor(t, cfg)
		s.rand = rand.New(rand.NewPCG(1, 2))
		run := start(s)
		time.Sleep(3 * time.Minute)
		require.NoError(t, run.stop())

		restarting, restartedAt := all[Restarting](r.rec)
		_, acquiredAt := all[Acquired](r.rec)
		require.Greater(t, len(restarting), 12)
		policy := cfg.Restart.backoff()
		var capped []time.Duration
		for i, ev := range restarting {
			assert.Equal(t, i+1, ev.Attempt, "no stable term: the series goes on")
			ceiling := policy.Ceiling(i)
			assert.LessOrEqual(t, ev.Delay, ceiling, "restart %d", i)
			assert.ErrorIs(t, ev.Cause, ErrWorkloadExited)
			assert.ErrorIs(t, ev.Cause, errBoom)
			if i+1 < len(acquiredAt) {
				assert.Equal(t, restartedAt[i].Add(ev.Delay), acquiredAt[i+1], "standby again after exactly the delay")
			}
			if i >= 3 {
				capped = append(capped, ev.Delay)
			}
		}
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second},
			[]time.Duration{policy.Ceiling(0), policy.Ceiling(1), policy.Ceiling(2), policy.Ceiling(3), policy.Ceiling(9)})
		assert.Greater(t, slices.Max(capped), 4*time.Second, "delays grow past the early ceilings")
		assert.Zero(t, count[GaveUp](r.rec))
	})
}

func TestSupervisorRestartBackoffResetsAfterAStableTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := failing(func(run int) time.Duration {
			if run == 4 {
				return 30 * time.Second // a stable term, longer than ResetAfter
			}
			return 0
		})
		cfg := r.config("node-a", w, lease.Config{TTL: 10 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Second, Cap: 4 * time.Second, ResetAfter: 20 * time.Second}, Intensity: supervision.Unlimited}
		s := r.supervisor(t, cfg)
		run := start(s)
		time.Sleep(time.Minute)
		require.NoError(t, run.stop())
		restarting, _ := all[Restarting](r.rec)
		require.GreaterOrEqual(t, len(restarting), 5)
		attempts := []int{}
		for _, ev := range restarting[:5] {
			attempts = append(attempts, ev.Attempt)
		}
		assert.Equal(t, []int{1, 2, 3, 1, 2}, attempts)
	})
}

func TestSupervisorEscalatesAfterTooManyRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		cfg := r.config("node-a", failing(nil), lease.Config{TTL: 10 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Second, Cap: time.Second}, Intensity: 2, Period: time.Minute}
		s := r.supervisor(t, cfg)
		err := s.Run(t.Context()) // returns by itself
		require.ErrorIs(t, err, ErrTooManyRestarts)
		require.ErrorIs(t, err, errBoom, "the last cause is kept")
		assert.Equal(t, 2, count[Restarting](r.rec))
		escalated, _ := all[GaveUp](r.rec)
		require.Len(t, escalated, 1)
		assert.Equal(t, 3, escalated[0].Restarts)
		assert.Equal(t, 3, count[Released](r.rec), "every exit released the lease")
		assert.Empty(t, r.holder())
	})
}

func TestSupervisorRestartsOutsideThePeriodDoNotEscalate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		// Every term lasts 40 s: never 3 restarts within a minute.
		w := failing(func(int) time.Duration { return 40 * time.Second })
		cfg := r.config("node-a", w, lease.Config{TTL: 10 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Second, Cap: time.Second}, Intensity: 2, Period: time.Minute}
		s := r.supervisor(t, cfg)
		run := start(s)
		time.Sleep(5 * time.Minute)
		require.NoError(t, run.stop())
		assert.Greater(t, count[Restarting](r.rec), 5)
		assert.Zero(t, count[GaveUp](r.rec))
	})
}

// escalationCatcher is a parent actor that records its child's failure.
type escalationCatcher struct {
	child  *actor.Props
	failed chan any
}

func (e *escalationCatcher) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		c.Spawn(e.child)
	}
}

func (e *escalationCatcher) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason, _ any) {
	e.failed <- reason
	sup.StopChildren(child)
}

func TestSupervisorEscalatesToItsParentActor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		cfg := r.config("node-a", failing(nil), lease.Config{TTL: 10 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Second, Cap: time.Second}, Intensity: 1, Period: time.Minute}
		s := r.supervisor(t, cfg)
		sys := actorsys.New(nil)
		defer sys.Shutdown()
		failed := make(chan any, 1)
		parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &escalationCatcher{child: s.Props(), failed: failed}
		}))
		reason := <-failed
		err, ok := reason.(error)
		require.True(t, ok, "the reason is an error, not a panic value: %v", reason)
		assert.ErrorIs(t, err, ErrTooManyRestarts)
		require.NoError(t, sys.Root.StopFuture(parent).Wait())
	})
}

func TestSupervisorEscalatesUnfixableStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.faults.FailNext(leasetest.OpAcquire, 1, lease.ErrInvalid) // the store refuses the claim
		s := r.supervisor(t, r.config("node-a", (&counter{}).workload(), lease.Config{}))
		err := s.Run(t.Context())
		require.ErrorIs(t, err, lease.ErrInvalid)
		assert.Equal(t, 1, count[GaveUp](r.rec))
	})
}
