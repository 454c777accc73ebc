package supervision_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

// TestDynamicChildren starts, restarts, lists, counts and stops children
// of a running tree, at the root and in a nested tree.
func TestDynamicChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j)},
			{Name: "pool", Tree: &supervision.Spec{Strategy: supervision.OneForAll}},
		}}, supervision.Options{})
		ctx := t.Context()
		j.take()

		pid, err := r.tree.StartChild(ctx, "", supervision.ChildSpec{Name: "b", Props: worker("b", j)})
		require.NoError(t, err)
		assert.Equal(t, "app/b", pid.Id)
		for _, n := range []string{"w1", "w2"} {
			_, err := r.tree.StartChild(ctx, "pool", supervision.ChildSpec{Name: n, Props: worker(n, j), Backoff: immediate})
			require.NoError(t, err)
		}
		assert.Equal(t, []string{"start b", "start w1", "start w2"}, j.take())

		n, err := r.tree.Count("")
		require.NoError(t, err)
		assert.Equal(t, supervision.Counts{Specs: 3, Active: 3, Supervisors: 1, Workers: 2}, n)
		n, err = r.tree.Count("pool")
		require.NoError(t, err)
		assert.Equal(t, supervision.Counts{Specs: 2, Active: 2, Workers: 2}, n)
		kids, err := r.tree.Children("pool")
		require.NoError(t, err)
		require.Len(t, kids, 2)
		assert.Equal(t, "app/pool/w2", kids[1].PID.Id)

		// Dynamic children are supervised like the others (one-for-all here).
		r.send("pool/w1", boom{})
		assert.Equal(t, []string{"stop w1", "stop w2", "start w1", "start w2"}, j.take())

		_, err = r.tree.StartChild(ctx, "pool", supervision.ChildSpec{Name: "w1", Props: worker("w1", j)})
		assert.ErrorIs(t, err, supervision.ErrChildExists)
		_, err = r.tree.StartChild(ctx, "pool", supervision.ChildSpec{Name: "bad"})
		assert.ErrorIs(t, err, supervision.ErrInvalidSpec)
		_, err = r.tree.StartChild(ctx, "nope", supervision.ChildSpec{Name: "x", Props: worker("x", j)})
		assert.ErrorIs(t, err, supervision.ErrUnknownChild)
		_, err = r.tree.StartChild(ctx, "", supervision.ChildSpec{Name: "broken", Props: starter("broken", j, func() { panic("nope") })})
		assert.ErrorIs(t, err, supervision.ErrStart)
		j.take()

		pid, err = r.tree.RestartChild(ctx, "pool/w2")
		require.NoError(t, err)
		assert.Equal(t, "app/pool/w2", pid.Id)
		assert.Equal(t, []string{"stop w2", "start w2"}, j.take(), "a requested restart restarts only that child")
		assert.Equal(t, 2, r.child("pool/w2").Restarts)

		require.NoError(t, r.tree.StopChild(ctx, "pool/w1"))
		require.NoError(t, r.tree.StopChild(ctx, "b"))
		assert.Equal(t, []string{"stop w1", "stop b"}, j.take())
		assert.ErrorIs(t, r.tree.StopChild(ctx, "b"), supervision.ErrUnknownChild)
		n, err = r.tree.Count("")
		require.NoError(t, err)
		assert.Equal(t, supervision.Counts{Specs: 2, Active: 2, Supervisors: 1, Workers: 1}, n)
		_, err = r.tree.Children("a")
		assert.ErrorIs(t, err, supervision.ErrUnknownChild)

		require.NoError(t, r.stop())
		_, err = r.tree.StartChild(ctx, "", supervision.ChildSpec{Name: "late", Props: worker("late", j)})
		assert.ErrorIs(t, err, supervision.ErrNotRunning)
		assert.ErrorIs(t, r.tree.StopChild(ctx, "a"), supervision.ErrNotRunning)
	})
}

// TestRestartChildIsNotCountedTowardsIntensity checks that requested
// restarts never escalate.
func TestRestartChildIsNotCountedTowardsIntensity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, supervision.Spec{Name: "app", Intensity: supervision.NoRestarts, Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", nil)},
		}}, supervision.Options{})
		for range 5 {
			_, err := r.tree.RestartChild(t.Context(), "a")
			require.NoError(t, err)
		}
		assert.Equal(t, uint64(6), r.child("a").Incarnation)
		require.NoError(t, r.stop())
	})
}

// TestRestartChildStartsAStoppedTransient checks RestartChild on a
// transient child that exited normally.
func TestRestartChildStartsAStoppedTransient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", nil), Restart: supervision.Transient},
		}}, supervision.Options{})
		r.send("a", quit{})
		assert.Equal(t, supervision.StateStopped, r.child("a").State)
		_, err := r.tree.RestartChild(t.Context(), "a")
		require.NoError(t, err)
		assert.Equal(t, supervision.StateRunning, r.child("a").State)
		require.NoError(t, r.stop())
	})
}

// TestStopChildReportsTimeout checks StopChild on a child that does not stop.
func TestStopChildReportsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "f", Func: func(context.Context) error { <-release; return nil }, Shutdown: time.Second},
		}}, supervision.Options{})
		err := r.tree.StopChild(t.Context(), "f")
		assert.ErrorIs(t, err, supervision.ErrUnstopped)
		err = r.stop()
		assert.ErrorIs(t, err, supervision.ErrUnstopped, "Run reports it too: it still runs")
		close(release)
		synctest.Wait()
	})
}

// TestStaleBackoffTimers checks that a backoff timer never restarts a child
// that was restarted or stopped in the meantime.
func TestStaleBackoffTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		slow := supervision.Backoff{Base: time.Second, Jitter: supervision.NoJitter}
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j), Backoff: slow},
			{Name: "b", Props: worker("b", j), Backoff: slow},
			{Name: "c", Props: worker("c", j), Backoff: supervision.Backoff{Base: 2 * time.Second, Jitter: supervision.NoJitter}},
		}}, supervision.Options{})
		j.take()

		// a: restarted by hand during its backoff.
		r.send("a", boom{})
		advance(500 * time.Millisecond)
		_, err := r.tree.RestartChild(t.Context(), "a")
		require.NoError(t, err)
		// b: stopped by hand during its backoff.
		r.send("b", boom{})
		require.NoError(t, r.tree.StopChild(t.Context(), "b"))
		// c: fails later, so a timer is re-armed for it.
		r.send("c", boom{})
		assert.Equal(t, []string{"stop a", "start a", "stop b", "stop c"}, j.take())

		advance(10 * time.Second)
		assert.Equal(t, []string{"start c"}, j.take(), "only c's restart was still due")
		assert.Equal(t, uint64(2), r.child("a").Incarnation)
		kids, err := r.tree.Children("")
		require.NoError(t, err)
		assert.Len(t, kids, 2)

		// The restarted a keeps its own series: a new failure backs off again.
		r.send("a", boom{})
		assert.Equal(t, supervision.StateBackoff, r.child("a").State)
		assert.Equal(t, []string{"stop a"}, j.take())
		require.NoError(t, r.stop(), "stopped during a's backoff")
		assert.Equal(t, []string{"stop c"}, j.take())

		// A stopped tree's timers are gone: nothing restarts later.
		advance(time.Minute)
		assert.Empty(t, j.take())
	})
}
