package supervision_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

// crasher is a Func child that records when (in virtual time) each of its
// incarnations starts, and fails at once while crashing is set; otherwise
// it runs until told to fail.
type crasher struct {
	t0   time.Time
	fail chan struct{}

	mu       sync.Mutex
	times    []time.Duration
	crashing bool
}

func newCrasher() *crasher {
	return &crasher{t0: time.Now(), fail: make(chan struct{}), crashing: true}
}

func (c *crasher) fn(ctx context.Context) error {
	c.mu.Lock()
	c.times = append(c.times, time.Since(c.t0))
	crashing := c.crashing
	c.mu.Unlock()
	if !crashing {
		select {
		case <-ctx.Done():
			return nil
		case <-c.fail:
		}
	}
	return errors.New("crash")
}

func (c *crasher) setCrashing(b bool) {
	c.mu.Lock()
	c.crashing = b
	c.mu.Unlock()
}

func (c *crasher) starts() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.times...)
}

// backoffEvents keeps the BackoffScheduled lines of events.
func backoffEvents(events []string) []string {
	var out []string
	for _, e := range events {
		if strings.Contains(e, " restarts in ") {
			out = append(out, e)
		}
	}
	return out
}

// TestBackoffSchedule checks the delays between restarts: exponential from
// Base, capped at Cap, and back to Base after a stable run of ResetAfter.
func TestBackoffSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ms = time.Millisecond
		c := newCrasher()
		r := start(t, supervision.Spec{Name: "app", Intensity: 100, Period: time.Minute, Children: []supervision.ChildSpec{
			{Name: "f", Func: c.fn, Backoff: supervision.Backoff{
				Base: 100 * ms, Cap: time.Second, Jitter: supervision.NoJitter, ResetAfter: 10 * time.Second,
			}},
		}}, supervision.Options{})
		advance(2500*ms - time.Nanosecond)
		assert.Equal(t, []time.Duration{0, 100 * ms, 300 * ms, 700 * ms, 1500 * ms}, c.starts())
		assert.Equal(t, supervision.StateBackoff, r.child("f").State)
		assert.Equal(t, c.t0.Add(2500*ms), r.child("f").NextRestart)
		c.setCrashing(false)
		advance(time.Nanosecond)
		assert.Equal(t, []time.Duration{0, 100 * ms, 300 * ms, 700 * ms, 1500 * ms, 2500 * ms}, c.starts())
		assert.Equal(t, []string{
			"app/f restarts in 100ms (attempt 1)",
			"app/f restarts in 200ms (attempt 2)",
			"app/f restarts in 400ms (attempt 3)",
			"app/f restarts in 800ms (attempt 4)",
			"app/f restarts in 1s (attempt 5)",
		}, backoffEvents(r.takeEvents()))

		// A failure before ResetAfter continues the series...
		advance(9 * time.Second)
		c.fail <- struct{}{}
		synctest.Wait()
		assert.Equal(t, []string{"app/f restarts in 1s (attempt 6)"}, backoffEvents(r.takeEvents()))
		advance(time.Second)
		// ...and one after a stable run of ResetAfter starts it again.
		advance(10 * time.Second)
		c.fail <- struct{}{}
		synctest.Wait()
		assert.Equal(t, []string{"app/f restarts in 100ms (attempt 1)"}, backoffEvents(r.takeEvents()))
		advance(100 * ms)
		assert.Equal(t, uint64(8), r.child("f").Incarnation)
		require.NoError(t, r.stop())
	})
}

// TestBackoffJitterStaysUnderTheCeiling checks that jittered delays are
// drawn below the exponential ceiling.
func TestBackoffJitterStaysUnderTheCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCrasher()
		r := start(t, supervision.Spec{Name: "app", Intensity: 100, Period: time.Minute, Children: []supervision.ChildSpec{
			{Name: "f", Func: c.fn, Backoff: supervision.Backoff{Base: time.Second, Cap: 4 * time.Second, Jitter: supervision.EqualJitter}},
		}}, supervision.Options{})
		advance(30 * time.Second)
		starts := c.starts()
		require.Greater(t, len(starts), 6)
		for i, ceiling := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second} {
			gap := starts[i+1] - starts[i]
			assert.GreaterOrEqual(t, gap, ceiling/2, "restart %d", i+1)
			assert.LessOrEqual(t, gap, ceiling, "restart %d", i+1)
		}
		require.NoError(t, r.stop())
	})
}
