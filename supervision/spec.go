package supervision

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Defaults applied to zero fields of a Spec or ChildSpec.
const (
	// DefaultIntensity and DefaultPeriod bound restarts: at most 3 restarts
	// within 5 s, as in Elixir (OTP's own default is 1 in 5 s). One more
	// restart inside the period stops the supervisor and escalates.
	DefaultIntensity = 3
	DefaultPeriod    = 5 * time.Second

	// DefaultShutdown is how long a worker child (Props or Func) is given to
	// stop before it is reported as not stopped and abandoned.
	DefaultShutdown = 5 * time.Second

	// DefaultStartTimeout is how long a worker child is given to process its
	// Started message (a Func child: to be launched) before its start counts
	// as failed.
	DefaultStartTimeout = 5 * time.Second

	// NoRestarts, as a Spec's Intensity, allows no restart at all: the first
	// failure that would restart a child escalates.
	NoRestarts = -1

	// Unlimited, as an Intensity, allows any number of restarts: the
	// supervisor never escalates.
	Unlimited = math.MaxInt
)

// Strategy says which children are restarted when one child must be
// restarted. The zero value is OneForOne.
type Strategy uint8

const (
	// OneForOne restarts only the child that exited.
	OneForOne Strategy = iota
	// OneForAll stops every other child (in reverse start order) and then
	// restarts them all in start order. As in OTP, "all" includes the
	// transient children that have exited normally: they are started again
	// with the group. Temporary children, and children that exited with
	// ErrDoNotRestart, are not.
	OneForAll
	// RestForOne stops the children started after the one that exited (in
	// reverse order) and restarts it and them in start order, with the same
	// rules as OneForAll for children that are not running. Use it when
	// later children depend on earlier ones.
	RestForOne
)

// RestartType says whether a child is restarted after it exits. The zero
// value is Permanent.
type RestartType uint8

const (
	// Permanent children are always restarted, after normal and abnormal
	// exits alike.
	Permanent RestartType = iota
	// Transient children are restarted only after an abnormal exit (a panic
	// or a failure); a normal exit leaves them stopped, still in the spec,
	// until their group is restarted (see OneForAll).
	Transient
	// Temporary children are never restarted, and are removed from the
	// supervisor when they exit. Their exits never count towards intensity.
	Temporary
)

// Jitter says how a backoff delay is randomised below its exponential
// ceiling. The zero value is FullJitter.
type Jitter uint8

const (
	// FullJitter draws the delay uniformly from [0, ceiling].
	FullJitter Jitter = iota
	// EqualJitter draws the delay from [ceiling/2, ceiling].
	EqualJitter
	// NoJitter uses the ceiling itself: deterministic, for tests and reports.
	NoJitter
)

// Backoff is the delay before a child is restarted: exponential from Base
// by Multiplier up to Cap, jittered, and starting again from Base once the
// child has run for ResetAfter without failing. The zero value is 100 ms
// doubling up to 30 s with full jitter, reset after 60 s.
type Backoff struct {
	Base       time.Duration // first ceiling; 0 means 100 ms
	Cap        time.Duration // largest ceiling; 0 means 30 s; never below Base
	Multiplier float64       // growth per consecutive failure; 0 means 2
	Jitter     Jitter
	ResetAfter time.Duration // stable run that resets the series; 0 means 2*Cap

	// Immediate restarts at once, as OTP does; the fields above are ignored.
	Immediate bool
}

// Spec declares a supervision tree: a supervisor, how it restarts its
// children, and the children in start order. A Spec is a value: the tree
// copies it, and the caller may reuse or change it afterwards.
//
// The zero Strategy is OneForOne; zero Intensity and Period mean
// DefaultIntensity restarts in DefaultPeriod.
type Spec struct {
	// Name names the root supervisor: its actor id under Run, and the first
	// element of every path in events and snapshots. Empty means "tree";
	// it must not contain '/' or '#'. The name of a nested Spec is ignored:
	// its ChildSpec.Name is used.
	Name string

	Strategy Strategy

	// Intensity and Period bound restarts: when a restart would make more
	// than Intensity restarts within Period, the supervisor stops all its
	// children and itself and escalates the failure to its parent (under
	// Run, Run returns an *IntensityError). 0 means DefaultIntensity;
	// NoRestarts (or any negative value) allows none.
	Intensity int
	Period    time.Duration // 0 means DefaultPeriod

	// Children are started in this order and stopped in reverse order.
	Children []ChildSpec
}

// Service is a child that runs until its context is done, as a suture v4
// service does: ChildSpec.Service runs it exactly as ChildSpec.Func runs
// Serve. Returning nil is a normal exit; returning an error, or panicking,
// an abnormal one; an error wrapping ErrDoNotRestart ends it for good.
type Service interface {
	Serve(ctx context.Context) error
}

// ChildSpec declares one child of a supervisor. Exactly one of Props, Func,
// Service and Tree says what the child runs.
type ChildSpec struct {
	// Name identifies the child among its siblings; it must be non-empty and
	// must not contain '/' or '#'. The child's actor id is the supervisor's
	// id, '/', and Name, and is kept across restarts, so that a PID held by
	// users keeps working; except while an abandoned incarnation still
	// holds it (see "The message path" in the package documentation).
	Name string

	// Props runs any protoactor-go actor, for example the actors package's
	// LeaseSupervisor. The child exits normally when it stops itself (or is
	// stopped by anyone but its supervisor), and abnormally when it panics
	// or escalates a failure (see Fail). Props are spawned with
	// protoactor-go's default spawner (a custom spawn function in the props
	// is not used); the actor's Parent is a process of its supervisor that
	// receives only what protoactor-go sends to parents (Failure,
	// Terminated). Once per incarnation, after Started, the actor receives
	// a protoactor-go *actor.Touch, answered automatically, which tells the
	// supervisor that it has started.
	Props *actor.Props

	// Func runs a function in a goroutine as the child. Returning nil is a
	// normal exit; returning an error, or panicking, is an abnormal exit;
	// returning an error that wraps ErrDoNotRestart ends the child without
	// a restart. ctx is cancelled, with cause ErrShutdown, when the child is
	// to stop; the function must then return. Until it has returned, the
	// child has not stopped: one that ignores ctx is abandoned after its
	// Shutdown time and reported (see Tree.Unstopped).
	Func func(ctx context.Context) error

	// Service runs Service.Serve as Func runs a function: a child with a
	// Service is a Func child in every respect (its Kind is KindFunc).
	Service Service

	// Tree runs a nested supervisor with its own strategy, intensity and
	// children. When it exceeds its intensity it exits abnormally with an
	// *IntensityError, and this supervisor treats that as a failure.
	Tree *Spec

	// Restart says whether the child is restarted after it exits.
	Restart RestartType

	// Shutdown is how long the child is given to stop, after which it is
	// reported as not stopped (see UnstoppedError) and abandoned. 0 means
	// DefaultShutdown for a worker, and for a Tree the sum of its
	// children's shutdown times plus DefaultShutdown (children added to it
	// at run time are not counted).
	Shutdown time.Duration

	// StartTimeout is how long the child is given to start: for an actor,
	// to process Started; for a Tree, to start all its children. 0 means
	// DefaultStartTimeout for a worker, and for a Tree the sum of its
	// children's start timeouts plus DefaultStartTimeout.
	StartTimeout time.Duration

	// Backoff is the delay before each restart of this child.
	Backoff Backoff
}

// Kind says what a child runs.
type Kind uint8

const (
	// KindActor is a child given by Props.
	KindActor Kind = iota
	// KindFunc is a child given by Func or Service.
	KindFunc
	// KindSupervisor is a nested tree, or the root supervisor itself.
	KindSupervisor
)

var (
	strategyNames = [...]string{"one-for-one", "one-for-all", "rest-for-one"}
	restartNames  = [...]string{"permanent", "transient", "temporary"}
	jitterNames   = [...]string{"full", "equal", "none"}
	kindNames     = [...]string{"actor", "func", "supervisor"}
)

func (s Strategy) String() string    { return enumString(strategyNames[:], int(s), "Strategy") }
func (r RestartType) String() string { return enumString(restartNames[:], int(r), "RestartType") }
func (j Jitter) String() string      { return enumString(jitterNames[:], int(j), "Jitter") }
func (k Kind) String() string        { return enumString(kindNames[:], int(k), "Kind") }

// MarshalText makes a Strategy readable in JSON.
func (s Strategy) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalText makes a RestartType readable in JSON.
func (r RestartType) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// MarshalText makes a Kind readable in JSON.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

func enumString(names []string, i int, typ string) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return typ + "(" + strconv.Itoa(i) + ")"
}

func (c *ChildSpec) kind() Kind {
	switch {
	case c.Tree != nil:
		return KindSupervisor
	case c.Func != nil, c.Service != nil:
		return KindFunc
	default:
		return KindActor
	}
}
