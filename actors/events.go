package actors

import (
	"fmt"
	"time"

	"github.com/asterforge/aster/internal/leasehold"

	"github.com/asterforge/aster/lease"
)

// Event is something a lease actor reports through its event hook. The set
// is sealed: only this package defines Events. Hooks are called on the
// reporting actor's goroutine and must not block.
type Event interface {
	// Lease names the lease and the owner (this process) the event is about.
	Lease() (leaseID, ownerID string)
	isEvent()
}

// Subject names the lease and owner an event is about.
type Subject struct {
	LeaseID string
	OwnerID string
}

// Lease implements Event.
func (s Subject) Lease() (leaseID, ownerID string) { return s.LeaseID, s.OwnerID }

// Acquired: this owner acquired the lease and starts leading.
type Acquired struct {
	Subject
	Token      lease.Token
	ValidUntil time.Time
	// Handover is true when another owner was seen holding the lease
	// before this acquisition.
	Handover bool
	// Resumed is true when this is a lapsed term going on: its renewals
	// failed until the renew deadline and its workload stopped, but the
	// store still held its lease, renewed now with the same term and Token.
	Resumed bool
}

// Standby: another term holds the lease. Reported when the observed holder
// changes, not on every poll.
type Standby struct {
	Subject
	// Holder is who holds it. Its OwnerID is "" when nobody does but the
	// lease is not free yet (a key that vanished without a release).
	Holder lease.Holder
}

// AcquisitionFailed: an acquisition attempt failed; the standby tries again
// in RetryIn (a backoff that grows while the cause is a corrupt key or a
// misconfigured store), unless the error cannot be fixed by retrying
// (lease.ErrInvalid, lease.ErrClosed, ErrStoreStopped), when it escalates.
type AcquisitionFailed struct {
	Subject
	Err     error
	Attempt int // failures in a row
	RetryIn time.Duration
}

// SteppedDown: a term ended without a failure: the workload returned nil
// or its actor stopped itself, or Resign was called (Resigned). The lease
// was released (or a NotReleased event says why not) and the instance
// stands by.
type SteppedDown struct {
	Subject
	Token    lease.Token
	Resigned bool
}

// StuckWorkloadStopped: a workload reported by WorkloadStopTimeout has
// stopped at last; terms may start again.
type StuckWorkloadStopped struct {
	Subject
	Token lease.Token
}

// Renewed: a Watchdog renewed the lease.
type Renewed struct {
	Subject
	Token      lease.Token
	Revision   uint64
	TTL        time.Duration
	ValidUntil time.Time
}

// RenewalFailed: a renewal failed with a transient error; the Watchdog
// retries until Deadline.
type RenewalFailed struct {
	Subject
	Token    lease.Token
	Attempt  int // failures in a row
	Deadline time.Time
	Err      error
}

// Poisoned: a Watchdog gave the lease up; its workload is being stopped.
type Poisoned struct {
	Subject
	Token  lease.Token
	Reason lease.LossReason
	Err    error // a *lease.LostError
}

// Released: the lease was released at the store with a compare-and-swap.
type Released struct {
	Subject
	Token lease.Token
}

// NotReleased: a leadership term ended without releasing the lease: its
// validity had ended, the workload did not stop, or the store refused or
// failed. A standby takes the lease over once it has gone a TTL without
// renewal.
type NotReleased struct {
	Subject
	Token lease.Token
	Err   error
}

// WorkloadStopTimeout: the workload did not stop within Timeout after its
// context was cancelled. The lease is neither renewed nor released for it.
type WorkloadStopTimeout struct {
	Subject
	Token   lease.Token
	Timeout time.Duration
}

// WorkloadExited: the workload failed while the lease was held: it returned
// an error, panicked, or its actor failed. Err says how.
type WorkloadExited struct {
	Subject
	Token lease.Token
	Err   error
}

// Restarting: a term ended by poison or workload exit; the supervisor waits
// Delay before standing by again. Attempt counts terms ended in a row
// without a stable period.
type Restarting struct {
	Subject
	Attempt int
	Delay   time.Duration
	Cause   error
}

// GaveUp: more restarts within the RestartPolicy's period than it allows,
// or a store error that retrying cannot fix (lease.ErrInvalid,
// lease.ErrClosed, ErrStoreStopped): the supervisor hands the failure to
// its parent (Run returns it).
type GaveUp struct {
	Subject
	Restarts int
	Err      error
}

func (Acquired) isEvent()             {}
func (Standby) isEvent()              {}
func (Renewed) isEvent()              {}
func (RenewalFailed) isEvent()        {}
func (Poisoned) isEvent()             {}
func (Released) isEvent()             {}
func (NotReleased) isEvent()          {}
func (WorkloadStopTimeout) isEvent()  {}
func (WorkloadExited) isEvent()       {}
func (Restarting) isEvent()           {}
func (GaveUp) isEvent()               {}
func (AcquisitionFailed) isEvent()    {}
func (SteppedDown) isEvent()          {}
func (StuckWorkloadStopped) isEvent() {}

// report turns what a Watchdog reports into this package's events.
func (s *LeaseSupervisor) report(r leasehold.Report) { s.emit(eventOf(r)) }

// eventOf is the Event of a watchdog's report.
func eventOf(r leasehold.Report) Event {
	switch r := r.(type) {
	case leasehold.Renewed:
		return Renewed{Subject: subjectOf(r.Lease), Token: r.Token, Revision: r.Revision, TTL: r.TTL, ValidUntil: r.ValidUntil}
	case leasehold.RenewalFailed:
		return RenewalFailed{Subject: subjectOf(r.Lease), Token: r.Token, Attempt: r.Attempt, Deadline: r.Deadline, Err: r.Err}
	case leasehold.Poisoned:
		return Poisoned{Subject: subjectOf(r.Lease), Token: r.Token, Reason: r.Reason, Err: r.Err}
	}
	panic(fmt.Sprintf("actors: unknown watchdog report %T", r))
}

func subjectOf(l lease.Lease) Subject { return Subject{LeaseID: l.ID, OwnerID: l.OwnerID} }
