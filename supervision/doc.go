// Package supervision runs declarative supervision trees of protoactor-go
// actors and goroutines, with the semantics of Erlang/OTP supervisors.
//
// # Model
//
// A Spec declares a supervisor: a Strategy, a restart intensity, and its
// children in start order. Each ChildSpec runs one of three things:
//
//   - Props: any protoactor-go actor, such as the actors package's
//     LeaseSupervisor;
//   - Func: a func(ctx) error run in a goroutine, for plain Go workers, or
//     Service: a value with suture's Serve(ctx) error method, run the same
//     way;
//   - Tree: a nested Spec, supervised like any other child.
//
// New validates a Spec (duplicate names, missing producers, negative
// timeouts, a backoff cap below its base...) and returns a Tree. Run the
// Tree with Run, which blocks until ctx is done and everything it started
// has stopped; or with ServeBackground, which returns once the tree runs
// and reports Run's result on a channel (as suture v4's does); or spawn
// Tree.Props wherever an actor is expected, for example as the workload of
// a LeaseSupervisor. Zero values are safe: the
// zero Strategy is OneForOne, the zero RestartType is Permanent, and zero
// durations and intensities take the documented defaults.
//
// # Exits
//
// A child's incarnation ends in one of two ways, and its RestartType
// decides what happens next:
//
//   - A normal exit: an actor stops itself (or is stopped by anyone but its
//     supervisor); a Func (or Service) returns nil.
//   - An abnormal exit: an actor panics, or escalates a failure to its
//     parent (with Fail, or protoactor-go's EscalateFailure); a Func returns
//     an error or panics; a nested tree exceeds its intensity or fails to
//     start. A panic becomes a *PanicError carrying the panic value and the
//     stack; Fail and Func errors keep their error; a nested tree's reason
//     is an *IntensityError or a *StartError.
//
// Permanent children are restarted after any exit, Transient ones after an
// abnormal exit only, and Temporary ones never (they are removed when they
// exit). A child the supervisor stops itself, for a shutdown or a restart
// of its group, is not "exiting".
//
// # Not restarting a child
//
// "This child should not be restarted after this error" has two answers:
//
//   - OTP's: make the child Transient and end it with a normal exit (a Func
//     returns nil, an actor stops itself). Its supervisor restarts nothing,
//     neither the child nor its siblings; but when a sibling's exit later
//     restarts its group under OneForAll or RestForOne, the child is
//     started again with the group, as OTP's supervisor starts every
//     non-temporary child of the group, running or not.
//   - suture's: end the child with an error that wraps ErrDoNotRestart (a
//     Func or Service returns it; an actor passes it to Fail). Whatever its
//     RestartType, the child is not restarted, its exit does not count
//     towards the intensity, and group restarts leave it alone; it stays
//     in its supervisor, stopped, with the error as its last failure, until
//     Tree.RestartChild starts it. This holds for a child that has started:
//     failing to start with ErrDoNotRestart is a start failure.
//
// # Restarts
//
// OneForOne restarts only the child that exited. OneForAll stops the other
// children in reverse start order and restarts all of them in start order;
// RestForOne does the same with the children started after the one that
// exited. As in OTP, the group includes the transient children that have
// exited normally (see above). Each restart waits for the exiting child's Backoff (exponential
// with a cap, jitter, and a reset after a stable run; or Immediate). The
// timer that ends a backoff is tied to the supervisor's current plan: a
// child restarted or stopped in the meantime is never restarted by a stale
// timer.
//
// Restarts are counted against the supervisor's intensity: at most
// Intensity restarts within Period (default 3 in 5 s). One more stops all
// the children and the supervisor, which then fails: a nested tree's parent
// sees an abnormal exit with an *IntensityError and applies its own
// strategy and intensity; under Run, Run returns the error, naming the
// child and its failure; as Props, the failure escalates to the actor's
// protoactor-go parent.
//
// # Start and stop
//
// Children start one at a time, in spec order: each must process its
// Started message (a Func: have its goroutine launched; a nested tree:
// start all its children) within its start timeout before the next one
// starts. A child that fails to start stops those already started, in
// reverse order, and fails the start with a *StartError.
//
// Children stop in reverse order. Each is given its shutdown time; one that
// has not stopped by then is abandoned (protoactor-go cannot kill it) and
// reported, instead of hanging its supervisor: as a StopTimedOut event, and
// in the *UnstoppedError that Run returns if it still runs then. This holds
// when the supervisor is stopped through protoactor-go too: children are
// spawned with a link process as their parent, not as children of the
// supervisor actor, so protoactor-go never waits for them without a limit.
//
// A stopped tree may therefore leave abandoned children running: a Func
// that ignores its context, an actor blocked in Stopping, a nested tree
// still waiting for its own children. Tree.Unstopped lists those still
// running, at any depth, and Tree.Stopped returns a channel closed once the
// tree's instance has stopped and every one of them has exited (a Func's
// function has returned, an actor has terminated). Both work however the
// tree was started: whoever spawned Props, once the root actor has
// terminated, selects on Stopped beside a timer and reports Unstopped if
// the timer wins. Work that must have ended before something else starts
// (a lease released, a new term begun) waits for Stopped, not for the root
// actor.
//
// # The message path
//
// A child's actor id is its supervisor's id, '/', and its name, and it is
// kept across restarts: users send straight to the child's PID (from a
// Snapshot, from StartChild, or by id). The supervisor is never on the
// message path, and supervised actors run as fast as bare ones.
//
// There is one exception. protoactor-go registers one actor per id, and an
// abandoned incarnation keeps its id until it exits; a new incarnation
// started meanwhile gets the id with the suffix "#n" (n is its incarnation
// number, or the next number whose id is free), such as "app/db#2", and
// both incarnations may run side by side. Messages sent to the plain id
// reach the abandoned incarnation meanwhile. The first restart after the
// abandoned incarnation has exited takes the plain id again. Names may not
// contain '#', so a suffixed id never names another child; take PIDs from
// Snapshot, StartChild, RestartChild or the ChildStarted and
// ChildRestarted events rather than building ids by hand. To learn
// that a child has processed Started, the supervisor sends it one
// protoactor-go Touch message per incarnation, which actors may ignore.
//
// # Dynamic children
//
// While the tree runs, Tree.StartChild, StopChild and RestartChild act on
// the supervisor at a path ("" for the root, "workers" for a nested tree),
// and Children and Count list and count its children.
//
// # Events and snapshots
//
// Every start, exit, restart (with incarnation, restart count and reason),
// stop, stop timeout, scheduled backoff, intensity exceeded and escalation
// is a typed Event, delivered to Options.Hooks in order by one goroutine.
// Supervisors never wait for hooks: events that do not fit in the buffer
// are dropped and counted (Tree.DroppedEvents).
//
// Tree.Snapshot returns the state of the live tree (names, kinds, states,
// PIDs, incarnations, restart counts, last failures and their times, next
// restarts) without waiting for any supervisor. A Snapshot is a Go value,
// marshals to JSON, and prints as a text tree.
//
// # Testing
//
// Everything time-dependent (backoffs, intensity periods, start and
// shutdown timeouts) uses the standard time package, so trees can be tested
// in virtual time inside a testing/synctest bubble, as this package's own
// tests do. Stop every tree and shut the actor system down before the
// bubble ends.
package supervision
