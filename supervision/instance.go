package supervision

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// instance is one running incarnation of a Tree: the actor system it runs
// in, its root supervisor, its event bus, and the children abandoned after
// a shutdown timeout. All supervisors of the tree share it.
type instance struct {
	tree *Tree
	sys  *actor.ActorSystem
	bus  *bus
	root atomic.Pointer[actor.PID]
	done chan struct{} // closed when the root supervisor has stopped

	finishOnce sync.Once

	mu        sync.Mutex
	abandoned []abandonedChild
}

type abandonedChild struct {
	pid      *actor.PID
	u        Unstopped
	resolved bool
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
	})
}

func (i *instance) abandon(pid *actor.PID, u Unstopped) {
	i.mu.Lock()
	i.abandoned = append(i.abandoned, abandonedChild{pid: pid, u: u})
	i.mu.Unlock()
}

func (i *instance) resolve(pid *actor.PID) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for k := range i.abandoned {
		if i.abandoned[k].pid == pid {
			i.abandoned[k].resolved = true
		}
	}
}

// unstopped reports the abandoned children that have not stopped yet.
func (i *instance) unstopped() *UnstoppedError {
	i.mu.Lock()
	defer i.mu.Unlock()
	var out []Unstopped
	for _, a := range i.abandoned {
		if !a.resolved {
			out = append(out, a.u)
		}
	}
	if out == nil {
		return nil
	}
	return &UnstoppedError{Children: out}
}
