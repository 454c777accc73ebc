package supervision

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/actorsys"
)

// TestStaleRestartDueIsIgnored delivers restartDue messages with old epochs,
// as a timer that fired just before it was cancelled would, and checks that
// they restart nothing, while the current one does.
func TestStaleRestartDueIsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var starts atomic.Int32
		props := actor.PropsFromFunc(func(c actor.Context) {
			switch c.Message().(type) {
			case *actor.Started:
				starts.Add(1)
			case string:
				panic("fail")
			}
		})
		sys := actorsys.New(nil)
		tree, err := New(Spec{Name: "app", Children: []ChildSpec{
			{Name: "a", Props: props, Backoff: Backoff{Base: time.Second, Jitter: NoJitter}},
		}}, Options{})
		require.NoError(t, err)
		parent := newLink(sys.ActorSystem, nil, nil)
		pid, err := spawnChild(sys.ActorSystem, parent, "app", tree.Props())
		require.NoError(t, err)
		synctest.Wait()
		assert.Equal(t, int32(1), starts.Load())

		child := tree.Snapshot().Children[0].PID
		sys.Root.Send(child, "fail")
		synctest.Wait()
		assert.Equal(t, StateBackoff, tree.Snapshot().Children[0].State)
		// Epoch 0 is from before the failure: stale. Epoch 1 is the armed
		// timer's, delivered too early: only due restarts happen.
		for epoch := range uint64(2) {
			sys.Root.Send(pid, restartDue{epoch})
		}
		synctest.Wait()
		assert.Equal(t, int32(1), starts.Load(), "stale timer messages restart nothing")
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, int32(2), starts.Load(), "the current timer restarts the child")
		sys.Root.Send(pid, restartDue{1})
		synctest.Wait()
		assert.Equal(t, int32(2), starts.Load(), "a timer message after its restart is stale")

		rec := parent.track(pid)
		sys.Root.Stop(pid)
		<-rec.exited
		parent.close()
		sys.Shutdown()
		synctest.Wait()
	})
}
