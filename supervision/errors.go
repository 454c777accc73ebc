package supervision

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Errors of this package. Check them with errors.Is; the errors returned
// wrap them with detail.
var (
	// ErrInvalidSpec reports a Spec or ChildSpec that cannot run. New and
	// Tree.StartChild return it, joined for every problem found, each
	// naming the child's path.
	ErrInvalidSpec = errors.New("supervision: invalid spec")

	// ErrStart reports that a child failed to start (see StartError).
	ErrStart = errors.New("supervision: start failed")

	// ErrIntensity reports that a supervisor exceeded its restart intensity
	// (see IntensityError).
	ErrIntensity = errors.New("supervision: restart intensity exceeded")

	// ErrUnstopped reports children that did not stop within their shutdown
	// time (see UnstoppedError).
	ErrUnstopped = errors.New("supervision: children did not stop in time")

	// ErrShutdown is the cause with which a Func child's context is
	// cancelled when the child is stopped.
	ErrShutdown = errors.New("supervision: shutdown")

	// ErrDoNotRestart, as the reason a started child exits with (returned
	// by a Func or Service, or passed to Fail by an actor, wrapped or not),
	// ends the child without a restart, whatever its RestartType, and
	// without counting towards the intensity. The child stays in its
	// supervisor, stopped, with the reason as its last failure (a Temporary
	// one is removed, as after any exit), and is not started again with its
	// group under OneForAll or RestForOne; Tree.RestartChild starts it. It
	// is suture's ErrDoNotRestart, and what OTP does for a transient child
	// that exits with reason shutdown, extended to every restart type and
	// to group restarts. A child that fails to start with it has failed to
	// start.
	ErrDoNotRestart = errors.New("supervision: do not restart")

	// ErrRunning reports a second Run of a Tree, or a second instance of its
	// Props, while one is running.
	ErrRunning = errors.New("supervision: tree already running")

	// ErrNotRunning reports a call that needs a running tree.
	ErrNotRunning = errors.New("supervision: tree not running")

	// ErrUnknownChild reports a child path that names no child.
	ErrUnknownChild = errors.New("supervision: no such child")

	// ErrRestartRequested is the reason given in the ChildRestarted event
	// of a restart asked for with Tree.RestartChild.
	ErrRestartRequested = errors.New("supervision: restart requested")

	// ErrChildExists reports a dynamic start under a name already in use.
	ErrChildExists = errors.New("supervision: child already exists")
)

// SpecError is a problem found by validation. It matches ErrInvalidSpec
// with errors.Is.
type SpecError struct {
	Path   string // the path of the supervisor or child at fault
	Reason string
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("supervision: invalid spec: %s: %s", e.Path, e.Reason)
}

// Is reports whether target is ErrInvalidSpec.
func (e *SpecError) Is(target error) bool { return target == ErrInvalidSpec }

// PanicError is the reason of an abnormal exit caused by a panic (or by a
// failure escalated through protoactor-go, which a supervisor cannot tell
// from a panic). It carries the panic value and the stack of the goroutine
// at the point of failure.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // as formatted by runtime/debug.Stack
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// StartError reports a child that failed to start: its spawn failed, it
// failed while processing Started, or it did not start in time.
type StartError struct {
	Path   string // the child's path, such as "app/workers/w1"
	Reason error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("supervision: %s: start failed: %v", e.Path, e.Reason)
}

// Unwrap returns ErrStart and the reason.
func (e *StartError) Unwrap() []error { return []error{ErrStart, e.Reason} }

// IntensityError reports that a supervisor exceeded its restart intensity.
// The supervisor has stopped all its children; the error names the child
// whose exit would have needed one restart too many, and why it exited.
type IntensityError struct {
	Supervisor string // path of the supervisor, such as "app/workers"
	Child      string // name of the child that exited
	Reason     error  // why it exited (nil for a normal exit)
	Intensity  int
	Period     time.Duration
}

func (e *IntensityError) Error() string {
	reason := "normal exit"
	if e.Reason != nil {
		reason = e.Reason.Error()
	}
	return fmt.Sprintf("supervision: %s: more than %d restarts in %v: child %q: %s",
		e.Supervisor, max(e.Intensity, 0), e.Period, e.Child, reason)
}

// Unwrap returns ErrIntensity and the reason.
func (e *IntensityError) Unwrap() []error {
	if e.Reason == nil {
		return []error{ErrIntensity}
	}
	return []error{ErrIntensity, e.Reason}
}

// Unstopped is a child that was asked to stop and had not stopped when its
// shutdown time ran out. It was abandoned: its goroutine may still be
// running.
type Unstopped struct {
	Path    string        // the child's path, such as "app/workers/w1"
	PID     *actor.PID    // the abandoned incarnation
	Timeout time.Duration // the shutdown time it was given
}

// UnstoppedError lists children that were abandoned after their shutdown
// time and were still running when the error was made, in the order they
// were abandoned: those of Run's instance when Run returned, those of the
// whole tree in Tree.Unstopped, the child stopped in Tree.StopChild.
type UnstoppedError struct {
	Children []Unstopped
}

func (e *UnstoppedError) Error() string {
	var b strings.Builder
	b.WriteString("supervision: children did not stop in time:")
	for i, c := range e.Children {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s (after %v)", c.Path, c.Timeout)
	}
	return b.String()
}

// Is reports whether target is ErrUnstopped.
func (e *UnstoppedError) Is(target error) bool { return target == ErrUnstopped }

// exitError is the reason escalated by Fail and by a Func child that returns
// an error: an abnormal exit that is not a panic, so it carries no stack.
type exitError struct{ err error }

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// escalator is the part of protoactor-go's actor context that escalates a
// failure to the parent. The context handed to Receive implements it unless
// the props install context decorators.
type escalator interface {
	EscalateFailure(reason any, message any)
}

// Fail ends the calling actor's current incarnation abnormally, with err as
// the reason its supervisor sees (no PanicError, no stack). Call it from the
// actor's Receive and return; the actor processes no further user messages.
// A nil err is reported as a failure too. It is how a Props child, such as a
// LeaseSupervisor, reports a failure without panicking.
func Fail(ctx actor.Context, err error) {
	if err == nil {
		err = errors.New("supervision: Fail(nil)")
	}
	escalate(ctx, &exitError{err})
}

// reasonOf turns what protoactor-go escalated into the reason a supervisor
// reports. It is called on the failing goroutine, inside the mailbox's
// recover when the failure is a panic, so the stack still shows the panic.
func reasonOf(r any, stack func() []byte) error {
	switch r := r.(type) {
	case *PanicError:
		return r
	case *exitError:
		return r.err
	case *IntensityError:
		return r
	case *StartError:
		return r
	default:
		return &PanicError{Value: r, Stack: stack()}
	}
}
