package lease

import (
	"errors"
	"fmt"
)

// Errors a holder's token reads and contexts report.
var (
	// ErrReleased is the cause of a held lease given up on purpose (a
	// lock's Release, the end of a leadership term): its token reads fail
	// with it from then on.
	ErrReleased = errors.New("lease: released")

	// ErrExpired reports that a holder's validity has passed without a
	// renewal, on its own clock. It matches ErrLost.
	ErrExpired = fmt.Errorf("lease: validity ended: %w", ErrLost)
)

// LossReason says why a holder lost its lease.
type LossReason uint8

const (
	// LossUnknown is never reported; it is the safe zero value.
	LossUnknown LossReason = iota
	// LossTaken: the store answered that the holder no longer holds the
	// lease (ErrLost): it expired, was taken over, or was deleted. Reported
	// at once, without retrying.
	LossTaken
	// LossDeadline: renewals kept failing until the renew deadline
	// (Config.RenewDeadline), after which the holder needs the rest of its
	// validity to stop.
	LossDeadline
	// LossStoreError: the store gave an answer that retrying cannot fix
	// (ErrCorrupt, ErrInvalid, ErrClosed, ErrStoreConfig), or the holder's
	// renewing machinery itself failed.
	LossStoreError
)

func (r LossReason) String() string {
	switch r {
	case LossTaken:
		return "lost"
	case LossDeadline:
		return "deadline passed"
	case LossStoreError:
		return "store error"
	default:
		return "unknown"
	}
}

// MarshalText implements encoding.TextMarshaler.
func (r LossReason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// LostError is the cause of a lost lease, as its holder's context reports
// it. It matches ErrLost with errors.Is, and unwraps to the store error that
// caused it (if any).
type LostError struct {
	Reason LossReason
	Err    error // the last store error, or nil
}

func (e *LostError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("lease lost (%s)", e.Reason)
	}
	return fmt.Sprintf("lease lost (%s): %v", e.Reason, e.Err)
}

// Is reports whether target is ErrLost.
func (e *LostError) Is(target error) bool { return target == ErrLost }

// Unwrap returns the store error behind the loss.
func (e *LostError) Unwrap() error { return e.Err }
