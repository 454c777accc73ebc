package supervision

import (
	"runtime/debug"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// A link is the protoactor-go parent of a supervisor's children: a process
// registered in the actor system that receives what children send their
// parent (Failure, Terminated) and the Touched replies that tell that a
// child has processed Started.
//
// Children are spawned with the link as parent but are not in the
// supervisor actor's own child set, so protoactor-go never waits for them
// without a timeout when the supervisor stops; the supervisor stops them
// itself, within their shutdown times.
//
// The link records each incarnation's progress (ready, failed, exited) so
// that a supervisor can wait for it with a timeout while it blocks in a
// start or stop sequence, and forwards failures and exits to the supervisor
// as messages for when it is idle. Incarnations are keyed by their *PID
// pointer, which protoactor-go uses for Failure.Who, Terminated.Who and
// Touched.Who: a message from an old incarnation never matches a new one,
// even under the same id.
type link struct {
	sys   *actor.ActorSystem
	pid   *actor.PID
	owner *actor.PID // supervisor to forward to; nil under Run
	inst  *instance

	mu     sync.Mutex
	recs   map[*actor.PID]*record
	closed bool
}

// record is the progress of one child incarnation.
type record struct {
	ready, failed, exited chan struct{}
	isReady, isFailed     bool
	isExited, abandoned   bool
	reason                error
}

func (r *record) failure() error {
	return r.reason // written before failed is closed
}

// childFailed and childExited are forwarded to the supervisor.
type childFailed struct {
	pid    *actor.PID
	reason error
}

type childExited struct{ pid *actor.PID }

var _ actor.Process = (*link)(nil)

func newLink(sys *actor.ActorSystem, owner *actor.PID, inst *instance) *link {
	l := &link{sys: sys, owner: owner, inst: inst, recs: map[*actor.PID]*record{}}
	id := "$link" + sys.ProcessRegistry.NextId()
	if owner != nil {
		id = owner.Id + "/" + id
	}
	l.pid, _ = sys.ProcessRegistry.Add(l, id) // ids from NextId are unique
	return l
}

// parentContext makes a link the parent of actors spawned with
// actor.DefaultSpawner, which asks its parent context for nothing but Self.
type parentContext struct {
	actor.SpawnerContext
	self *actor.PID
}

func (p parentContext) Self() *actor.PID { return p.self }

// spawnChild spawns props under id with l as parent, and asks the new actor
// to reply to l once it has processed Started.
func spawnChild(sys *actor.ActorSystem, l *link, id string, props *actor.Props) (*actor.PID, error) {
	pid, err := actor.DefaultSpawner(sys, id, props, parentContext{sys.Root, l.pid})
	if err != nil {
		return nil, err
	}
	l.track(pid)
	sys.Root.RequestWithCustomSender(pid, &actor.Touch{}, l.pid)
	return pid, nil
}

// stopUnlessExited stops pid, unless it has already exited: a Stop sent to
// an actor that is gone is a dead letter, which protoactor-go logs.
func stopUnlessExited(sys *actor.ActorSystem, pid *actor.PID, rec *record) {
	select {
	case <-rec.exited:
	default:
		sys.Root.Stop(pid)
	}
}

// track returns the record of pid, creating it if needed.
func (l *link) track(pid *actor.PID) *record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recLocked(pid)
}

func (l *link) recLocked(pid *actor.PID) *record {
	r := l.recs[pid]
	if r == nil {
		r = &record{ready: make(chan struct{}), failed: make(chan struct{}), exited: make(chan struct{})}
		l.recs[pid] = r
	}
	return r
}

// forget drops the record of an incarnation the supervisor is done with.
func (l *link) forget(pid *actor.PID) {
	l.mu.Lock()
	delete(l.recs, pid)
	l.mu.Unlock()
}

// abandon marks an incarnation that did not stop in time. Its record is
// kept until it exits, and the link stays registered until then.
// It is reported to the instance under the link's lock, as its exit is:
// otherwise an exit racing with the abandonment could be reported first,
// and the incarnation would be listed as running forever.
func (l *link) abandon(pid *actor.PID, u Unstopped) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recLocked(pid)
	if r.isExited {
		delete(l.recs, pid)
		return
	}
	r.abandoned = true
	if l.inst != nil {
		l.inst.abandon(pid, u)
	}
}

// close unregisters the link once no abandoned child can still report to it.
func (l *link) close() {
	l.mu.Lock()
	l.closed = true
	pending := false
	for pid, r := range l.recs {
		if r.abandoned {
			pending = true
		} else {
			delete(l.recs, pid)
		}
	}
	l.mu.Unlock()
	if !pending {
		l.sys.ProcessRegistry.Remove(l.pid)
	}
}

// SendUserMessage receives the Touched replies of children.
func (l *link) SendUserMessage(_ *actor.PID, message any) {
	t, ok := actor.UnwrapEnvelopeMessage(message).(*actor.Touched)
	if !ok || t.Who == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// It may be ready before spawnChild tracks it. A Touched is always
	// sent before the Terminated of the same incarnation, so this never
	// recreates a forgotten record.
	if r := l.recLocked(t.Who); !r.isReady {
		r.isReady = true
		close(r.ready)
	}
}

// SendSystemMessage receives Failure and Terminated from children. A
// Failure arrives on the failing child's goroutine, inside the recover of a
// panic, so debug.Stack still shows where the panic happened.
func (l *link) SendSystemMessage(_ *actor.PID, message any) {
	switch m := message.(type) {
	case *actor.Failure:
		if m.Who == nil {
			return
		}
		reason := reasonOf(m.Reason, debug.Stack)
		l.mu.Lock()
		defer l.mu.Unlock()
		r := l.recLocked(m.Who)
		if r.isFailed {
			return
		}
		r.isFailed = true
		r.reason = reason
		close(r.failed)
		if !r.abandoned {
			l.forwardLocked(childFailed{m.Who, reason})
		}
	case *actor.Terminated:
		if m.Who == nil {
			return
		}
		l.mu.Lock()
		r := l.recLocked(m.Who) // it may exit before spawnChild tracks it
		if r.isExited {
			l.mu.Unlock()
			return
		}
		r.isExited = true
		close(r.exited)
		abandoned := r.abandoned
		if abandoned {
			delete(l.recs, m.Who)
			if l.inst != nil {
				l.inst.resolve(m.Who)
			}
		} else {
			l.forwardLocked(childExited{m.Who})
		}
		unregister := abandoned && l.closed && !l.anyAbandonedLocked()
		l.mu.Unlock()
		if unregister {
			l.sys.ProcessRegistry.Remove(l.pid)
		}
	}
}

// forwardLocked sends msg to the supervisor unless the link is closed. It
// is called with l.mu held, so that once close has returned (the supervisor
// is stopping) nothing more is sent to it: a message sent to an actor that
// is gone is a dead letter.
func (l *link) forwardLocked(msg any) {
	if l.owner != nil && !l.closed {
		l.sys.Root.Send(l.owner, msg)
	}
}

func (l *link) anyAbandonedLocked() bool {
	for _, r := range l.recs {
		if r.abandoned {
			return true
		}
	}
	return false
}

// Stop is a no-op: a link lives as long as its supervisor.
func (l *link) Stop(*actor.PID) {}
