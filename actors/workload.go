package actors

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/supervision"
)

// Workload is what a LeaseSupervisor runs while it holds its lease: a
// function (WorkloadFunc), actor Props (WorkloadProps), or a supervision
// subtree (WorkloadTree). The set is sealed.
//
// A workload runs until its context is cancelled. One that ends by itself
// ends its term: returning nil, or an actor stopping itself, steps down (no
// failure); an error, a panic or a failed actor is a failure, which the
// RestartPolicy counts; any return after the lease was lost is a loss.
type Workload interface {
	validate() error
	// start runs the workload of term seq, described by g, under the
	// supervisor c. stopped is called once, from any goroutine, when every
	// part of the workload has stopped; the supervisor receives a
	// workloadExited message when a function workload returns.
	start(c actor.Context, seq uint64, g Granted, stopped func()) workloadInstance
}

// workloadInstance is one running workload.
type workloadInstance struct {
	// pid is the workload's actor, a child of the supervisor: the function
	// workload's adapter, the Props actor, or the tree's root.
	pid *actor.PID
	// done is closed when every part of the workload has stopped: the
	// function returned, the actor terminated, the tree's root terminated
	// and every child it abandoned exited. It is closed after start's
	// stopped callback has run, so that whoever saw it closed finds the
	// term gone from the live set.
	done chan struct{}
	tree *supervision.Tree // a WorkloadTree's tree, nil otherwise
}

// workloadExited tells the supervisor that a function workload returned.
type workloadExited struct {
	term uint64
	err  error
}

// WorkloadFunc runs fn while the lease is held, on a goroutine of its own
// owned by a small Workload actor. ctx is cancelled with cause
// lease.ErrLost (a *lease.LostError) when the lease is poisoned, and with
// supervision.ErrShutdown on a graceful shutdown; token is the lease's
// fencing token. Before each fenced write, read the token again with
// TokenFrom(ctx): it also fails once the lease's validity has passed on the
// clock. Return nil to step down, an error to fail (see Workload). A panic
// in fn is recovered and treated as a failure, a *supervision.PanicError
// that keeps the stack.
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

func (w funcWorkload) start(c actor.Context, seq uint64, g Granted, stopped func()) workloadInstance {
	inst := workloadInstance{done: make(chan struct{})}
	sup, fn, done := c.Self(), w.fn, inst.done
	launched := false // only touched on the adapter's goroutine
	inst.pid = c.Spawn(actor.PropsFromFunc(func(ac actor.Context) {
		if _, ok := ac.Message().(*actor.Started); !ok || launched {
			return
		}
		launched = true
		root := ac.ActorSystem().Root
		go func() {
			err := callWorkload(fn, withTerm(g.Context, g.Term), g.Token)
			stopped() // before done: a shutdown that saw done finds it gone from the live set
			close(done)
			root.Send(sup, workloadExited{term: seq, err: err})
		}()
	}))
	return inst
}

// callWorkload runs fn, turning a panic into a *supervision.PanicError.
func callWorkload(fn func(context.Context, lease.Token) error, ctx context.Context, token lease.Token) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("actors: workload panicked: %w", &supervision.PanicError{Value: r, Stack: debug.Stack()})
		}
	}()
	return fn(ctx, token)
}

// WorkloadProps runs the actor made by props as the supervisor's child
// while the lease is held. Right after its Started message it receives a
// Granted message with the token, the term's context and the Hold. On
// poison or shutdown the context is cancelled first, then the actor is
// stopped (Stop), with a bounded wait; an actor that fails (panics) is
// stopped, which ends the term as a failure. An actor that stops itself
// steps down.
func WorkloadProps(props *actor.Props) Workload { return propsWorkload{props: props} }

type propsWorkload struct{ props *actor.Props }

func (w propsWorkload) validate() error {
	if w.props == nil {
		return &lease.FieldError{Field: "Workload", Reason: "WorkloadProps(nil)"}
	}
	return nil
}

func (w propsWorkload) start(c actor.Context, _ uint64, g Granted, stopped func()) workloadInstance {
	inst := workloadInstance{pid: c.Spawn(w.props), done: make(chan struct{})}
	c.Send(inst.pid, g)
	done := inst.done
	watchDeath(c.ActorSystem(), inst.pid, func() { stopped(); close(done) })
	return inst
}

// WorkloadTree runs a supervision tree as the workload, its root the
// Workload child. build is called at the start of every term with its
// Granted, for the children to capture (g.Term.Token before each fenced
// write). The tree is stopped with a bounded wait; an escalation (its
// intensity exceeded) or an error from build fails the term. The term ends
// only when every part of the tree has stopped, including a child it
// abandoned after its Shutdown time.
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

func (w treeWorkload) start(c actor.Context, seq uint64, g Granted, stopped func()) workloadInstance {
	tree, err := w.build(g)
	if err == nil && tree == nil {
		err = fmt.Errorf("%w: WorkloadTree: build returned no tree", lease.ErrInvalid)
	}
	if err != nil {
		err = fmt.Errorf("actors: building the workload tree: %w", err)
		return funcWorkload{fn: func(context.Context, lease.Token) error { return err }}.start(c, seq, g, stopped)
	}
	inst := workloadInstance{pid: c.Spawn(tree.Props()), done: make(chan struct{}), tree: tree}
	done := inst.done
	// The root's termination is not enough: a child the tree abandoned
	// after its Shutdown time may still run. The workload has stopped once
	// the tree says every child it abandoned has exited too.
	watchDeath(c.ActorSystem(), inst.pid, func() {
		go func() {
			<-tree.Stopped()
			stopped()
			close(done)
		}()
	})
	return inst
}
