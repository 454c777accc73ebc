package supervision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
)

// DefaultEventBuffer is the number of events a running tree holds for its
// hooks before it drops new ones.
const DefaultEventBuffer = 1024

// Options configure a Tree. The zero value works: a private, quiet actor
// system under Run, no hooks, no logging.
type Options struct {
	// System is the actor system Run spawns the tree in. nil makes Run
	// create a private one (quiet unless Logger is set) and shut it down
	// before returning. Props ignores it: the tree runs wherever its props
	// are spawned.
	System *actor.ActorSystem

	// Logger receives the tree's own records (nil discards them).
	Logger *slog.Logger

	// Hooks receive every event, in order, on one goroutine per running
	// tree. A hook must return promptly; while it runs, later events wait in
	// a buffer of EventBuffer events, and events that do not fit are
	// dropped and counted (Tree.DroppedEvents). A supervisor never waits
	// for a hook. A panicking hook is recovered and logged.
	Hooks []func(Event)

	// EventBuffer bounds the events waiting for hooks; 0 means
	// DefaultEventBuffer.
	EventBuffer int
}

// Tree is a validated supervision tree, ready to run with Run, or to be
// spawned as an actor with Props. While it runs, its methods start, stop,
// restart, list and count children and take snapshots. A Tree runs as one
// instance at a time. Its methods are safe for concurrent use.
type Tree struct {
	spec    Spec // normalised deep copy
	opts    Options
	logger  *slog.Logger
	root    *liveNode
	dropped atomic.Uint64
	running atomic.Bool // a Run is in progress

	mu      sync.Mutex
	inst    *instance     // the running instance, if any
	up      bool          // inst has started all its children
	changed chan struct{} // closed and replaced when inst or up changes

	live      int               // claimed instances that have not finished
	abandoned []*abandonedChild // abandoned incarnations still running, oldest first
	stopped   chan struct{}     // see Stopped; replaced when a start follows a close
}

// New validates spec and returns a tree ready to run. It reports every
// problem found, each wrapping ErrInvalidSpec and naming the child's path:
// duplicate or malformed names (empty, or containing '/' or '#'), children
// with no (or more than one) of Props, Func, Service and Tree, negative
// timeouts or periods, and backoffs whose cap is below their base. New
// copies spec and never changes it.
func New(spec Spec, opts Options) (*Tree, error) {
	if err := validate(&spec); err != nil {
		return nil, err
	}
	t := &Tree{
		spec:    normalise(spec),
		opts:    opts,
		logger:  actorsys.Logger(opts.Logger),
		root:    &liveNode{},
		changed: make(chan struct{}),
		stopped: make(chan struct{}),
	}
	t.opts.Hooks = slices.Clone(opts.Hooks)
	if t.opts.EventBuffer <= 0 {
		t.opts.EventBuffer = DefaultEventBuffer
	}
	t.root.store(specView(&t.spec, t.spec.Name, t.spec.Name))
	return t, nil
}

// Name returns the name of the root supervisor.
func (t *Tree) Name() string { return t.spec.Name }

// Props returns props that run the tree as a protoactor-go actor: the root
// supervisor. Spawn it anywhere, for example as the workload of a
// LeaseSupervisor, or as a child in another tree's ChildSpec.Props.
//
// The actor starts its children in order while it processes Started, and
// stops them in reverse order, each within its shutdown time, while it
// processes Stopping (or Restarting): stopping it never hangs on a blocked
// child. When it exceeds its restart intensity, or a child fails to start,
// it stops its children and escalates to its parent a failure whose reason
// is an *IntensityError or a *StartError. (At the root of an actor system,
// protoactor-go's default strategy then restarts it; use Run to get the
// error instead.) Its children's ids are its own id, '/', and their names.
//
// Users send messages straight to the children's PIDs (see Snapshot): the
// supervisor is never on the message path.
//
// The actor terminates once every child has stopped or has been abandoned
// after its shutdown time; abandoned children may still be running then.
// Whoever spawned it learns which ones from Unstopped, and when the last
// of them has exited from Stopped.
func (t *Tree) Props() *actor.Props {
	return t.props(nil)
}

func (t *Tree) props(inst *instance) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return newSupervisor(&supConfig{
			tree: t,
			spec: &t.spec,
			path: t.spec.Name,
			node: t.root,
			inst: inst,
		})
	})
}

// Run runs the tree until ctx is done, and returns only when everything it
// started has stopped or has been reported as not stopping.
//
// It returns nil after a shutdown requested through ctx; a *StartError if a
// child failed to start (the children already started are stopped first);
// an *IntensityError naming the child and its failure if the root
// supervisor exceeded its restart intensity; and, joined to any of these, an
// *UnstoppedError listing the children that had not stopped within their
// shutdown time when Run returned. A second Run while one is in progress
// returns ErrRunning. Children reported as not stopped may still be
// running after Run has returned: Stopped is closed once they have exited.
func (t *Tree) Run(ctx context.Context) error {
	if !t.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer t.running.Store(false)

	sys := t.opts.System
	if sys == nil {
		private := actorsys.New(t.opts.Logger)
		defer private.Shutdown()
		sys = private.ActorSystem
	}
	inst := newInstance(t, sys)
	parent := newLink(sys, nil, inst)
	defer parent.close()

	pid, err := spawnChild(sys, parent, t.spec.Name, t.props(inst))
	if err != nil {
		inst.finish()
		return fmt.Errorf("supervision: %s: %w", t.spec.Name, err)
	}
	rec := parent.track(pid)
	var result error
	select {
	case <-ctx.Done():
	case <-rec.failed:
		result = rec.failure()
	case <-rec.exited:
	}
	stopUnlessExited(sys, pid, rec)
	<-rec.exited
	parent.forget(pid)
	inst.finish() // a no-op unless the root never started
	if report := inst.unstopped(); report != nil {
		result = errors.Join(result, report)
	}
	return result
}

// ServeBackground runs the tree with Run in a new goroutine and returns
// once the tree runs with all its children started, or once Run has
// returned (it failed to start, ctx was done, or another instance runs).
// The returned channel, buffered, receives Run's result when Run returns:
// after ctx is done, that is when everything it started has stopped or has
// been reported as not stopping. It follows suture v4's
// Supervisor.ServeBackground; the goroutine ends with Run.
func (t *Tree) ServeBackground(ctx context.Context) <-chan error {
	errc := make(chan error, 1)
	returned := make(chan struct{})
	go func() {
		errc <- t.Run(ctx)
		close(returned)
	}()
	for {
		t.mu.Lock()
		up, changed := t.up, t.changed
		t.mu.Unlock()
		if up {
			return errc
		}
		select {
		case <-changed:
		case <-returned:
			return errc
		}
	}
}

// Stopped returns a channel that is closed once nothing the tree started
// still runs: its instance (under Run or as Props) has stopped, and every
// child it abandoned after a shutdown timeout has exited. For a Func or
// Service child that means its function has returned; for an actor child,
// that the actor has terminated; for a nested tree, that its supervisor has
// terminated and that every child it abandoned has exited in turn.
//
// Before the tree first starts, and while it runs, the channel is open. A
// child that never returns keeps it open forever: Unstopped names it, so
// select on the channel beside a timer. Once closed, a channel stays
// closed; when the tree is started again, Stopped returns a new one.
//
// Whoever spawned Props learns, after the root actor has terminated, what
// is still running: Stopped is closed exactly when Unstopped is nil.
func (t *Tree) Stopped() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopped
}

// Unstopped lists the children the tree abandoned after their shutdown
// time that are still running, in the order they were abandoned, at any
// depth and from any instance of the tree; or returns nil if there are
// none. An abandoned child leaves the list when it exits. The supervisors
// that are still stopping are not listed (see Stopped).
func (t *Tree) Unstopped() *UnstoppedError {
	return t.unstopped(nil)
}

// unstopped reports the abandoned children still running: those of inst,
// or all of them if inst is nil.
func (t *Tree) unstopped(inst *instance) *UnstoppedError {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Unstopped
	for _, a := range t.abandoned {
		if inst == nil || a.inst == inst {
			out = append(out, a.u)
		}
	}
	if out == nil {
		return nil
	}
	return &UnstoppedError{Children: out}
}

func (t *Tree) abandon(inst *instance, pid *actor.PID, u Unstopped) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abandoned = append(t.abandoned, &abandonedChild{inst: inst, pid: pid, u: u})
}

func (t *Tree) resolve(pid *actor.PID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abandoned = slices.DeleteFunc(t.abandoned, func(a *abandonedChild) bool { return a.pid == pid })
	t.closeIfStoppedLocked()
}

// finished records that inst has stopped and delivered its events.
func (t *Tree) finished(inst *instance) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if inst.claimed {
		t.live--
		t.closeIfStoppedLocked()
	}
}

func (t *Tree) closeIfStoppedLocked() {
	if t.live == 0 && len(t.abandoned) == 0 && !closed(t.stopped) {
		close(t.stopped)
	}
}

// DroppedEvents returns how many events were dropped because the hooks fell
// behind by more than Options.EventBuffer events.
func (t *Tree) DroppedEvents() uint64 { return t.dropped.Load() }

// PID returns the root supervisor's PID, or nil when the tree is not
// running.
func (t *Tree) PID() *actor.PID {
	if inst := t.current(); inst != nil {
		return inst.rootPID()
	}
	return nil
}

// System returns the actor system the tree runs in, or nil when it is not
// running.
func (t *Tree) System() *actor.ActorSystem {
	if inst := t.current(); inst != nil {
		return inst.sys
	}
	return nil
}

func (t *Tree) current() *instance {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inst
}

// WaitRunning waits until the tree runs, with all its children started, and
// returns nil; or until ctx is done, and returns its cause. Use it after
// starting Run in a goroutine, or spawning Props, before sending to
// children.
func (t *Tree) WaitRunning(ctx context.Context) error {
	for {
		t.mu.Lock()
		up, changed := t.up, t.changed
		t.mu.Unlock()
		if up {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// claim makes inst the running instance; it fails if another one runs.
func (t *Tree) claim(inst *instance) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inst != nil && t.inst != inst {
		return ErrRunning
	}
	t.inst = inst
	if !inst.claimed {
		inst.claimed = true
		t.live++
		if closed(t.stopped) {
			t.stopped = make(chan struct{})
		}
	}
	t.notifyLocked()
	return nil
}

// markUp records that inst has started all its children.
func (t *Tree) markUp(inst *instance) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inst == inst {
		t.up = true
		t.notifyLocked()
	}
}

func (t *Tree) release(inst *instance) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inst == inst {
		t.inst, t.up = nil, false
		t.notifyLocked()
	}
}

func (t *Tree) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}
