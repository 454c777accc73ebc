package supervision_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

// flakyService is a Service that fails its first run and then serves until
// its context is done, recording the cause.
type flakyService struct {
	runs  atomic.Int32
	cause atomic.Value
}

func (c *flakyService) Serve(ctx context.Context) error {
	if c.runs.Add(1) == 1 {
		return errors.New("first run fails")
	}
	<-ctx.Done()
	c.cause.Store(context.Cause(ctx))
	return nil
}

// TestServiceChild checks that a Service runs like a Func: restarted
// after an error, cancelled with ErrShutdown on stop, and shown as a func.
func TestServiceChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := &flakyService{}
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "svc", Service: svc, Backoff: immediate},
		}}, supervision.Options{})
		assert.Equal(t, int32(2), svc.runs.Load())
		s := r.child("svc")
		assert.Equal(t, supervision.KindFunc, s.Kind)
		assert.Equal(t, supervision.StateRunning, s.State)
		assert.Equal(t, uint64(2), s.Incarnation)
		require.NoError(t, r.stop())
		assert.Equal(t, supervision.ErrShutdown, svc.cause.Load())
	})
}

// TestServiceIsOneProducer checks that Service counts as a producer: a
// child needs exactly one of Props, Func, Service and Tree.
func TestServiceIsOneProducer(t *testing.T) {
	_, err := supervision.New(supervision.Spec{Children: []supervision.ChildSpec{
		{Name: "both", Service: &flakyService{}, Func: func(context.Context) error { return nil }},
	}}, supervision.Options{})
	assert.ErrorIs(t, err, supervision.ErrInvalidSpec)
	assert.ErrorContains(t, err, "more than one of Props, Func, Service and Tree set")
	_, err = supervision.New(supervision.Spec{Children: []supervision.ChildSpec{{Name: "svc", Service: &flakyService{}}}}, supervision.Options{})
	assert.NoError(t, err)
}

// TestServeBackground checks that ServeBackground returns once every child
// has started, and that its channel receives what Run returns.
func TestServeBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tree, err := supervision.New(supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", nil)},
			{Name: "slow", Props: starter("slow", &journal{}, func() { time.Sleep(time.Second) })},
		}}, supervision.Options{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		t0 := time.Now()
		errc := tree.ServeBackground(ctx)
		assert.Equal(t, time.Second, time.Since(t0), "it waited for the slow start")
		assert.Equal(t, supervision.StateRunning, tree.Snapshot().State, "no synctest.Wait needed")
		assert.Equal(t, supervision.StateRunning, tree.Snapshot().Children[1].State)
		select {
		case err := <-errc:
			t.Fatalf("Run returned early: %v", err)
		default:
		}
		cancel()
		assert.NoError(t, <-errc)
	})
}

// TestServeBackgroundStartFailure checks that ServeBackground returns when
// the tree fails to start, with the error in its channel.
func TestServeBackgroundStartFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tree, err := supervision.New(supervision.Spec{Children: []supervision.ChildSpec{
			{Name: "s", Props: starter("s", &journal{}, func() { panic("no") })},
		}}, supervision.Options{})
		require.NoError(t, err)
		errc := tree.ServeBackground(t.Context())
		assert.ErrorIs(t, <-errc, supervision.ErrStart)
	})
}
