package actors

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/supervision"
)

// stubborn is a function workload whose first run ignores its context
// until released; later runs stop with their context.
type stubborn struct {
	running, most, starts atomic.Int32
	release               chan struct{}
}

func newStubborn() *stubborn { return &stubborn{release: make(chan struct{})} }

func (w *stubborn) workload() Workload {
	return WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
		first := w.starts.Add(1) == 1
		n := w.running.Add(1)
		defer w.running.Add(-1)
		for m := w.most.Load(); n > m && !w.most.CompareAndSwap(m, n); m = w.most.Load() {
		}
		if first {
			<-w.release // ignores ctx
			return nil
		}
		<-ctx.Done()
		return nil
	})
}

// restarter is a parent that restarts its LeaseSupervisor child in place
// (protoactor's Restart: a new incarnation under the same PID) on demand.
type restarter struct {
	props *actor.Props
	child *actor.PID
}

type restartChild struct{}

func (r *restarter) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		r.child = c.Spawn(r.props)
	case restartChild:
		c.(actor.Supervisor).RestartChildren(r.child)
	}
}

// The guard against a stuck workload belongs to the LeaseSupervisor, not to
// one incarnation of its actor: after its parent restarts it, the new
// incarnation does not lead while the earlier term's workload still runs,
// even once that term's lease has expired. The first release re-acquired at
// once and ran two workloads.
func TestStuckWorkloadOutlivesARestartOfTheSupervisor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := newStubborn()
		cfg := r.config("node-a", w.workload(), lease.Config{TTL: 5 * time.Second, StopTimeout: 500 * time.Millisecond})
		sup := r.supervisor(t, cfg)
		sys := actor.NewActorSystem()
		parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &restarter{props: sup.Props()} }))
		time.Sleep(time.Second)
		require.Equal(t, int32(1), w.running.Load())

		sys.Root.Send(parent, restartChild{}) // the old term's workload ignores its cancellation
		time.Sleep(30 * time.Second)          // far past the old term's TTL
		assert.Equal(t, int32(1), w.most.Load(), "a new term started while the stuck workload ran")
		assert.Equal(t, int32(1), w.starts.Load())
		assert.Equal(t, 1, sup.Status().Stuck)
		stuck, _ := all[WorkloadStopTimeout](r.rec)
		assert.Len(t, stuck, 1)

		close(w.release) // it stops at last: the new incarnation leads
		synctest.Wait()
		assert.Equal(t, int32(2), w.starts.Load())
		assert.Equal(t, 1, count[StuckWorkloadStopped](r.rec))
		assert.Equal(t, StateLeading, sup.Status().State)
		_ = sys.Root.StopFuture(parent).Wait()
		sys.Shutdown()
	})
}

// The same when a supervision tree restarts the supervisor with its
// siblings (one for all): a new actor from the same Props.
func TestStuckWorkloadOutlivesAOneForAllRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := newStubborn()
		cfg := r.config("node-a", w.workload(), lease.Config{TTL: 5 * time.Second, StopTimeout: 500 * time.Millisecond})
		sup := r.supervisor(t, cfg)
		fail := make(chan error)
		tree, err := supervision.New(supervision.Spec{
			Name:     "app",
			Strategy: supervision.OneForAll,
			Children: []supervision.ChildSpec{
				{Name: "singleton", Props: sup.Props(), Shutdown: time.Second},
				{Name: "sibling", Func: func(ctx context.Context) error {
					select {
					case err := <-fail:
						return err
					case <-ctx.Done():
						return nil
					}
				}},
			},
		}, supervision.Options{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tree.Run(ctx) }()
		time.Sleep(time.Second)
		require.Equal(t, int32(1), w.running.Load())

		fail <- errors.New("the sibling fails") // one for all: the supervisor is stopped and started again
		time.Sleep(30 * time.Second)
		assert.Equal(t, int32(1), w.most.Load(), "a new term started while the stuck workload ran")
		assert.Equal(t, int32(1), w.starts.Load())

		close(w.release)
		synctest.Wait()
		assert.Equal(t, int32(2), w.starts.Load(), "leading again once the stuck workload stopped")
		cancel()
		<-done
	})
}

// watchStore's watch takes long to open, and longer to close.
type watchStore struct {
	lease.Store
	inner       lease.Watcher
	openDelay   time.Duration
	closeDelay  time.Duration
	openedWatch atomic.Int32
}

func (s *watchStore) Watch(ctx context.Context, id string) (<-chan lease.Event, error) {
	time.Sleep(s.openDelay) // a stream without a leader: it ignores ctx, up to the store's timeout
	ch, err := s.inner.Watch(ctx, id)
	if err != nil {
		return nil, err
	}
	s.openedWatch.Add(1)
	out := make(chan lease.Event, 1)
	go func() {
		defer close(out)
		for ev := range ch {
			select {
			case out <- ev:
			default:
			}
		}
		time.Sleep(s.closeDelay) // tearing the watch down blocks
	}()
	return out, nil
}

// A watch that is slow to open or to close never delays an acquisition or
// the start of a term: the first release opened the watch on the actor
// before acquiring, and waited for it to close before leading.
func TestSlowWatchNeverDelaysLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		store := &watchStore{Store: r.faults, inner: r.faults, openDelay: 5 * time.Second, closeDelay: 5 * time.Second}
		r.mem.Tamper(testLease, "node-b", 10*time.Second)
		c := &counter{}
		cfg := r.config("node-a", c.workload(), lease.Config{TTL: 10 * time.Second, StandbyRetryInterval: time.Hour})
		cfg.Store = store
		begin := time.Now()
		run := start(r.supervisor(t, cfg))
		synctest.Wait()
		assert.Equal(t, 1, r.faults.Calls(leasetest.OpAcquire), "the first attempt does not wait for the watch")
		time.Sleep(6 * time.Second) // the watch is open now
		require.Equal(t, int32(1), store.openedWatch.Load())
		time.Sleep(4 * time.Second) // node-b's lease expires; the watch sees it
		synctest.Wait()
		acquired, at := all[Acquired](r.rec)
		require.Len(t, acquired, 1)
		assert.Equal(t, begin.Add(10*time.Second), at[0], "taken over through the watch at expiry, not delayed by closing it")
		assert.Equal(t, int32(1), c.started.Load())
		require.NoError(t, run.stop())
	})
}

// A workload that stops late, after it was reported stuck, is no error once
// it has stopped: Run returns nil on a clean shutdown after the supervisor
// led again. The first release kept a stuck flag for the rest of Run.
func TestLateStopIsNotAnErrorOnceStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		var terms atomic.Int32
		w := WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			if terms.Add(1) == 1 {
				<-ctx.Done()
				time.Sleep(3 * time.Second) // stops, but after its StopTimeout of 1 s
				return nil
			}
			<-ctx.Done()
			return nil
		})
		cfg := r.config("node-a", w, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second,
			StopTimeout: time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: 10 * time.Millisecond, Cap: 10 * time.Millisecond}}
		s := r.supervisor(t, cfg)
		run := start(s)
		time.Sleep(time.Second)
		r.faults.FailNext(leasetest.OpRenew, 1, lease.ErrLost) // lost at the next renewal
		time.Sleep(20 * time.Second)
		assert.Equal(t, 1, count[WorkloadStopTimeout](r.rec))
		assert.Equal(t, 1, count[StuckWorkloadStopped](r.rec))
		assert.Equal(t, int32(2), terms.Load(), "leading again after the late stop and the old key's expiry")
		assert.Equal(t, StateLeading, s.Status().State)
		require.NoError(t, run.stop(), "nothing is stuck any more")
	})
}

// A workload that returns nil steps down: the lease is released, the
// instance stands by without counting a restart, and another instance
// takes over at once.
func TestWorkloadReturningNilStepsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := WorkloadFunc(func(ctx context.Context, _ lease.Token) error { return nil })
		lc := lease.Config{TTL: 10 * time.Second, StandbyRetryInterval: 4 * time.Second}
		a := r.supervisor(t, r.config("node-a", w, lc))
		runA := start(a)
		synctest.Wait()
		b := &counter{}
		runB := start(r.supervisor(t, r.config("node-b", b.workload(), lc)))
		synctest.Wait()
		assert.Equal(t, int32(1), b.started.Load(), "node-b took over at once")
		assert.Equal(t, 1, count[SteppedDown](r.rec))
		assert.Zero(t, count[Restarting](r.rec), "a step down is no failure")
		assert.Zero(t, count[WorkloadExited](r.rec))
		st := a.Status()
		assert.Equal(t, StateStandby, st.State)
		assert.Zero(t, st.Restarts)
		assert.Equal(t, "node-b", st.Holder.OwnerID)
		require.NoError(t, runB.stop())
		require.NoError(t, runA.stop())
	})
}

// A workload that fails is a failure: released, and the RestartPolicy
// applies; the stack of a panic is kept.
func TestWorkloadPanicIsAFailureWithItsStack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := WorkloadFunc(func(ctx context.Context, _ lease.Token) error { panic("boom") })
		cfg := r.config("node-a", w, lease.Config{TTL: 10 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Hour, Cap: time.Hour}}
		run := start(r.supervisor(t, cfg))
		synctest.Wait()
		exited, _ := all[WorkloadExited](r.rec)
		require.Len(t, exited, 1)
		var pe *supervision.PanicError
		require.ErrorAs(t, exited[0].Err, &pe)
		assert.Equal(t, "boom", pe.Value)
		assert.Contains(t, string(pe.Stack), "TestWorkloadPanicIsAFailureWithItsStack")
		assert.Equal(t, 1, count[Restarting](r.rec))
		assert.Equal(t, 1, count[Released](r.rec))
		require.NoError(t, run.stop())
	})
}

// A workload that returns because its lease was lost (its context's cause)
// is reported as lost, never as exited, even when its return is handled
// before the watchdog's Poison message.
func TestWorkloadReturningAfterLossIsALoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		w := WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			<-ctx.Done()
			return ctx.Err()
		})
		cfg := r.config("node-a", w, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		cfg.Restart = RestartPolicy{Backoff: supervision.Backoff{Base: time.Hour, Cap: time.Hour}}
		run := start(r.supervisor(t, cfg))
		synctest.Wait()
		r.faults.LoseRenewals(1)
		time.Sleep(3 * time.Second)
		assert.Zero(t, count[WorkloadExited](r.rec), "a loss is not a workload failure")
		restarting, _ := all[Restarting](r.rec)
		require.Len(t, restarting, 1)
		assert.ErrorIs(t, restarting[0].Cause, lease.ErrLost)
		require.NoError(t, run.stop())
	})
}

// Resign stops the workload, releases the lease and stands by without
// competing for the hold-off; another instance takes over at once, and the
// resigned one competes again afterwards.
func TestResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		lc := lease.Config{TTL: 10 * time.Second, StandbyRetryInterval: time.Second}
		a := &counter{}
		supA := r.supervisor(t, r.config("node-a", a.workload(), lc))
		require.ErrorIs(t, supA.Resign(t.Context(), 0), ErrNotRunning)
		runA := start(supA)
		synctest.Wait()
		require.Equal(t, StateLeading, supA.Status().State)

		b := &counter{}
		supB := r.supervisor(t, r.config("node-b", b.workload(), lc))
		runB := start(supB)
		synctest.Wait()
		assert.Equal(t, StateStandby, supB.Status().State)
		assert.Equal(t, "node-a", supB.Status().Holder.OwnerID)

		require.NoError(t, supA.Resign(t.Context(), time.Minute))
		assert.ErrorIs(t, a.lastCause(), ErrResigned)
		synctest.Wait()
		assert.Equal(t, int32(1), b.started.Load(), "node-b took over at once")
		stA := supA.Status()
		assert.Equal(t, StateStandby, stA.State)
		assert.Equal(t, time.Now().Add(time.Minute), stA.HoldOffUntil)
		assert.Zero(t, stA.Restarts)
		stepped, _ := all[SteppedDown](r.rec)
		require.Len(t, stepped, 1)
		assert.True(t, stepped[0].Resigned)

		require.NoError(t, supB.Resign(t.Context(), 0)) // node-b goes; node-a holds off for a minute
		time.Sleep(30 * time.Second)
		assert.Equal(t, int32(1), a.started.Load(), "node-a holds off")
		assert.Equal(t, int32(2), b.started.Load(), "node-b competes again at once and wins")
		require.NoError(t, runB.stop())
		time.Sleep(31 * time.Second)
		assert.Equal(t, int32(2), a.started.Load(), "node-a competes again after its hold-off")
		require.NoError(t, runA.stop())
	})
}

// Status reports the term while leading.
func TestStatusWhileLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		s := r.supervisor(t, r.config("node-a", (&counter{}).workload(),
			lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second}))
		assert.Equal(t, StateStarting, s.Status().State)
		run := start(s)
		synctest.Wait()
		begin := time.Now()
		time.Sleep(3 * time.Second)
		st := s.Status()
		assert.Equal(t, StateLeading, st.State)
		assert.Equal(t, testLease, st.LeaseID)
		assert.Equal(t, "node-a", st.OwnerID)
		assert.NotEmpty(t, st.Term)
		h, _, _ := r.mem.Holder(testLease)
		assert.Equal(t, h.Term, st.Term)
		assert.Equal(t, h.Token, st.Token)
		assert.Equal(t, begin, st.Since)
		assert.Equal(t, begin.Add(2*time.Second), st.RenewedAt)
		assert.Equal(t, 8*time.Second, st.Remaining(), "renewed at 2 s: valid until 2 s + TTL - margin")
		require.NoError(t, run.stop())
		assert.Equal(t, StateStopped, s.Status().State)
	})
}

// Nothing starts after Run returned: an acquisition that succeeds while Run
// is shutting down gives the lease back and starts no workload.
func TestNoTermStartsOnceRunReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		r.mem.Tamper(testLease, "node-b", 10*time.Second)
		c := &counter{}
		cfg := r.config("node-a", c.workload(), lease.Config{TTL: 10 * time.Second, RenewInterval: 3 * time.Second,
			StandbyRetryInterval: 10 * time.Second})
		run := start(r.supervisor(t, cfg))
		time.Sleep(9 * time.Second)
		r.faults.Delay(leasetest.OpAcquire, 2*time.Second) // the next attempt lands during the shutdown
		time.Sleep(2 * time.Second)                        // the attempt at expiry is under way
		require.NoError(t, run.stop())
		returned := time.Now()
		assert.Zero(t, c.started.Load(), "no workload started")
		assert.Zero(t, count[Acquired](r.rec))
		time.Sleep(time.Minute)
		assert.Zero(t, c.started.Load(), "nor later")
		assert.Empty(t, r.holder(), "the lease acquired during the shutdown was given back")
		_ = returned
	})
}

// A tree child that ignores its cancellation does not end the term when the
// tree abandons it and terminates: the term is stuck, the lease is not
// released (it expires), and no term starts while the child runs. The
// first release took the root's termination for the end of the work and
// released the lease at once.
func TestStubbornTreeChildKeepsTheTermStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		release := make(chan struct{})
		var running, most, starts atomic.Int32
		build := func(g Granted) (*supervision.Tree, error) {
			first := starts.Add(1) == 1
			return supervision.New(supervision.Spec{
				Name: "outbox",
				Children: []supervision.ChildSpec{{
					Name:     "dispatcher",
					Shutdown: 100 * time.Millisecond,
					Func: func(ctx context.Context) error {
						n := running.Add(1)
						defer running.Add(-1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						if first {
							<-release // ignores ctx
							return nil
						}
						<-ctx.Done()
						return nil
					},
				}},
			}, supervision.Options{})
		}
		lc := lease.Config{TTL: 5 * time.Second, StopTimeout: 400 * time.Millisecond, StandbyRetryInterval: time.Second}
		a := r.supervisor(t, r.config("node-a", WorkloadTree(build), lc))
		b := &counter{}
		runB := start(r.supervisor(t, r.config("node-b", b.workload(), lc)))
		synctest.Wait()
		require.Equal(t, int32(1), b.started.Load())
		runA := start(a)                // node-b leads; node-a stands by
		require.NoError(t, runB.stop()) // node-b goes: node-a leads
		synctest.Wait()
		require.Equal(t, int32(1), running.Load())

		require.ErrorIs(t, a.Resign(t.Context(), 0), ErrWorkloadStuck,
			"the tree abandoned its child after 100 ms; the term is stuck, not over")
		assert.Equal(t, 1, count[Released](r.rec), "only node-b's own release")
		h, _, ok := r.mem.Holder(testLease)
		require.True(t, ok, "the lease is left to expire, not released")
		assert.Equal(t, "node-a", h.OwnerID)
		stuck, _ := all[WorkloadStopTimeout](r.rec)
		require.Len(t, stuck, 1)

		time.Sleep(time.Minute) // far past the TTL: still no second term
		assert.Equal(t, int32(1), most.Load(), "two trees' children ran at once")
		assert.Equal(t, int32(1), starts.Load())

		close(release)
		synctest.Wait()
		assert.Equal(t, int32(2), starts.Load(), "a new term once the child has exited")
		assert.Equal(t, 1, count[StuckWorkloadStopped](r.rec))
		require.NoError(t, runA.stop())
	})
}
