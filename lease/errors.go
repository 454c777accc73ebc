package lease

import (
	"errors"
	"fmt"
)

// Errors reported by stores and by Config.Validate. Check them with errors.Is;
// stores wrap them with detail.
var (
	// ErrLost reports that the caller no longer owns the lease: another owner
	// holds it, it expired, or it was deleted. Renew returns it when ownership
	// is gone, and Release returns it when there was nothing of the caller's
	// to release (nothing was changed).
	ErrLost = errors.New("lease: ownership lost")

	// ErrInvalid reports a bad argument or configuration. The wrapping error
	// names the field (see FieldError).
	ErrInvalid = errors.New("lease: invalid argument")

	// ErrUnavailable reports that the store could not be reached or did not
	// answer in time. The operation may be retried; for a renewal, until the
	// lease's renew deadline.
	ErrUnavailable = errors.New("lease: store unavailable")

	// ErrCorrupt reports that the value stored under a lease key is not a
	// lease this library wrote (malformed, foreign or from a newer version).
	// A store never treats such a key as free.
	ErrCorrupt = errors.New("lease: stored value is not a valid lease")

	// ErrClosed reports a call on a store or lock that has been closed.
	ErrClosed = errors.New("lease: closed")

	// ErrStoreConfig reports that the store's backend is set up, or was
	// changed, in a way under which leases are unsafe or impossible: a
	// bucket deleted or edited, a feature the server lost, a regression of
	// its revisions. Retrying soon cannot fix it; an operator must, and
	// the wrapping error says how. An owner stops at once; a candidate
	// backs off and reports it.
	ErrStoreConfig = errors.New("lease: store misconfigured")
)

// FieldError is returned for an invalid Config field or argument. It matches
// ErrInvalid with errors.Is.
type FieldError struct {
	Field  string // Go name of the field or argument, e.g. "TTL"
	Reason string // what is wrong with it
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("lease: invalid %s: %s", e.Field, e.Reason)
}

// Is reports whether target is ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// ErrStaleToken is returned by Fence when a write carries a token lower than
// the highest the fence has accepted.
var ErrStaleToken = errors.New("lease: stale fencing token")
