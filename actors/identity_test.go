package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/supervision"
)

// overlap is a function workload that counts how many of its copies run at
// once, and returns after hold (a graceful handover) so that terms follow
// each other quickly.
type overlap struct {
	hold    time.Duration
	running atomic.Int32
	most    atomic.Int32
	starts  atomic.Int32
}

func (o *overlap) workload() Workload {
	return WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
		o.starts.Add(1)
		n := o.running.Add(1)
		defer o.running.Add(-1)
		for m := o.most.Load(); n > m && !o.most.CompareAndSwap(m, n); m = o.most.Load() {
		}
		select {
		case <-ctx.Done():
		case <-time.After(o.hold):
		}
		return nil
	})
}

// Two supervisors configured with the same OwnerID (one pod name on two
// processes, a copy-pasted config) are two candidates: never do both lead.
// The first release took the second's Acquire for a re-acquisition and ran
// both workloads at once.
func TestTwoSupervisorsWithOneOwnerIDNeverLeadTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		o := &overlap{hold: 3 * time.Second}
		lc := lease.Config{TTL: 5 * time.Second, RenewInterval: time.Second, StandbyRetryInterval: 500 * time.Millisecond}
		cfg := r.config("pod-7", o.workload(), lc)
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: 10 * time.Millisecond, Cap: 10 * time.Millisecond}, Intensity: supervision.Unlimited}
		a, b := start(r.supervisor(t, cfg)), start(r.supervisor(t, cfg))
		time.Sleep(time.Minute)
		require.NoError(t, a.stop())
		require.NoError(t, b.stop())
		assert.Equal(t, int32(1), o.most.Load(), "two workloads ran at once")
		assert.GreaterOrEqual(t, o.starts.Load(), int32(10), "terms followed each other")
	})
}

// One LeaseSupervisor is one candidate: a second Run while the first runs
// returns ErrRunning at once, and the first goes on.
func TestSecondConcurrentRunIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		o := &overlap{hold: time.Hour}
		sup := r.supervisor(t, r.config("pod-7", o.workload(), lease.Config{TTL: 5 * time.Second}))
		first := start(sup)
		synctest.Wait()
		err := sup.Run(t.Context())
		require.ErrorIs(t, err, ErrRunning)
		assert.Equal(t, int32(1), o.running.Load(), "the first Run still leads")
		require.NoError(t, first.stop())
		// Once the first Run has returned, the supervisor can run again.
		again := start(sup)
		synctest.Wait()
		assert.Equal(t, int32(1), o.running.Load())
		require.NoError(t, again.stop())
	})
}

// Props spawned twice makes two candidates with terms of their own: they
// take turns, never lead together.
func TestPropsSpawnedTwiceNeverLeadTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		o := &overlap{hold: 3 * time.Second}
		lc := lease.Config{TTL: 5 * time.Second, RenewInterval: time.Second, StandbyRetryInterval: 500 * time.Millisecond}
		cfg := r.config("pod-7", o.workload(), lc)
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: 10 * time.Millisecond, Cap: 10 * time.Millisecond}, Intensity: supervision.Unlimited}
		sup := r.supervisor(t, cfg)
		sys := actor.NewActorSystem()
		var pids []*actor.PID
		for range 2 {
			pids = append(pids, sys.Root.Spawn(sup.Props()))
		}
		time.Sleep(time.Minute)
		var wg sync.WaitGroup
		for _, pid := range pids {
			wg.Go(func() { _ = sys.Root.StopFuture(pid).Wait() })
		}
		wg.Wait()
		sys.Shutdown()
		assert.Equal(t, int32(1), o.most.Load(), "two workloads ran at once")
		assert.GreaterOrEqual(t, o.starts.Load(), int32(10))
	})
}
