package leasehold

import (
	"time"

	"github.com/asterforge/aster/lease"
)

// Report is what a Watchdog tells its owner's hook, besides the Poison
// message it sends its parent: Renewed, RenewalFailed or Poisoned. Package
// actors turns reports into its events.
type Report interface{ isReport() }

// Renewed: a renewal succeeded; Lease is the lease as written (its new
// Revision) and ValidUntil the Hold's new validity.
type Renewed struct {
	lease.Lease
	ValidUntil time.Time
}

// RenewalFailed: a renewal failed with a transient error; the Watchdog
// retries until Deadline.
type RenewalFailed struct {
	lease.Lease
	Attempt  int // failures in a row
	Deadline time.Time
	Err      error
}

// Poisoned: the Watchdog gave the lease up. Err is the Hold's cause, a
// *lease.LostError.
type Poisoned struct {
	lease.Lease
	Reason lease.LossReason
	Err    error
}

func (Renewed) isReport()       {}
func (RenewalFailed) isReport() {}
func (Poisoned) isReport()      {}
