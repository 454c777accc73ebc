package supervision

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// instance is one running incarnation of a Tree: the actor system it runs
// in, its root supervisor and its event bus. All supervisors of the tree
// share it. The children it abandons are kept by the Tree, which outlives
// it (see Tree.Unstopped).
type instance struct {
	tree *Tree
	sys  *actor.ActorSystem
	bus  *bus
	root atomic.Pointer[actor.PID]
	done chan struct{} // closed when the root supervisor has stopped

	finishOnce sync.Once
	claimed    bool // it became the tree's running instance; guarded by tree.mu
}

// abandonedChild is an incarnation abandoned after its shutdown time that
// has not exited yet.
type abandonedChild struct {
	inst *instance
	pid  *actor.PID
	u    Unstopped
}

func newInstance(t *Tree, sys *actor.ActorSystem) *instance {
	return &instance{
		tree: t,
		sys:  sys,
		bus:  newBus(t.opts.Hooks, t.opts.EventBuffer, t.logger, &t.dropped),
		done: make(chan struct{}),
	}
}

func (i *instance) rootPID() *actor.PID { return i.root.Load() }

// publish hands e to the hooks and logs the events that need attention.
func (i *instance) publish(e Event) {
	i.bus.publish(e)
	level := slog.LevelDebug
	switch e := e.(type) {
	case ChildExited:
		if !e.Normal {
			level = slog.LevelInfo
		}
	case StopTimedOut, IntensityExceeded, Escalated:
		level = slog.LevelWarn
	}
	if l := i.tree.logger; l.Enabled(context.Background(), level) {
		l.Log(context.Background(), level, "supervision: "+e.String())
	}
}

// finish marks the instance stopped and delivers its last events. It is
// called by the root supervisor when it stops, and by Run; the first call
// does the work.
func (i *instance) finish() {
	i.finishOnce.Do(func() {
		i.tree.release(i)
		close(i.done)
		i.bus.close()
		i.tree.finished(i)
	})
}

// abandon records an incarnation that did not stop in time; resolve
// records that it has exited. Links call both with their lock held, so
// that an exit is never recorded before the abandonment it resolves.
func (i *instance) abandon(pid *actor.PID, u Unstopped) { i.tree.abandon(i, pid, u) }

func (i *instance) resolve(pid *actor.PID) { i.tree.resolve(pid) }

// unstopped reports the children this instance abandoned that have not
// stopped yet.
func (i *instance) unstopped() *UnstoppedError { return i.tree.unstopped(i) }
