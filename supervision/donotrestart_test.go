package supervision_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

var errBadConfig = fmt.Errorf("bad config: %w", supervision.ErrDoNotRestart)

// TestDoNotRestart checks that a child whose exit reason wraps
// ErrDoNotRestart is not restarted, whatever its restart type, without
// counting towards the intensity (none is allowed here), and that it is
// left in the spec, stopped, with the reason as its last failure (a
// temporary child is removed, as after any exit).
func TestDoNotRestart(t *testing.T) {
	actorChild := actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(boom); ok {
			supervision.Fail(c, errBadConfig)
		}
	})
	for _, restart := range []supervision.RestartType{supervision.Permanent, supervision.Transient, supervision.Temporary} {
		for _, kind := range []string{"func", "actor"} {
			t.Run(restart.String()+"/"+kind, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					give := make(chan struct{}) // made in the bubble, so that waits on it are durable
					cs := supervision.ChildSpec{Name: "w", Restart: restart, Backoff: immediate}
					if kind == "func" {
						cs.Func = func(ctx context.Context) error {
							select {
							case <-give:
								return errBadConfig
							case <-ctx.Done():
								return nil
							}
						}
					} else {
						cs.Props = actorChild
					}
					r := start(t, supervision.Spec{Name: "app", Intensity: supervision.NoRestarts, Children: []supervision.ChildSpec{
						cs, {Name: "other", Props: worker("other", nil)},
					}}, supervision.Options{})
					r.takeEvents()
					if kind == "func" {
						give <- struct{}{}
						synctest.Wait()
					} else {
						r.send("w", boom{})
					}
					assert.Equal(t, []string{"app/w failed (incarnation 1): bad config: supervision: do not restart"}, r.takeEvents())
					kids, err := r.tree.Children("")
					require.NoError(t, err)
					if restart == supervision.Temporary {
						require.Len(t, kids, 1)
						assert.Equal(t, "other", kids[0].Name)
					} else {
						require.Len(t, kids, 2)
						assert.Equal(t, supervision.StateStopped, kids[0].State)
						assert.ErrorIs(t, kids[0].LastFailure, supervision.ErrDoNotRestart)
					}
					require.NoError(t, r.stop(), "the tree ran on: no intensity exceeded")
				})
			})
		}
	}
}

// TestDoNotRestartInAGroup checks ErrDoNotRestart under OneForAll: the
// exit restarts no sibling, and a later group restart leaves the child
// stopped (unlike a transient child that exited normally, which OTP starts
// again with its group). RestartChild starts it again.
func TestDoNotRestartInAGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &journal{}
		r := start(t, supervision.Spec{Name: "app", Strategy: supervision.OneForAll, Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", j), Backoff: immediate},
			{Name: "n", Backoff: immediate, Props: actor.PropsFromFunc(func(c actor.Context) {
				switch c.Message().(type) {
				case *actor.Started:
					j.add("start n")
				case boom:
					supervision.Fail(c, supervision.ErrDoNotRestart)
				}
			})},
			{Name: "c", Props: worker("c", j), Backoff: immediate},
		}}, supervision.Options{})
		j.take()
		r.send("n", boom{})
		assert.Empty(t, j.take(), "nothing restarts")
		assert.Equal(t, []uint64{1, 1, 1}, r.incarnations("a", "n", "c"))

		r.send("a", boom{})
		assert.Equal(t, []string{"stop a", "stop c", "start a", "start c"}, j.take())
		assert.Equal(t, []uint64{2, 1, 2}, r.incarnations("a", "n", "c"))
		assert.Equal(t, supervision.StateStopped, r.child("n").State)

		_, err := r.tree.RestartChild(t.Context(), "n")
		require.NoError(t, err)
		assert.Equal(t, supervision.StateRunning, r.child("n").State)
		require.NoError(t, r.stop())
	})
}

// TestDoNotRestartCountsOnlyAfterAStart checks that ErrDoNotRestart is a
// started child's reason only: an incarnation that fails to start with it
// (here while being restarted) has failed to start, and is retried.
func TestDoNotRestartCountsOnlyAfterAStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var starts atomic.Int32
		r := start(t, supervision.Spec{Name: "app", Intensity: 10, Children: []supervision.ChildSpec{
			{Name: "s", Backoff: immediate, Props: actor.PropsFromFunc(func(c actor.Context) {
				switch c.Message().(type) {
				case *actor.Started:
					if starts.Add(1) == 2 {
						supervision.Fail(c, supervision.ErrDoNotRestart)
					}
				case boom:
					panic("boom")
				}
			})},
		}}, supervision.Options{})
		r.takeEvents()
		r.send("s", boom{})
		assert.Equal(t, int32(3), starts.Load(), "the failed start was retried")
		assert.Equal(t, supervision.StateRunning, r.child("s").State)
		assert.Equal(t, []string{
			"app/s failed (incarnation 1): panic: boom",
			"app/s restarts in 0s (attempt 1)",
			"app/s failed (incarnation 2): supervision: app/s: start failed: supervision: do not restart",
			"app/s restarts in 0s (attempt 2)",
			"app/s restarted (incarnation 2, restart 1): supervision: app/s: start failed: supervision: do not restart",
		}, r.takeEvents())
		require.NoError(t, r.stop())
	})
}
