package lock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/asterforge/aster/lease"
)

// Errors reported by this package, besides the lease errors (lease.ErrLost,
// lease.ErrClosed, lease.ErrInvalid, lease.ErrUnavailable) that it passes
// through. Check them with errors.Is.
var (
	// ErrHeld reports that another owner holds the lock: TryAcquire
	// returns a *HeldError matching it.
	ErrHeld = errors.New("lock: held by another owner")

	// ErrWatchdogStopped is the store error inside the *lease.LostError of
	// a guard whose watchdog actor stopped by itself (it panicked, or its
	// actor system was shut down under it). The guard is poisoned.
	ErrWatchdogStopped = errors.New("lock: watchdog stopped unexpectedly")
)

// HeldError is returned by TryAcquire when another owner holds the lock. It
// matches ErrHeld.
type HeldError struct {
	Resource string
	// Owner is the owner ID of the holder, or "" when the store could not
	// tell (a key that vanished without a release, whose last holder may
	// act until its TTL has run out).
	Owner string
	// Term is the holder's term: another guard of the same Locker has the
	// same Owner but another Term.
	Term string
}

func (e *HeldError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("lock: %s is held by another owner", e.Resource)
	}
	return fmt.Sprintf("lock: %s is held by %s", e.Resource, e.Owner)
}

// Is reports whether target is ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// NotReleased names a lock that Close could not release at the store. Its
// key expires there after its TTL.
type NotReleased struct {
	Resource string
	Token    lease.Token
	Err      error
}

// CloseError is what Close reports when it could not finish: the locks it
// could not release, and what did not stop within its bound. It unwraps to
// the errors of the locks not released.
type CloseError struct {
	NotReleased []NotReleased
	NotStopped  []string
}

func (e *CloseError) Error() string {
	var parts []string
	if n := len(e.NotReleased); n > 0 {
		first := e.NotReleased[0]
		parts = append(parts, fmt.Sprintf("%d locks not released (first: %s token %d: %v)",
			n, first.Resource, first.Token, first.Err))
	}
	if len(e.NotStopped) > 0 {
		parts = append(parts, "did not stop: "+strings.Join(e.NotStopped, ", "))
	}
	return "lock: close: " + strings.Join(parts, "; ")
}

// Unwrap returns the errors of the locks not released.
func (e *CloseError) Unwrap() []error {
	out := make([]error, 0, len(e.NotReleased))
	for _, n := range e.NotReleased {
		out = append(out, n.Err)
	}
	return out
}

// err returns e, or nil when there is nothing to report.
func (e *CloseError) err() error {
	if len(e.NotReleased) == 0 && len(e.NotStopped) == 0 {
		return nil
	}
	return e
}

// fatal reports store errors that retrying an acquisition cannot fix.
func fatal(err error) bool {
	return errors.Is(err, lease.ErrInvalid) || errors.Is(err, lease.ErrClosed) || errors.Is(err, lease.ErrCorrupt)
}
