package actorsys

import (
	"bytes"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestQuietByDefaultAndShutdownTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := New(nil)
		got := make(chan string, 1)
		pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if s, ok := c.Message().(string); ok {
				got <- s
			}
		}))
		sys.Root.Send(pid, "hello")
		assert.Equal(t, "hello", <-got)
		require.NoError(t, sys.Root.StopFuture(pid).Wait())
		sys.Shutdown()
		sys.Shutdown()
		assert.True(t, sys.IsStopped())
	})
}

func TestLogsOnlyWarnings(t *testing.T) {
	var buf bytes.Buffer
	sys := New(slog.New(slog.NewTextHandler(&buf, nil)))
	defer sys.Shutdown()
	sys.Logger().Info("chatter")
	sys.Logger().Warn("trouble")
	time.Sleep(0)
	assert.NotContains(t, buf.String(), "chatter")
	assert.Contains(t, buf.String(), "trouble")
	assert.NotContains(t, buf.String(), "actor system started")
}

type stubborn struct{ release chan struct{} }

func (s stubborn) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Stopping); ok {
		<-s.release // stops only once released
	}
}

// StopAndWait reports an actor that stopped, and one that did not stop
// within the timeout; a PID already dead counts as stopped.
func TestStopAndWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := New(nil)
		defer sys.Shutdown()
		pid := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		assert.True(t, StopAndWait(sys.ActorSystem, pid, time.Second))
		assert.True(t, StopAndWait(sys.ActorSystem, pid, time.Second), "already dead")

		s := stubborn{release: make(chan struct{})}
		slow := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return s }))
		assert.False(t, StopAndWait(sys.ActorSystem, slow, time.Second))
		close(s.release)
		synctest.Wait()
		assert.True(t, StopAndWait(sys.ActorSystem, slow, time.Second))
		time.Sleep(2 * time.Second) // protoactor's dead-letter throttle, in virtual time
	})
}
