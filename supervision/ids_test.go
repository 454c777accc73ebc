package supervision_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

// stuckOnStop returns props of an actor that blocks in Stopping until
// release is closed, and journals its life as name.
func stuckOnStop(name string, j *journal, release <-chan struct{}) *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			j.add("start " + name)
		case *actor.Stopping:
			<-release
			j.add("stop " + name)
		}
	})
}

// TestIDSuffixWhileAnAbandonedIncarnationRuns checks the documented rule
// for ids: a new incarnation takes the child's id unless an abandoned
// incarnation still holds it, and then a "#n" suffix; once the abandoned
// incarnation has gone, the next restart takes the plain id again.
func TestIDSuffixWhileAnAbandonedIncarnationRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var incarnation atomic.Int32
		props := actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(*actor.Started); ok {
				incarnation.Add(1)
			}
			if _, ok := c.Message().(*actor.Stopping); ok && incarnation.Load() == 1 {
				<-release // only the first incarnation is stuck
			}
		})
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "b", Props: props, Shutdown: time.Second, Backoff: immediate},
		}}, supervision.Options{})
		assert.Equal(t, "app/b", r.pid("b").Id)

		_, err := r.tree.RestartChild(t.Context(), "b")
		require.NoError(t, err)
		assert.Equal(t, "app/b#2", r.pid("b").Id, "incarnation 1 still holds app/b")
		assert.Equal(t, []string{"app/b"}, unstoppedPaths(r.tree))

		close(release)
		synctest.Wait()
		assert.Nil(t, r.tree.Unstopped())
		_, err = r.tree.RestartChild(t.Context(), "b")
		require.NoError(t, err)
		assert.Equal(t, "app/b", r.pid("b").Id, "the plain id is free again")
		require.NoError(t, r.stop())
	})
}

// TestIDSuffixSkipsIDsStillHeld re-adds a dynamic child whose earlier
// incarnations were abandoned and still hold both its plain id and its
// first suffixed id: the new one must find an id that is free.
func TestIDSuffixSkipsIDsStillHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		j := &journal{}
		r := start(t, supervision.Spec{Name: "app"}, supervision.Options{})
		ctx := t.Context()
		spec := supervision.ChildSpec{Name: "d", Props: stuckOnStop("d", j, release), Shutdown: time.Second}
		var ids []string
		for range 3 {
			pid, err := r.tree.StartChild(ctx, "", spec)
			if !assert.NoError(t, err) {
				break
			}
			ids = append(ids, pid.Id)
			assert.ErrorIs(t, r.tree.StopChild(ctx, "d"), supervision.ErrUnstopped)
		}
		if assert.Len(t, ids, 3) {
			assert.Equal(t, []string{"app/d", "app/d#1", "app/d#2"}, ids)
		}
		assert.Len(t, unstoppedPaths(r.tree), 3)
		close(release)
		synctest.Wait()
		require.NoError(t, r.stop())
	})
}
