package supervision_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

// TestOrderedStartReverseStop checks that children start in spec order,
// each after the previous one has processed Started, including inside a
// nested tree, and stop in reverse order.
func TestOrderedStartReverseStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j)},
			{Name: "sub", Tree: &supervision.Spec{Children: []supervision.ChildSpec{
				{Name: "b1", Props: worker("b1", j)},
				{Name: "b2", Func: func(ctx context.Context) error {
					// A Func child has started when its goroutine is launched:
					// this may run after c has started, so it journals its stop
					// only, which its actor waits for.
					<-ctx.Done()
					j.add("stop b2")
					return nil
				}},
			}}},
			{Name: "c", Props: worker("c", j)},
		}}, supervision.Options{})
		assert.Equal(t, []string{"start a", "start b1", "start c"}, j.take())
		require.NoError(t, r.stop())
		assert.Equal(t, []string{"stop c", "stop b2", "stop b1", "stop a"}, j.take())
		s := r.tree.Snapshot()
		assert.Equal(t, supervision.StateStopped, s.State)
		assert.Equal(t, supervision.StateStopped, s.Children[1].Children[0].State)
	})
}

// starter returns props whose Started handler runs f.
func starter(name string, j *journal, f func()) *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			j.add("start " + name)
			f()
		case *actor.Stopping:
			j.add("stop " + name)
		}
	})
}

// TestStartFailureAbortsTheStart checks that a child failing in Started
// aborts the start: the children started before it are stopped in reverse
// order, later children never start, and Run returns a *StartError.
func TestStartFailureAbortsTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j)},
			{Name: "sub", Tree: &supervision.Spec{Children: []supervision.ChildSpec{
				{Name: "b1", Props: worker("b1", j)},
				{Name: "b2", Props: starter("b2", j, func() { panic("no database") })},
				{Name: "b3", Props: worker("b3", j)},
			}}},
			{Name: "c", Props: worker("c", j)},
		}}, supervision.Options{})
		err := r.wait()
		var se *supervision.StartError
		require.ErrorAs(t, err, &se)
		assert.ErrorIs(t, err, supervision.ErrStart)
		assert.Equal(t, "app/sub/b2", se.Path)
		var pe *supervision.PanicError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "no database", pe.Value)
		assert.Equal(t, []string{"start a", "start b1", "start b2", "stop b2", "stop b1", "stop a"}, j.take())
	})
}

// TestStartTimeout checks that a child that does not process Started
// within its start timeout fails to start, and, since it does not stop
// either, is reported as not stopped.
func TestStartTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		release := make(chan struct{})
		t0 := time.Now()
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j)},
			{Name: "slow", Props: starter("slow", j, func() { <-release }),
				StartTimeout: 2 * time.Second, Shutdown: time.Second},
		}}, supervision.Options{})
		err := r.wait()
		assert.Equal(t, 3*time.Second, time.Since(t0), "start timeout, then shutdown timeout")
		var se *supervision.StartError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, "app/slow", se.Path)
		assert.ErrorContains(t, err, "not started within 2s")
		var ue *supervision.UnstoppedError
		require.ErrorAs(t, err, &ue)
		require.Len(t, ue.Children, 1)
		assert.Equal(t, "app/slow", ue.Children[0].Path)
		assert.Equal(t, []string{"start a", "start slow", "stop a"}, j.take())
		close(release)
		synctest.Wait()
		assert.Equal(t, []string{"stop slow"}, j.take(), "the abandoned child stops once released")
	})
}

// TestShutdownTimeoutReport checks that a child that does not stop in time
// does not hang the shutdown: the others still stop, in reverse order, and
// Run returns an *UnstoppedError naming it (inside a nested tree too).
func TestShutdownTimeoutReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		release := make(chan struct{})
		stuck := actor.PropsFromFunc(func(c actor.Context) {
			switch c.Message().(type) {
			case *actor.Started:
				j.add("start stuck")
			case *actor.Stopping:
				j.add("stopping stuck")
				<-release
				j.add("stopped stuck")
			}
		})
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j)},
			{Name: "sub", Tree: &supervision.Spec{Children: []supervision.ChildSpec{
				{Name: "stuck", Props: stuck, Shutdown: 3 * time.Second},
				{Name: "b", Props: worker("b", j)},
			}}},
			{Name: "c", Props: worker("c", j), Shutdown: time.Second},
		}}, supervision.Options{})
		j.take()
		r.takeEvents()
		t0 := time.Now()
		err := r.stop()
		assert.Equal(t, 3*time.Second, time.Since(t0), "the stop took the stuck child's shutdown time")
		var ue *supervision.UnstoppedError
		require.ErrorAs(t, err, &ue)
		assert.ErrorIs(t, err, supervision.ErrUnstopped)
		require.Len(t, ue.Children, 1)
		assert.Equal(t, "app/sub/stuck", ue.Children[0].Path)
		assert.Equal(t, "app/sub/stuck", ue.Children[0].PID.Id)
		assert.Equal(t, 3*time.Second, ue.Children[0].Timeout)
		assert.EqualError(t, err, "supervision: children did not stop in time: app/sub/stuck (after 3s)")
		assert.Equal(t, []string{"stop c", "stop b", "stopping stuck", "stop a"}, j.take())
		assert.Contains(t, r.takeEvents(), "app/sub/stuck did not stop within 3s (incarnation 1)")

		close(release)
		synctest.Wait()
		assert.Equal(t, []string{"stopped stuck"}, j.take())
	})
}

// TestShutdownDefaultsForSubtrees checks that a nested tree's default
// shutdown time covers its children's.
func TestShutdownDefaultsForSubtrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "sub", Tree: &supervision.Spec{Children: []supervision.ChildSpec{
				{Name: "f", Func: func(context.Context) error { <-release; return nil }, Shutdown: 20 * time.Second},
			}}},
		}}, supervision.Options{})
		t0 := time.Now()
		err := r.stop()
		assert.Equal(t, 20*time.Second, time.Since(t0))
		var ue *supervision.UnstoppedError
		require.ErrorAs(t, err, &ue)
		require.Len(t, ue.Children, 1)
		assert.Equal(t, "app/sub/f", ue.Children[0].Path, "the subtree itself stopped in time")
		close(release)
		synctest.Wait()
	})
}

// TestRestartAroundAnAbandonedChild checks that a group restart goes on
// when a sibling does not stop in time: the sibling is abandoned and its
// new incarnation gets a fresh id, since the old one still holds its name.
func TestRestartAroundAnAbandonedChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		release := make(chan struct{})
		var stuckOnce atomic.Bool
		sticky := actor.PropsFromFunc(func(c actor.Context) {
			switch c.Message().(type) {
			case *actor.Started:
				j.add("start b")
			case *actor.Stopping:
				if stuckOnce.CompareAndSwap(false, true) {
					<-release
				}
				j.add("stop b")
			}
		})
		r := start(t, supervision.Spec{Name: "app", Strategy: supervision.OneForAll, Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j), Backoff: immediate},
			{Name: "b", Props: sticky, Shutdown: time.Second},
		}}, supervision.Options{})
		j.take()
		r.takeEvents()
		r.send("a", boom{})
		assert.Equal(t, supervision.StateStopping, r.child("b").State)
		advance(time.Second) // b's shutdown time
		assert.Equal(t, []string{"stop a", "start a", "start b"}, j.take())
		assert.Equal(t, "app/b#2", r.pid("b").Id)
		assert.Contains(t, r.takeEvents(), "app/b did not stop within 1s (incarnation 1)")

		close(release)
		synctest.Wait()
		assert.Equal(t, []string{"stop b"}, j.take(), "the abandoned incarnation stopped late")
		require.NoError(t, r.stop(), "nothing is left running")
		assert.Equal(t, []string{"stop b", "stop a"}, j.take())
	})
}

// TestChildThatStopsAtOnce checks children that stop themselves while
// processing Started: a normal exit right after a successful start.
func TestChildThatStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "once", Restart: supervision.Transient, Props: actor.PropsFromFunc(func(c actor.Context) {
				if _, ok := c.Message().(*actor.Started); ok {
					j.add("run once")
					c.Stop(c.Self())
				}
			})},
			{Name: "after", Props: worker("after", j)},
		}}, supervision.Options{})
		assert.Equal(t, []string{"run once", "start after"}, j.take())
		assert.Equal(t, supervision.StateStopped, r.child("once").State)
		assert.Contains(t, r.takeEvents(), "app/once exited normally (incarnation 1)")
		require.NoError(t, r.stop())
	})
}
