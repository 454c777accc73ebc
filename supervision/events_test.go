package supervision_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/supervision"
)

// TestTypedEvents checks the fields of the events of a restart.
func TestTypedEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []supervision.Event
		hook := func(e supervision.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}
		r := start(t, supervision.Spec{Name: "app", Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", nil), Backoff: immediate},
		}}, supervision.Options{Hooks: []func(supervision.Event){hook}})
		r.send("a", boom{})
		require.NoError(t, r.stop())

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, events, 5)
		started := events[0].(supervision.ChildStarted)
		assert.Equal(t, "app", started.Supervisor)
		assert.Equal(t, "a", started.Child)
		assert.Equal(t, uint64(1), started.Incarnation)
		assert.Equal(t, "app/a", started.PID.Id)
		exited := events[1].(supervision.ChildExited)
		assert.False(t, exited.Normal)
		var pe *supervision.PanicError
		assert.True(t, errors.As(exited.Reason, &pe))
		backoff := events[2].(supervision.BackoffScheduled)
		assert.Equal(t, 1, backoff.Attempt)
		restarted := events[3].(supervision.ChildRestarted)
		assert.Equal(t, uint64(2), restarted.Incarnation)
		assert.Equal(t, 1, restarted.Restarts)
		assert.Equal(t, exited.Reason, restarted.Reason)
		stopped := events[4].(supervision.ChildStopped)
		assert.Equal(t, uint64(2), stopped.Incarnation)
		assert.Equal(t, "app/a stopped (incarnation 2)", stopped.String())
	})
}

// TestSlowHooksNeverBlockSupervisors blocks the only hook and checks that
// the tree keeps supervising, and that events beyond the buffer are
// dropped and counted.
func TestSlowHooksNeverBlockSupervisors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		var delivered []string
		hook := func(e supervision.Event) {
			<-release
			mu.Lock()
			delivered = append(delivered, e.String())
			mu.Unlock()
		}
		r := start(t, supervision.Spec{Name: "app", Intensity: 1000, Children: []supervision.ChildSpec{
			{Name: "a", Props: worker("a", nil), Backoff: immediate},
		}}, supervision.Options{Hooks: []func(supervision.Event){hook}, EventBuffer: 4})
		for range 10 {
			r.send("a", boom{})
		}
		assert.Equal(t, uint64(11), r.child("a").Incarnation, "restarts went on while the hook was blocked")
		// 1 started + 10 * (exited, backoff, restarted) = 31 events: 1 in
		// the hook, 4 in the buffer, 26 dropped.
		assert.Equal(t, uint64(26), r.tree.DroppedEvents())
		assert.Equal(t, uint64(26), r.tree.Snapshot().DroppedEvents)
		close(release)
		synctest.Wait() // the hook has caught up
		require.NoError(t, r.stop())
		mu.Lock()
		defer mu.Unlock()
		assert.Len(t, delivered, 5+1, "the first five, then the last stop")
		assert.Equal(t, "app/a started (incarnation 1)", delivered[0])
		assert.Equal(t, "app/a stopped (incarnation 11)", delivered[5])
	})
}

// TestPanickingHookIsRecovered checks that a hook's panic neither crashes
// nor stops the delivery.
func TestPanickingHookIsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		n := 0
		r := start(t, supervision.Spec{Children: []supervision.ChildSpec{{Name: "a", Props: worker("a", nil)}}},
			supervision.Options{Hooks: []func(supervision.Event){
				func(supervision.Event) { panic("bad hook") },
				func(supervision.Event) { mu.Lock(); n++; mu.Unlock() },
			}})
		require.NoError(t, r.stop())
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, 2, n)
	})
}
