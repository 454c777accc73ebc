package natsstore

import (
	"fmt"

	"github.com/asterforge/aster/lease"
)

// Problem says what a BucketError found wrong with the bucket or its server.
type Problem uint8

const (
	// ProblemUnknown is never reported; it is the safe zero value.
	ProblemUnknown Problem = iota
	// ProblemBucketDeleted: the bucket's stream is gone. The store never
	// creates a bucket it has opened once.
	ProblemBucketDeleted
	// ProblemBucketRecreated: the bucket was deleted and created again (its
	// creation time changed, or writes land in another stream). Every lease
	// in it was lost, and its revisions may have restarted below the
	// tokens already issued.
	ProblemBucketRecreated
	// ProblemBucketChanged: the bucket's configuration was edited into
	// one under which leases are unsafe (a bucket TTL, History above 1, a
	// different maximum lease TTL, per-message TTLs refused, ...).
	ProblemBucketChanged
	// ProblemServerDowngraded: the store was configured with ExpiryServer and
	// the server no longer expires per-message TTLs (replaced by a server
	// before 2.11).
	ProblemServerDowngraded
	// ProblemSequenceRegression: the bucket issued or showed a revision
	// below one this store had already seen: the server lost acknowledged
	// writes (or was restored from an older copy), and could issue a
	// fencing token twice.
	ProblemSequenceRegression
)

func (p Problem) String() string {
	switch p {
	case ProblemBucketDeleted:
		return "bucket deleted"
	case ProblemBucketRecreated:
		return "bucket re-created"
	case ProblemBucketChanged:
		return "bucket changed"
	case ProblemServerDowngraded:
		return "server downgraded"
	case ProblemSequenceRegression:
		return "sequence regression"
	default:
		return "unknown problem"
	}
}

// BucketError reports that the bucket, or the server that keeps it, changed
// under a running Store in a way that makes leases unsafe. It matches
// lease.ErrStoreConfig with errors.Is, so that owners stop at once. The
// store stops with it: every later call returns it, until the store is
// closed and a new one opened once an operator has fixed the cause (Fix
// says how). Store.Err returns it.
type BucketError struct {
	Bucket  string
	Problem Problem
	Detail  string // what the store saw
	Fix     string // what an operator should do
}

func (e *BucketError) Error() string {
	return fmt.Sprintf("natsstore: bucket %q: %s: %s; %s", e.Bucket, e.Problem, e.Detail, e.Fix)
}

// Is reports whether target is lease.ErrStoreConfig.
func (e *BucketError) Is(target error) bool { return target == lease.ErrStoreConfig }

// Fixes of BucketErrors.
const (
	fixRestart = "find out who changed it, then restart every instance that uses the bucket " +
		"(a store stops for good once its bucket changed under it)"
	fixRegression = "the server lost acknowledged writes or was restored from an older copy, so a fencing " +
		"token may have been issued twice: check the server's storage (sync_interval, replicas), then " +
		"restart every instance that uses the bucket"
)
