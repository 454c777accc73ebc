package supervision_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/supervision"
)

// TestIntensityAtRoot checks that more than Intensity restarts within
// Period stop the tree and make Run return an error naming the child and
// its failure, while restarts spread over longer than Period do not.
func TestIntensityAtRoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		r := start(t, supervision.Spec{Name: "app", Intensity: 2, Period: time.Second, Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j), Backoff: immediate},
			{Name: "b", Props: worker("b", j), Backoff: immediate},
		}}, supervision.Options{})
		// Two restarts per period, forever, are fine.
		for range 3 {
			r.send("b", boom{})
			r.send("b", boom{})
			advance(time.Second)
		}
		assert.Equal(t, uint64(7), r.child("b").Incarnation)
		r.takeEvents()
		j.take()

		r.send("b", boom{})
		r.send("b", boom{})
		r.sys.Root.Send(r.pid("b"), boom{})
		err := r.wait()
		var ie *supervision.IntensityError
		require.ErrorAs(t, err, &ie)
		assert.ErrorIs(t, err, supervision.ErrIntensity)
		assert.Equal(t, "app", ie.Supervisor)
		assert.Equal(t, "b", ie.Child)
		var pe *supervision.PanicError
		require.ErrorAs(t, ie.Reason, &pe)
		assert.Equal(t, "boom b", pe.Value)
		assert.EqualError(t, err, `supervision: app: more than 2 restarts in 1s: child "b": panic: boom b`)

		assert.Equal(t, []string{"stop b", "start b", "stop b", "start b", "stop b", "stop a"}, j.take(),
			"the third failure stops every child, in reverse order")
		events := r.takeEvents()
		assert.Equal(t, []string{
			`app exceeded 2 restarts in 1s at child "b": panic: boom b`,
			"app/a stopped (incarnation 1)",
			`app escalated: supervision: app: more than 2 restarts in 1s: child "b": panic: boom b`,
		}, events[len(events)-3:])
	})
}

// TestIntensityEscalatesUpANestedTree checks that a subtree that exceeds its
// intensity fails, that its parent restarts it (counting one restart), and
// that the parent escalates in turn when it exceeds its own intensity.
func TestIntensityEscalatesUpANestedTree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		sub := &supervision.Spec{Intensity: 1, Children: []supervision.ChildSpec{
			{Name: "w", Props: worker("w", j), Backoff: immediate},
		}}
		r := start(t, supervision.Spec{Name: "app", Intensity: 1, Children: []supervision.ChildSpec{
			{Name: "db", Props: worker("db", j)},
			{Name: "sub", Tree: sub, Backoff: immediate},
		}}, supervision.Options{})
		assert.Equal(t, []string{"start db", "start w"}, j.take())
		assert.Equal(t, "app/sub/w", r.pid("sub/w").Id)

		r.send("sub/w", boom{}) // restart 1 of 1 in sub
		r.send("sub/w", boom{}) // sub exceeds, fails, and app restarts it
		assert.Equal(t, uint64(2), r.child("sub").Incarnation)
		assert.Equal(t, uint64(1), r.child("sub/w").Incarnation, "a fresh subtree starts from its spec")
		assert.Equal(t, uint64(1), r.child("db").Incarnation)
		events := r.takeEvents()
		assert.Contains(t, events, `app/sub exceeded 1 restarts in 5s at child "w": panic: boom w`)
		assert.Contains(t, events, `app/sub escalated: supervision: app/sub: more than 1 restarts in 5s: child "w": panic: boom w`)
		assert.Contains(t, events, `app/sub restarted (incarnation 2, restart 1): supervision: app/sub: more than 1 restarts in 5s: child "w": panic: boom w`)

		r.send("sub/w", boom{})
		r.sys.Root.Send(r.pid("sub/w"), boom{}) // sub fails again: app exceeds
		err := r.wait()
		var top *supervision.IntensityError
		require.ErrorAs(t, err, &top)
		assert.Equal(t, "app", top.Supervisor)
		assert.Equal(t, "sub", top.Child)
		var inner *supervision.IntensityError
		require.ErrorAs(t, top.Reason, &inner)
		assert.Equal(t, "app/sub", inner.Supervisor)
		assert.Equal(t, "w", inner.Child)
		assert.Equal(t, supervision.StateFailed, r.tree.Snapshot().State)
	})
}

// escalationCatcher is a parent actor, like a LeaseSupervisor, that runs a
// tree's Props as its child and records the failures the tree escalates.
type escalationCatcher struct {
	props   *actor.Props
	reasons chan any
}

func (e *escalationCatcher) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		_, err := c.SpawnNamed(e.props, "workload")
		if err != nil {
			panic(err)
		}
	}
}

func (e *escalationCatcher) HandleFailure(_ *actor.ActorSystem, s actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason, _ any) {
	e.reasons <- reason
	s.StopChildren(child)
}

// TestPropsEscalateToTheirParent runs a tree as the child of an ordinary
// actor and checks that intensity exceeded reaches that actor's
// SupervisorStrategy as an *IntensityError.
func TestPropsEscalateToTheirParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := actorsys.New(nil)
		tree, err := supervision.New(supervision.Spec{Name: "inner", Intensity: supervision.NoRestarts, Children: []supervision.ChildSpec{
			{Name: "w", Props: worker("w", nil)},
		}}, supervision.Options{})
		require.NoError(t, err)
		catcher := &escalationCatcher{props: tree.Props(), reasons: make(chan any, 1)}
		parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return catcher }))
		synctest.Wait()
		require.NotNil(t, tree.PID())
		assert.Equal(t, parent.Id+"/workload", tree.PID().Id)
		w := tree.Snapshot().Children[0].PID
		assert.Equal(t, parent.Id+"/workload/w", w.Id)

		sys.Root.Send(w, boom{})
		reason := <-catcher.reasons
		ie, ok := reason.(*supervision.IntensityError)
		require.True(t, ok, "%T", reason)
		assert.Equal(t, "w", ie.Child)
		synctest.Wait() // the catcher has seen its child stop
		assert.Nil(t, tree.PID(), "the tree has stopped")

		require.NoError(t, sys.Root.StopFuture(parent).Wait())
		sys.Shutdown()
		synctest.Wait()
	})
}

// TestSecondInstanceFailsToStart checks that a tree runs as one instance.
func TestSecondInstanceFailsToStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "w", Props: worker("w", nil)},
		}}, supervision.Options{})
		assert.ErrorIs(t, r.tree.Run(t.Context()), supervision.ErrRunning)

		catcher := &escalationCatcher{props: r.tree.Props(), reasons: make(chan any, 1)}
		parent := r.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return catcher }))
		reason := <-catcher.reasons
		synctest.Wait() // the catcher has seen its child stop
		err, _ := reason.(error)
		assert.ErrorIs(t, err, supervision.ErrRunning)
		assert.Equal(t, supervision.StateRunning, r.tree.Snapshot().State, "the running instance is untouched")
		require.NoError(t, r.sys.Root.StopFuture(parent).Wait())
		require.NoError(t, r.stop())
	})
}

// TestPropsRestartedInPlace spawns a tree's Props at the root of an actor
// system, where protoactor-go's default strategy restarts a failed actor in
// place: the tree must clean up and start again from its spec.
func TestPropsRestartedInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := actorsys.New(nil)
		j := &journal{}
		tree, err := supervision.New(supervision.Spec{Name: "inner", Intensity: supervision.NoRestarts, Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j)},
			{Name: "b", Props: worker("b", j)},
		}}, supervision.Options{})
		require.NoError(t, err)
		pid, err := sys.Root.SpawnNamed(tree.Props(), "inner")
		require.NoError(t, err)
		require.NoError(t, tree.WaitRunning(t.Context()))
		assert.Equal(t, []string{"start a", "start b"}, j.take())

		sys.Root.Send(tree.Snapshot().Children[0].PID, boom{})
		synctest.Wait()
		assert.Equal(t, []string{"stop a", "stop b", "start a", "start b"}, j.take())
		s := tree.Snapshot()
		assert.Equal(t, supervision.StateRunning, s.State)
		assert.Equal(t, uint64(1), s.Children[0].Incarnation, "a new supervisor instance starts from the spec")
		assert.Equal(t, pid, tree.PID())

		require.NoError(t, sys.Root.StopFuture(pid).Wait())
		assert.Equal(t, []string{"stop b", "stop a"}, j.take())
		sys.Shutdown()
		synctest.Wait()
	})
}
