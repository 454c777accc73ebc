package supervision

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Event is something that happened in a tree. The concrete types are
// ChildStarted, ChildExited, ChildRestarted, ChildStopped, StopTimedOut,
// BackoffScheduled, IntensityExceeded and Escalated; switch on them. Events
// are delivered to Options.Hooks in order, by one goroutine per running
// tree, never blocking a supervisor (see Options.EventBuffer).
type Event interface {
	// String describes the event in one line, without its time.
	String() string
	event()
}

// ChildStarted: a child was started for the first time (incarnation 1), or
// started again by a dynamic StartChild.
type ChildStarted struct {
	Time        time.Time
	Supervisor  string // path of the supervisor
	Child       string
	PID         *actor.PID
	Incarnation uint64
}

// ChildExited: a child exited by itself. Normal exits have a nil Reason;
// abnormal exits carry it (a *PanicError for a panic; an error wrapping
// ErrDoNotRestart for a child that is not to be restarted).
type ChildExited struct {
	Time        time.Time
	Supervisor  string
	Child       string
	PID         *actor.PID
	Incarnation uint64
	Normal      bool
	Reason      error
}

// ChildRestarted: a child runs again as a new incarnation. Restarts counts
// this child's restarts so far; Reason is why it was restarted: its own
// failure, a sibling's under OneForAll or RestForOne, or ErrRestartRequested.
type ChildRestarted struct {
	Time        time.Time
	Supervisor  string
	Child       string
	PID         *actor.PID
	Incarnation uint64
	Restarts    int
	Reason      error
}

// ChildStopped: the supervisor stopped a child (shutdown, a restart of its
// group, or a dynamic stop), and it stopped in time.
type ChildStopped struct {
	Time        time.Time
	Supervisor  string
	Child       string
	PID         *actor.PID
	Incarnation uint64
}

// StopTimedOut: a child did not stop within its shutdown time and was
// abandoned. It is listed by Tree.Unstopped until it exits, and in the
// UnstoppedError of Run if it still has not stopped when Run returns.
type StopTimedOut struct {
	Time        time.Time
	Supervisor  string
	Child       string
	PID         *actor.PID
	Incarnation uint64
	Timeout     time.Duration
}

// BackoffScheduled: a child (and, under OneForAll or RestForOne, its group)
// will be restarted after Delay. Attempt counts consecutive failures of the
// child since its last stable run.
type BackoffScheduled struct {
	Time       time.Time
	Supervisor string
	Child      string
	Attempt    int
	Delay      time.Duration
	Reason     error
}

// IntensityExceeded: a supervisor needed more restarts than its intensity
// allows; it stops all its children and escalates.
type IntensityExceeded struct {
	Time       time.Time
	Supervisor string
	Child      string
	Reason     error
	Intensity  int
	Period     time.Duration
}

// Escalated: a supervisor failed (intensity exceeded, or a child failed to
// start while the supervisor started) and handed the failure to its parent.
type Escalated struct {
	Time       time.Time
	Supervisor string
	Reason     error
}

func (ChildStarted) event()      {}
func (ChildExited) event()       {}
func (ChildRestarted) event()    {}
func (ChildStopped) event()      {}
func (StopTimedOut) event()      {}
func (BackoffScheduled) event()  {}
func (IntensityExceeded) event() {}
func (Escalated) event()         {}

func (e ChildStarted) String() string {
	return fmt.Sprintf("%s/%s started (incarnation %d)", e.Supervisor, e.Child, e.Incarnation)
}

func (e ChildExited) String() string {
	if e.Normal {
		return fmt.Sprintf("%s/%s exited normally (incarnation %d)", e.Supervisor, e.Child, e.Incarnation)
	}
	return fmt.Sprintf("%s/%s failed (incarnation %d): %v", e.Supervisor, e.Child, e.Incarnation, e.Reason)
}

func (e ChildRestarted) String() string {
	return fmt.Sprintf("%s/%s restarted (incarnation %d, restart %d): %v",
		e.Supervisor, e.Child, e.Incarnation, e.Restarts, e.Reason)
}

func (e ChildStopped) String() string {
	return fmt.Sprintf("%s/%s stopped (incarnation %d)", e.Supervisor, e.Child, e.Incarnation)
}

func (e StopTimedOut) String() string {
	return fmt.Sprintf("%s/%s did not stop within %v (incarnation %d)",
		e.Supervisor, e.Child, e.Timeout, e.Incarnation)
}

func (e BackoffScheduled) String() string {
	return fmt.Sprintf("%s/%s restarts in %v (attempt %d)", e.Supervisor, e.Child, e.Delay, e.Attempt)
}

func (e IntensityExceeded) String() string {
	return fmt.Sprintf("%s exceeded %d restarts in %v at child %q: %v",
		e.Supervisor, max(e.Intensity, 0), e.Period, e.Child, e.Reason)
}

func (e Escalated) String() string {
	return fmt.Sprintf("%s escalated: %v", e.Supervisor, e.Reason)
}
