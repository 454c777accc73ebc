package lock

import (
	"time"

	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// Event is something a Locker reports through Config.OnEvent. The set is
// sealed: only this package defines Events. The hook is called on the
// reporting goroutine (a caller of Acquire or Release, or a watchdog) and
// must not block.
type Event interface {
	// Lease names the lock's lease and its owner (this Locker).
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

// LockAcquired: an Acquire or TryAcquire took the lock.
type LockAcquired struct {
	Subject
	Token      lease.Token
	ValidUntil time.Time
	// Handover is true when the call had seen another owner hold the lock
	// before this acquisition.
	Handover bool
}

// LockRenewed: a watchdog renewed the lock's lease (or its session's).
type LockRenewed struct {
	Subject
	Token      lease.Token
	Revision   uint64
	TTL        time.Duration
	ValidUntil time.Time
}

// LockRenewalFailed: a renewal failed with a transient error; the watchdog
// retries until Deadline.
type LockRenewalFailed struct {
	Subject
	Token    lease.Token
	Attempt  int // failures in a row
	Deadline time.Time
	Err      error
}

// LockPoisoned: the lock is lost: its watchdog gave its lease up, the
// watchdog stopped, or the session it was held under ended. Its guard has
// ended.
type LockPoisoned struct {
	Subject
	Token  lease.Token
	Reason lease.LossReason
	Err    error
}

// LockReleased: Guard.Release (or Close) deleted the lock's key with a
// compare-and-swap.
type LockReleased struct {
	Subject
	Token lease.Token
}

// LockNotReleased: a release did not delete the key: the lock had been lost,
// or the store refused or failed. The key expires at the store (or with its
// session).
type LockNotReleased struct {
	Subject
	Token lease.Token
	Err   error
}

func (LockAcquired) isEvent()      {}
func (LockRenewed) isEvent()       {}
func (LockRenewalFailed) isEvent() {}
func (LockPoisoned) isEvent()      {}
func (LockReleased) isEvent()      {}
func (LockNotReleased) isEvent()   {}

// subject names le in an event.
func subject(le lease.Lease) Subject {
	return Subject{LeaseID: le.ID, OwnerID: le.OwnerID}
}

// reportEvent turns what a watchdog reports into the lock's event, or nil.
func reportEvent(r leasehold.Report) Event {
	switch r := r.(type) {
	case leasehold.Renewed:
		return LockRenewed{Subject: subject(r.Lease), Token: r.Token, Revision: r.Revision, TTL: r.TTL, ValidUntil: r.ValidUntil}
	case leasehold.RenewalFailed:
		return LockRenewalFailed{Subject: subject(r.Lease), Token: r.Token, Attempt: r.Attempt, Deadline: r.Deadline, Err: r.Err}
	case leasehold.Poisoned:
		return LockPoisoned{Subject: subject(r.Lease), Token: r.Token, Reason: r.Reason, Err: r.Err}
	}
	return nil
}
