package supervision_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

// TestRestartTypes checks permanent, transient and temporary children
// under normal exits (the actor stops itself) and abnormal exits (a panic).
func TestRestartTypes(t *testing.T) {
	for _, tc := range []struct {
		restart   supervision.RestartType
		msg       any
		restarted bool
		listed    bool
	}{
		{supervision.Permanent, quit{}, true, true},
		{supervision.Permanent, boom{}, true, true},
		{supervision.Transient, quit{}, false, true},
		{supervision.Transient, boom{}, true, true},
		{supervision.Temporary, quit{}, false, false},
		{supervision.Temporary, boom{}, false, false},
	} {
		exit := "normal"
		if _, ok := tc.msg.(boom); ok {
			exit = "abnormal"
		}
		t.Run(tc.restart.String()+"/"+exit, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := start(t, supervision.Spec{Name: "app", Intensity: supervision.NoRestarts, Children: []supervision.ChildSpec{
					{Name: "w", Props: worker("w", nil), Restart: tc.restart, Backoff: immediate},
					{Name: "other", Props: worker("other", nil)},
				}}, supervision.Options{})
				r.takeEvents()
				r.send("w", tc.msg)
				if !tc.restarted {
					// No restart: the intensity (none allowed) is not touched.
					kids, err := r.tree.Children("")
					require.NoError(t, err)
					if tc.listed {
						require.Len(t, kids, 2)
						assert.Equal(t, supervision.StateStopped, kids[0].State)
						assert.Nil(t, kids[0].PID)
					} else {
						require.Len(t, kids, 1)
						assert.Equal(t, "other", kids[0].Name)
					}
					require.NoError(t, r.stop())
					return
				}
				// A restart exceeds the intensity of NoRestarts: Run fails.
				err := r.wait()
				var ie *supervision.IntensityError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, "w", ie.Child)
				assert.Equal(t, exit == "normal", ie.Reason == nil)
			})
		})
	}
}

// TestFuncChildExits checks the exits of a Func child: nil is normal, an
// error or a panic is abnormal, and a panic carries its value and stack.
func TestFuncChildExits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		results := make(chan func() error)
		fn := func(ctx context.Context) error {
			select {
			case f := <-results:
				return f()
			case <-ctx.Done():
				return nil
			}
		}
		r := start(t, supervision.Spec{Name: "app", Intensity: 10, Children: []supervision.ChildSpec{
			{Name: "f", Func: fn, Restart: supervision.Transient, Backoff: immediate},
		}}, supervision.Options{})
		r.takeEvents()

		errFailed := errors.New("failed")
		results <- func() error { return errFailed }
		synctest.Wait()
		assert.Equal(t, uint64(2), r.child("f").Incarnation)
		assert.ErrorIs(t, r.child("f").LastFailure, errFailed)

		results <- func() error { panicInWorker(); return nil }
		synctest.Wait()
		assert.Equal(t, uint64(3), r.child("f").Incarnation)
		var pe *supervision.PanicError
		require.ErrorAs(t, r.child("f").LastFailure, &pe)
		assert.Equal(t, "deliberate", pe.Value)
		assert.Contains(t, string(pe.Stack), "panicInWorker", "the stack shows where the panic happened")

		results <- func() error { return nil }
		synctest.Wait()
		assert.Equal(t, supervision.StateStopped, r.child("f").State, "a transient child stays stopped after a normal exit")
		assert.Equal(t, []string{
			"app/f failed (incarnation 1): failed",
			"app/f restarts in 0s (attempt 1)",
			"app/f restarted (incarnation 2, restart 1): failed",
			"app/f failed (incarnation 2): panic: deliberate",
			"app/f restarts in 0s (attempt 2)",
			"app/f restarted (incarnation 3, restart 2): panic: deliberate",
			"app/f exited normally (incarnation 3)",
		}, r.takeEvents())
		require.NoError(t, r.stop())
	})
}

func panicInWorker() { panic("deliberate") }

// TestFuncChildContextCause checks that a Func child's context is
// cancelled with ErrShutdown when the tree stops.
func TestFuncChildContextCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cause := make(chan error, 1)
		r := start(t, supervision.Spec{Children: []supervision.ChildSpec{
			{Name: "f", Func: func(ctx context.Context) error {
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return ctx.Err()
			}},
		}}, supervision.Options{})
		require.NoError(t, r.stop())
		assert.ErrorIs(t, <-cause, supervision.ErrShutdown)
	})
}

// TestActorPanicCarriesStack checks that an actor's panic reaches the
// supervisor as a *PanicError with the panic value and a stack that shows
// the actor's Receive.
func TestActorPanicCarriesStack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, supervision.Spec{Children: []supervision.ChildSpec{
			{Name: "w", Props: actor.PropsFromFunc(panickyReceive), Backoff: immediate},
		}}, supervision.Options{})
		r.send("w", boom{})
		var pe *supervision.PanicError
		require.ErrorAs(t, r.child("w").LastFailure, &pe)
		assert.Equal(t, "panicky", pe.Value)
		assert.True(t, strings.Contains(string(pe.Stack), "panickyReceive"), "%s", pe.Stack)
		require.NoError(t, r.stop())
	})
}

func panickyReceive(c actor.Context) {
	if _, ok := c.Message().(boom); ok {
		panic("panicky")
	}
}

// TestFailIsAnAbnormalExitWithoutStack checks Fail.
func TestFailIsAnAbnormalExitWithoutStack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errLost := errors.New("lease lost")
		r := start(t, supervision.Spec{Children: []supervision.ChildSpec{
			{Name: "w", Restart: supervision.Transient, Backoff: immediate, Props: actor.PropsFromFunc(func(c actor.Context) {
				if _, ok := c.Message().(boom); ok {
					supervision.Fail(c, errLost)
				}
			})},
		}}, supervision.Options{})
		r.send("w", boom{})
		w := r.child("w")
		assert.Equal(t, uint64(2), w.Incarnation, "a transient child restarts after Fail")
		assert.ErrorIs(t, w.LastFailure, errLost)
		var pe *supervision.PanicError
		assert.False(t, errors.As(w.LastFailure, &pe))
		require.NoError(t, r.stop())
	})
}
