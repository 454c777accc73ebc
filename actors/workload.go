package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/supervision"
)

// Workload is what a LeaseSupervisor runs while it holds its lease: a
// function (WorkloadFunc), actor Props (WorkloadProps), or a supervision
// subtree turned into Props. The set is sealed.
//
// A workload is expected to run until its context is cancelled. If it
// returns (or its actor stops) while the lease is held, the term ends as a
// restart: the lease is released so that another instance may take over,
// and the RestartPolicy applies.
type Workload interface {
	validate() error
	// start spawns the workload as a child of c for the term described by
	// g. sup receives a workloadExited message when the workload returns.
	start(c actor.Context, term uint64, g Granted) workloadInstance
}

// workloadInstance is one running workload.
type workloadInstance interface {
	// pid is the workload's actor, a child of the supervisor.
	pid() *actor.PID
	// stop stops the workload, whose context has been cancelled, waiting
	// at most timeout, and reports whether it stopped in time. Its actor is
	// stopped in any case, except that a function workload's actor is left
	// to protoactor when the supervisor itself is stopping (leave is true):
	// protoactor stops every child right after the Stopping message, and a
	// second Stop would go to dead letters.
	stop(c actor.Context, timeout time.Duration, leave bool) bool
}

// workloadExited tells the supervisor that a function workload returned.
type workloadExited struct {
	term uint64
	err  error
}

// WorkloadFunc runs fn while the lease is held, on a goroutine of its own
// owned by a small Workload actor. ctx is cancelled with cause
// lease.ErrLost (a *LostError) when the lease is poisoned, and with
// ErrShutdown on a graceful shutdown; token is the lease's fencing token.
// Before each fenced write, read the token again with TokenFrom(ctx): it
// also fails once the lease's validity has passed on the clock.
// A panic in fn is recovered and treated as an error return.
func WorkloadFunc(fn func(ctx context.Context, token lease.Token) error) Workload {
	return funcWorkload{fn: fn}
}

type funcWorkload struct {
	fn func(ctx context.Context, token lease.Token) error
}

func (w funcWorkload) validate() error {
	if w.fn == nil {
		return &lease.FieldError{Field: "Workload", Reason: "WorkloadFunc(nil)"}
	}
	return nil
}

func (w funcWorkload) start(c actor.Context, term uint64, g Granted) workloadInstance {
	inst := &funcInstance{done: make(chan struct{})}
	sup, fn, done := c.Self(), w.fn, inst.done
	launched := false // only touched on the adapter's goroutine
	inst.actor = c.Spawn(actor.PropsFromFunc(func(ac actor.Context) {
		if _, ok := ac.Message().(*actor.Started); !ok || launched {
			return
		}
		launched = true
		root := ac.ActorSystem().Root
		go func() {
			err := callWorkload(fn, withHold(g.Context, g.Hold), g.Token)
			close(done)
			root.Send(sup, workloadExited{term: term, err: err})
		}()
	}))
	return inst
}

// funcInstance is a running function workload.
type funcInstance struct {
	actor *actor.PID
	done  chan struct{} // closed when fn has returned
}

func (f *funcInstance) pid() *actor.PID { return f.actor }

func (f *funcInstance) stop(c actor.Context, timeout time.Duration, leave bool) bool {
	stopped := isClosed(f.done)
	if !stopped && timeout > 0 {
		t := time.NewTimer(timeout)
		select {
		case <-f.done:
			stopped = true
		case <-t.C:
		}
		t.Stop()
	}
	if !leave {
		c.Stop(f.actor) // the adapter never blocks: it stops at once
	}
	return stopped
}

// callWorkload runs fn, turning a panic into an error.
func callWorkload(fn func(context.Context, lease.Token) error, ctx context.Context, token lease.Token) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("actors: workload panicked: %v", r)
		}
	}()
	return fn(ctx, token)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// WorkloadProps runs the actor made by props as the supervisor's child
// while the lease is held. Right after its Started message it receives a
// Granted message with the token, the term's context and the Hold. On
// poison or shutdown the context is cancelled first, then the actor is
// stopped (Stop), with a bounded wait; an actor that fails (panics) is
// stopped, which ends the term.
func WorkloadProps(props *actor.Props) Workload { return propsWorkload{props: props} }

type propsWorkload struct{ props *actor.Props }

func (w propsWorkload) validate() error {
	if w.props == nil {
		return &lease.FieldError{Field: "Workload", Reason: "WorkloadProps(nil)"}
	}
	return nil
}

func (w propsWorkload) start(c actor.Context, _ uint64, g Granted) workloadInstance {
	pid := c.Spawn(w.props)
	c.Send(pid, g)
	return propsInstance{actor: pid}
}

type propsInstance struct{ actor *actor.PID }

func (p propsInstance) pid() *actor.PID { return p.actor }

func (p propsInstance) stop(c actor.Context, timeout time.Duration, _ bool) bool {
	return stopAndWait(c.ActorSystem(), c.Stop, p.actor, timeout)
}

// stopAndWait stops pid with stop and waits at most timeout for it to
// terminate, reporting whether it did. Unlike StopFuture (always 10 s) it
// takes the timeout as an argument.
func stopAndWait(sys *actor.ActorSystem, stop func(*actor.PID), pid *actor.PID, timeout time.Duration) bool {
	f := actor.NewFuture(sys, max(timeout, time.Millisecond))
	proc, _ := sys.ProcessRegistry.Get(pid) // a dead PID gives dead letters, which answer Terminated
	proc.SendSystemMessage(pid, &actor.Watch{Watcher: f.PID()})
	stop(pid)
	return f.Wait() == nil
}

// WorkloadTree runs a supervision tree as the workload. build is called at
// the start of every term with the term's grant, so that the tree's
// children can capture it: g.Context ends with the lease's cause, and
// g.Hold.Token gives the token before each fenced write (it fails as soon
// as the lease is lost). The tree's root supervisor is the Workload child.
// On poison or shutdown it is stopped with a bounded wait (its own stop is
// bounded by its children's Shutdown times); when it escalates (its
// intensity exceeded) the term ends like a workload exit. An error from
// build ends the term the same way.
func WorkloadTree(build func(g Granted) (*supervision.Tree, error)) Workload {
	return treeWorkload{build: build}
}

type treeWorkload struct {
	build func(Granted) (*supervision.Tree, error)
}

func (w treeWorkload) validate() error {
	if w.build == nil {
		return &lease.FieldError{Field: "Workload", Reason: "WorkloadTree(nil)"}
	}
	return nil
}

func (w treeWorkload) start(c actor.Context, term uint64, g Granted) workloadInstance {
	tree, err := w.build(g)
	if err == nil && tree == nil {
		err = fmt.Errorf("%w: WorkloadTree: build returned no tree", lease.ErrInvalid)
	}
	if err != nil {
		err = fmt.Errorf("actors: building the workload tree: %w", err)
		return funcWorkload{fn: func(context.Context, lease.Token) error { return err }}.start(c, term, g)
	}
	return propsInstance{actor: c.Spawn(tree.Props())}
}
