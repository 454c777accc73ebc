package leasehold

import (
	"errors"

	"github.com/asterforge/aster/lease"
)

// Errors inside a *lease.LostError of reason lease.LossDeadline. Package
// actors exports them under the same names.
var (
	// ErrRenewDeadline: the renew deadline passed before a renewal could be
	// sent (a paused or starved process).
	ErrRenewDeadline = errors.New("lease holder: the renew deadline passed before a renewal could be sent")

	// ErrRenewOverran: the renew deadline passed while a renewal was in
	// flight (a slow or partitioned server).
	ErrRenewOverran = errors.New("lease holder: the renew deadline passed while a renewal was in flight")
)

// classify maps a renewal error to what the watchdog does about it: give
// the lease up at once (with a reason), or retry until the renew deadline
// (lease.LossUnknown).
func classify(err error) lease.LossReason {
	switch {
	case errors.Is(err, lease.ErrLost):
		return lease.LossTaken
	case errors.Is(err, lease.ErrCorrupt), errors.Is(err, lease.ErrInvalid), errors.Is(err, lease.ErrClosed),
		errors.Is(err, lease.ErrStoreConfig):
		return lease.LossStoreError
	default:
		return lease.LossUnknown // transient: ErrUnavailable, timeouts, unknown errors
	}
}
