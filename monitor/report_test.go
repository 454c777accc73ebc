package monitor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/supervision"
)

// waitForever runs until ctx is done.
func waitForever(ctx context.Context) error { <-ctx.Done(); return nil }

// outboxTree builds the workload tree of a term and keeps it in current.
func outboxTree(current *atomic.Pointer[supervision.Tree]) actors.Workload {
	return actors.WorkloadTree(func(actors.Granted) (*supervision.Tree, error) {
		t, err := supervision.New(supervision.Spec{Name: "outbox", Children: []supervision.ChildSpec{
			{Name: "dispatcher", Func: waitForever},
			{Name: "sweeper", Func: waitForever},
		}}, supervision.Options{})
		if err == nil {
			current.Store(t)
		}
		return t, err
	})
}

// run runs sup until the test's cleanup.
func run(t *testing.T, sup *actors.LeaseSupervisor) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sup.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
}

func TestReportSeesThroughASupervisorIntoItsTree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		t.Cleanup(func() { _ = store.Close(); time.Sleep(2 * time.Second) }) // protoactor's dead-letter throttle
		lc := lease.Config{LeaseID: "billing.outbox", OwnerID: "pod-a", TTL: 10 * time.Second}
		var treeA, treeB atomic.Pointer[supervision.Tree]
		a, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{Lease: lc, Store: store, Workload: outboxTree(&treeA),
			Meta: map[string]string{"addr": "10.0.0.7:8080"}})
		require.NoError(t, err)
		lc.OwnerID = "pod-b"
		b, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{Lease: lc, Store: store, Workload: outboxTree(&treeB)})
		require.NoError(t, err)

		// A tree of its own, whose child fails once.
		failed := false
		jobs, err := supervision.New(supervision.Spec{Name: "jobs", Children: []supervision.ChildSpec{
			{Name: "flaky", Backoff: supervision.Backoff{Base: time.Minute, Cap: time.Minute, Jitter: supervision.NoJitter},
				Func: func(ctx context.Context) error {
					if !failed {
						failed = true
						return errors.New("flaky failed")
					}
					return waitForever(ctx)
				}},
			{Name: "steady", Func: waitForever},
		}}, supervision.Options{})
		require.NoError(t, err)
		jobsCtx, stopJobs := context.WithCancel(context.Background())
		jobsDone := make(chan error, 1)
		go func() { jobsDone <- jobs.Run(jobsCtx) }()
		t.Cleanup(func() { stopJobs(); <-jobsDone })

		locker, err := lock.New(store, lock.Config{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = locker.Close(context.Background()) })

		reg := monitor.New(monitor.Config{Instance: "pod-a"})
		reg.AddSupervisor(a)
		reg.AddSupervisor(b)
		reg.AddTree(jobs)
		reg.AddLocker("invoices", locker)

		rep := reg.Report()
		assert.False(t, rep.Ready, "not started")
		require.Len(t, rep.Leases, 2)
		assert.Equal(t, actors.StateStarting, rep.Leases[0].State)

		run(t, a)
		time.Sleep(time.Second)
		run(t, b)
		_, err = locker.Acquire(t.Context(), "invoice.42")
		require.NoError(t, err)
		time.Sleep(time.Second)
		synctest.Wait()

		rep = reg.Report()
		assert.Equal(t, "pod-a", rep.Instance)
		assert.True(t, rep.Live)
		assert.True(t, rep.Ready, "%v", rep.Problems)
		la, lb := rep.Leases[0], rep.Leases[1]
		assert.Equal(t, actors.StateLeading, la.State)
		assert.NotZero(t, la.Token)
		assert.Nil(t, la.Holder)
		require.NotNil(t, la.Tree, "the leader's workload tree")
		assert.Equal(t, "outbox", la.Tree.Name)
		assert.Equal(t, supervision.StateRunning, la.Tree.Snapshot.State)
		assert.Len(t, la.Tree.Snapshot.Children, 2)
		assert.Contains(t, la.Tree.Text, "outbox (supervisor, one-for-one) running")

		assert.Equal(t, actors.StateStandby, lb.State)
		require.NotNil(t, lb.Holder, "a standby sees who leads")
		assert.Equal(t, monitor.Holder{OwnerID: "pod-a", Term: la.Term, Token: uint64(la.Token), TTL: "10s",
			Meta: map[string]string{"addr": "10.0.0.7:8080"}}, *lb.Holder)
		assert.Nil(t, lb.Tree, "a standby that never led has no tree")

		require.Len(t, rep.Trees, 1)
		assert.Equal(t, "jobs", rep.Trees[0].Name)
		assert.Equal(t, supervision.StateBackoff, rep.Trees[0].Snapshot.Children[0].State)
		assert.Contains(t, rep.Trees[0].Text, "flaky (func, permanent) backoff")
		assert.Equal(t, []monitor.LockReport{{Name: "invoices", Held: 1}}, rep.Locks)

		// pod-a resigns: pod-b leads with its tree, and pod-a, a standby,
		// runs none.
		require.NoError(t, a.Resign(t.Context(), time.Minute))
		time.Sleep(time.Minute + 5*time.Second) // pod-a tries again after its hold-off, and sees pod-b
		synctest.Wait()
		rep = reg.Report()
		assert.True(t, rep.Live)
		assert.Equal(t, actors.StateStandby, rep.Leases[0].State)
		require.NotNil(t, rep.Leases[0].Holder)
		assert.Equal(t, "pod-b", rep.Leases[0].Holder.OwnerID)
		assert.Nil(t, rep.Leases[0].Tree, "a standby runs no tree")
		assert.Equal(t, actors.StateLeading, rep.Leases[1].State)
		require.NotNil(t, rep.Leases[1].Tree)
		assert.Equal(t, supervision.StateRunning, rep.Leases[1].Tree.Snapshot.State)
	})
}

func TestReportSurfacesAStuckWorkload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		t.Cleanup(func() { _ = store.Close(); time.Sleep(2 * time.Second) })
		release := make(chan struct{})
		sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
			Lease: lease.Config{LeaseID: "billing.outbox", OwnerID: "pod-a", TTL: 10 * time.Second, StopTimeout: time.Second},
			Store: store,
			Workload: actors.WorkloadFunc(func(context.Context, lease.Token) error {
				<-release // ignores its context
				return nil
			}),
		})
		require.NoError(t, err)
		reg := monitor.New(monitor.Config{Instance: "pod-a"})
		reg.AddSupervisor(sup)
		run(t, sup)
		// Before Run's cleanup: the workload returns, and the sleep lets it
		// (virtual time moves only once it has), so that Run, which reports
		// a workload still running when it returns, does not race it.
		t.Cleanup(func() { close(release); time.Sleep(time.Millisecond) })
		time.Sleep(time.Second)

		err = sup.Resign(t.Context(), time.Minute)
		require.ErrorIs(t, err, actors.ErrWorkloadStuck)
		rep := reg.Report()
		assert.False(t, rep.Live)
		require.Len(t, rep.Problems, 1)
		assert.Equal(t, monitor.CheckLive, rep.Problems[0].Check)
		assert.Contains(t, rep.Problems[0].Reason, "workloads of earlier terms did not stop (1)")
		assert.Contains(t, rep.Problems[0].Reason, "last error: "+rep.Leases[0].LastError)
		assert.NotEmpty(t, rep.Leases[0].LastError)
		assert.Equal(t, 1, rep.Leases[0].Stuck)
	})
}
