package actors

import (
	"errors"
	"fmt"

	"github.com/asterforge/aster/lease"
)

// Errors reported by the lease actors. Check them with errors.Is.
var (
	// ErrReleased is the cause of a Hold that was released on purpose (a
	// lock's Release, the end of a leadership term). Token reads fail with it.
	ErrReleased = errors.New("actors: lease released")

	// ErrExpired reports that a Hold's validity (ValidUntil) has passed
	// without a renewal. It matches lease.ErrLost.
	ErrExpired = fmt.Errorf("actors: lease validity ended: %w", lease.ErrLost)

	// ErrWorkloadExited is the cause with which a workload's context is
	// cancelled when its term ends because it returned or its actor stopped
	// by itself, and, wrapping the workload's error, the cause of a restart
	// after a workload failed.
	ErrWorkloadExited = errors.New("actors: workload exited while leading")

	// ErrWorkloadStuck reports a workload that did not stop within its
	// StopTimeout after its context was cancelled. Its lease is neither
	// renewed nor released for it: it expires at the store.
	ErrWorkloadStuck = errors.New("actors: workload did not stop in time")

	// ErrRunning is returned by LeaseSupervisor.Run while another Run of
	// the same LeaseSupervisor is under way: one LeaseSupervisor is one
	// candidate.
	ErrRunning = errors.New("actors: the lease supervisor is already running")

	// ErrNotRunning is returned by LeaseSupervisor.Resign when no actor of
	// the supervisor runs.
	ErrNotRunning = errors.New("actors: the lease supervisor is not running")

	// ErrResigned is the cause with which a workload's context is cancelled
	// when LeaseSupervisor.Resign steps it down.
	ErrResigned = errors.New("actors: resigned")

	// ErrTooManyRestarts is the reason a LeaseSupervisor escalates to its
	// parent (and Run returns) after more restarts within a period than its
	// RestartPolicy allows.
	ErrTooManyRestarts = errors.New("actors: too many restarts")

	// ErrRenewDeadline is the error of a poison at the renew deadline when
	// no renewal had failed before it: the watchdog did not get to renew in
	// time, typically because the process was paused (SIGSTOP, a long GC or
	// VM pause) or starved of CPU.
	ErrRenewDeadline = errors.New("actors: the renew deadline passed before a renewal could be sent")

	// ErrRenewOverran is the error of a poison at the renew deadline while
	// a renewal was still in flight: the store did not answer in time (a
	// slow or partitioned server, a starved process), so the Hold was ended
	// without waiting for it.
	ErrRenewOverran = errors.New("actors: the renew deadline passed while a renewal was in flight")
)

// PoisonReason says why a Watchdog gave up a lease.
type PoisonReason uint8

const (
	// PoisonUnknown is never sent; it is the safe zero value.
	PoisonUnknown PoisonReason = iota
	// PoisonLost: the store answered that this owner no longer holds the
	// lease (lease.ErrLost). Sent at once, without retrying.
	PoisonLost
	// PoisonDeadlinePassed: renewals kept failing until the renew deadline
	// (lease.Config.RenewDeadline), after which the workload needs the rest
	// of the validity to stop.
	PoisonDeadlinePassed
	// PoisonStoreError: the store gave an answer that retrying cannot fix
	// (lease.ErrCorrupt, lease.ErrInvalid, lease.ErrClosed,
	// lease.ErrStoreConfig), or the watchdog itself failed.
	PoisonStoreError
)

func (r PoisonReason) String() string {
	switch r {
	case PoisonLost:
		return "lost"
	case PoisonDeadlinePassed:
		return "deadline passed"
	case PoisonStoreError:
		return "store error"
	default:
		return "unknown"
	}
}

// LostError is the cause of a poisoned Hold and of its context. It matches
// lease.ErrLost with errors.Is, and unwraps to the store error that caused
// it (if any).
type LostError struct {
	Reason PoisonReason
	Err    error // the last store error, or nil
}

func (e *LostError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("lease lost (%s)", e.Reason)
	}
	return fmt.Sprintf("lease lost (%s): %v", e.Reason, e.Err)
}

// Is reports whether target is lease.ErrLost.
func (e *LostError) Is(target error) bool { return target == lease.ErrLost }

// Unwrap returns the store error behind the loss.
func (e *LostError) Unwrap() error { return e.Err }

// classify maps a renewal error to what the watchdog does about it: poison
// at once (with a reason), or retry until the renew deadline (PoisonUnknown).
func classify(err error) PoisonReason {
	switch {
	case errors.Is(err, lease.ErrLost):
		return PoisonLost
	case errors.Is(err, lease.ErrCorrupt), errors.Is(err, lease.ErrInvalid), errors.Is(err, lease.ErrClosed),
		errors.Is(err, lease.ErrStoreConfig):
		return PoisonStoreError
	default:
		return PoisonUnknown // transient: ErrUnavailable, timeouts, unknown errors
	}
}
