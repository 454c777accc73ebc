package natsstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// Errors reported when a Store is opened. Operations report the errors of
// package lease (ErrLost, ErrInvalid, ErrUnavailable, ErrCorrupt, ErrClosed),
// wrapping the NATS error for detail.
var (
	// ErrBucketConfig reports a bucket whose configuration would break
	// leases (see Config); the wrapping error says what is wrong and how to
	// fix it. The bucket is never changed.
	ErrBucketConfig = errors.New("natsstore: bucket configuration is unsafe for leases")

	// ErrNoBucket reports that the bucket does not exist and Config.NoCreate
	// forbids creating it.
	ErrNoBucket = errors.New("natsstore: bucket not found")

	// ErrPermission reports that the server denied this connection's user a
	// subject the store needs (the bucket's $KV subjects, the JetStream API,
	// or reply inboxes). Fix the user's permissions.
	ErrPermission = errors.New("natsstore: permission denied")

	// ErrAuthentication reports that the server refused the credentials.
	ErrAuthentication = errors.New("natsstore: authentication failed")
)

// CorruptError reports a value under a lease key that is not a lease this
// package wrote: garbage, a foreign value, or a value from a newer version.
// It matches lease.ErrCorrupt with errors.Is. The key is never treated as
// free while it holds such a value; an operator must delete it (after which
// contenders wait one TTL before taking the lease, see Store.Acquire).
type CorruptError struct {
	Bucket   string
	Key      string
	Revision uint64
	Reason   string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("natsstore: key %q in bucket %q at revision %d is not an aster lease: %s",
		e.Key, e.Bucket, e.Revision, e.Reason)
}

// Is reports whether target is lease.ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == lease.ErrCorrupt }

// isConflict reports whether err is JetStream's answer to a failed
// compare-and-swap: wrong last sequence, code 10071 (10164 on replicated
// streams). A raw publish error is not wrapped in jetstream.ErrKeyExists.
func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// unavailable translates an error of the transport into one that matches
// lease.ErrUnavailable and, when ctx is done, ctx.Err().
func unavailable(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("natsstore: %s: %w: %w (%v)", what, lease.ErrUnavailable, cerr, err)
	}
	return fmt.Errorf("natsstore: %s: %w: %w", what, lease.ErrUnavailable, err)
}

// permissionDenied returns an ErrPermission error when err, or the
// connection's last asynchronous error, is a permissions violation.
func permissionDenied(nc *nats.Conn, err error) error {
	perm := err
	if !errors.Is(perm, nats.ErrPermissionViolation) {
		if nc == nil {
			return nil
		}
		perm = nc.LastError()
		if perm == nil || !errors.Is(perm, nats.ErrPermissionViolation) {
			return nil
		}
	}
	return fmt.Errorf("%w: %v", ErrPermission, perm)
}

// isAuthFailure reports whether err is one of the server's refusals of the
// credentials.
func isAuthFailure(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) ||
		errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) ||
		errors.Is(err, nats.ErrAccountAuthExpired) ||
		err != nil && strings.Contains(strings.ToLower(err.Error()), "authorization violation")
}
