package supervision_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/supervision"
)

// stubborn returns a Func that ignores its context until release is closed.
func stubborn(release <-chan struct{}) func(context.Context) error {
	return func(context.Context) error { <-release; return nil }
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// unstoppedPaths returns the paths the tree reports as abandoned and still
// running.
func unstoppedPaths(tree *supervision.Tree) []string {
	ue := tree.Unstopped()
	if ue == nil {
		return nil
	}
	out := make([]string, len(ue.Children))
	for i, c := range ue.Children {
		out[i] = c.Path
	}
	return out
}

// TestStoppedWaitsForAbandonedChildrenUnderProps spawns a tree as Props,
// as a lease supervisor does with its workload, with Func children that
// ignore their context, one of them in a nested tree. Once the root actor
// has terminated, the spawner must learn which children still run, and
// Stopped must stay open until every one of them has returned.
func TestStoppedWaitsForAbandonedChildrenUnderProps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		releaseTop, releaseDeep := make(chan struct{}), make(chan struct{})
		tree, err := supervision.New(supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "sub", Shutdown: time.Second, Tree: &supervision.Spec{Children: []supervision.ChildSpec{
				{Name: "deep", Func: stubborn(releaseDeep), Shutdown: 3 * time.Second},
			}}},
			{Name: "top", Func: stubborn(releaseTop), Shutdown: time.Second},
		}}, supervision.Options{})
		require.NoError(t, err)
		sys := actorsys.New(nil)
		defer sys.Shutdown()
		assert.False(t, isClosed(tree.Stopped()), "a tree that has not started yet has not stopped")

		pid, err := sys.Root.SpawnNamed(tree.Props(), "workload")
		require.NoError(t, err)
		require.NoError(t, tree.WaitRunning(t.Context()))
		stopped := tree.Stopped()
		assert.False(t, isClosed(stopped))
		assert.Nil(t, tree.Unstopped())

		// The root gives up on top after 1 s and on sub after 1 s more,
		// then terminates.
		require.NoError(t, sys.Root.StopFuture(pid).Wait())
		assert.Equal(t, []string{"app/top", "app/sub"}, unstoppedPaths(tree))
		assert.Equal(t, "workload/top", tree.Unstopped().Children[0].PID.Id)
		assert.False(t, isClosed(stopped), "the root terminated, but its children still run")

		// sub gives up on deep 3 s after it was asked to stop, then stops:
		// deep replaces it in the report.
		advance(time.Hour)
		assert.Equal(t, []string{"app/top", "app/sub/deep"}, unstoppedPaths(tree))
		assert.False(t, isClosed(stopped), "children that ignore their context forever keep it open")

		close(releaseTop)
		synctest.Wait()
		assert.Equal(t, []string{"app/sub/deep"}, unstoppedPaths(tree))
		assert.False(t, isClosed(stopped))

		close(releaseDeep)
		synctest.Wait()
		assert.Nil(t, tree.Unstopped())
		assert.True(t, isClosed(stopped), "every abandoned child has returned")
		assert.True(t, isClosed(tree.Stopped()))
	})
}

// TestStoppedAfterACleanStop checks that Stopped is closed by the time the
// root actor has terminated when every child stopped in time.
func TestStoppedAfterACleanStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tree, err := supervision.New(supervision.Spec{Children: []supervision.ChildSpec{
			{Name: "w", Props: worker("w", nil)},
			{Name: "f", Func: func(ctx context.Context) error { <-ctx.Done(); return nil }},
		}}, supervision.Options{})
		require.NoError(t, err)
		sys := actorsys.New(nil)
		defer sys.Shutdown()
		pid := sys.Root.Spawn(tree.Props())
		require.NoError(t, tree.WaitRunning(t.Context()))
		require.NoError(t, sys.Root.StopFuture(pid).Wait())
		assert.True(t, isClosed(tree.Stopped()))
		assert.Nil(t, tree.Unstopped())
	})
}

// TestStoppedUnderRun checks Stopped and Unstopped beside Run's own report,
// and that a new run opens a new Stopped channel.
func TestStoppedUnderRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		sys := actorsys.New(nil)
		defer func() {
			sys.Shutdown()
			// In the second run the child returns at once, and the tree's
			// Stop can reach it after it exited and before its Terminated
			// was handled: a dead letter (1 in 300 runs), whose throttle
			// goroutine lives 1 s. Let it end inside the bubble.
			time.Sleep(2 * time.Second)
		}()
		tree, err := supervision.New(supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "f", Func: stubborn(release), Shutdown: time.Second},
		}}, supervision.Options{System: sys.ActorSystem})
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(t.Context())
		done := tree.ServeBackground(ctx)
		first := tree.Stopped()
		cancel()
		var ue *supervision.UnstoppedError
		require.ErrorAs(t, <-done, &ue)
		assert.Equal(t, ue.Children, tree.Unstopped().Children, "the same report as Run's")
		assert.False(t, isClosed(first))
		close(release)
		synctest.Wait()
		assert.True(t, isClosed(first))
		assert.Nil(t, tree.Unstopped())

		// Run it again: the closed channel stays closed, a new one is open.
		ctx, cancel = context.WithCancel(t.Context())
		done = tree.ServeBackground(ctx)
		second := tree.Stopped()
		assert.False(t, isClosed(second))
		assert.True(t, isClosed(first))
		cancel()
		require.NoError(t, <-done)
		assert.True(t, isClosed(second))
	})
}
