package lease

import (
	"context"
	"time"
)

// Token is a fencing token: the store revision of the write that acquired a
// lease. It is fixed for the life of one acquisition and strictly greater
// than the token of every earlier acquisition of the same lease. The zero
// Token is never issued.
type Token uint64

// Claim asks a Store for a lease on behalf of one term.
type Claim struct {
	LeaseID string
	// OwnerID names the instance that asks, for people: a pod name, or
	// NewOwnerID. Two instances may share it by mistake; the store never
	// relies on it to tell terms apart.
	OwnerID string
	// Term identifies this tenure: one acquisition by a supervisor, one
	// lock guard. Use NewTerm, once per tenure, and retry an Acquire whose
	// outcome was unknown with the same Term: the store then recognises
	// its own write. A key held by any other term is held.
	Term string
	TTL  time.Duration // must be positive
	// Meta is small metadata the holder publishes with the lease (an
	// address, a pod name, a version), like etcd's campaign value; see
	// ValidateMeta for its limits. It is read back in Holder.Meta.
	Meta map[string]string
}

// Lease is a held lease: what an owner passes back to Renew and Release.
type Lease struct {
	ID      string
	OwnerID string
	Term    string        // the tenure that holds it
	Token   Token         // fixed at acquisition
	TTL     time.Duration // the TTL Renew writes; change it to extend
	// Revision is the store's version of the last write by this owner
	// (acquire or renew); stores use it for compare-and-swap. It equals
	// uint64(Token) right after acquisition.
	Revision uint64
	Meta     map[string]string // written again by every renewal
}

// Tenure returns the lease's token and term, as a Fence takes them.
func (l Lease) Tenure() Tenure { return Tenure{Token: l.Token, Term: l.Term} }

// Holder describes the holder of a lease as a store read it: who, which
// term, and with which token. Fields a store could not read are zero.
type Holder struct {
	OwnerID string            `json:"owner_id"`
	Term    string            `json:"term"`
	Token   Token             `json:"token"`
	TTL     time.Duration     `json:"ttl"` // the TTL of the holder's last write
	Meta    map[string]string `json:"meta,omitempty"`
	// Session is the lease ID of the session the lease is held under
	// (SessionStore.AcquireUnder), "" for a lease with a TTL of its own. The
	// lease stays held while that session does: watch it too.
	Session string `json:"session,omitempty"`
}

// Acquisition is the answer to Store.Acquire.
type Acquisition struct {
	// Acquired reports whether the caller now holds the lease.
	Acquired bool
	// Lease is the held lease when Acquired.
	Lease Lease
	// Holder is the current holder when not Acquired. Its OwnerID is ""
	// when nobody holds the lease but the store cannot let the caller take
	// it yet (a key that vanished without a release, whose last holder may
	// still be acting until its TTL has run out).
	Holder Holder
	// ExpiresIn is, when not Acquired, how long until the store will let
	// the caller take the lease if its holder does not write it again
	// first (a store that judges expiry by watching the key's revision
	// counts the holder's TTL from when it first saw that revision), or,
	// for a key that vanished without a release (Holder.OwnerID ""), until
	// its wait ends (natsstore: the bucket's MaxTTL since it saw the key
	// vanish): try again then. 0 means unknown: wait for a watch event or
	// poll.
	ExpiresIn time.Duration
}

// Store keeps leases. Implementations must be safe for concurrent use and
// must pass leasetest.Run.
//
// Every method honours ctx: when ctx is done it returns promptly with an
// error that matches ctx.Err() (or ErrUnavailable wrapping it). An error
// other than ErrLost and ErrInvalid leaves the outcome unknown to the
// caller; stores resolve indeterminate writes themselves where they can.
type Store interface {
	// Acquire takes the lease if it is free or expired, or if the claim's
	// own term already holds it (its earlier write landed although the
	// caller did not learn it), and otherwise reports the current holder. A
	// lease held by another term is held, whatever its OwnerID. Taking it
	// over from the same term writes again and yields a new, larger token.
	Acquire(ctx context.Context, c Claim) (Acquisition, error)

	// Renew extends a held lease by l.TTL from now, with a compare-and-swap
	// on l.Revision. It returns the lease with its new Revision, or ErrLost
	// when l is no longer held by l's term at l.Revision.
	Renew(ctx context.Context, l Lease) (Lease, error)

	// Release deletes a held lease with a compare-and-swap on l.Revision. It
	// returns ErrLost, and changes nothing, when l is not held any more.
	Release(ctx context.Context, l Lease) error
}

// Watcher is an optional Store capability: change notification, used for
// fast takeover. A standby that has a Watcher retries as soon as the lease
// may have become free instead of waiting for its retry interval.
type Watcher interface {
	// Watch reports changes of one lease until ctx is done, and then closes
	// the channel. Events are hints, not facts: a receiver must call Acquire
	// to learn the truth, and must keep polling because a watch can be
	// silent (a lost connection). The channel is buffered and coalescing: a
	// slow receiver misses intermediate events, never the latest.
	Watch(ctx context.Context, leaseID string) (<-chan Event, error)
}

// EventKind says what a watch saw.
type EventKind uint8

const (
	// EventUnknown is never sent; it is the safe zero value.
	EventUnknown EventKind = iota
	// EventFree: the key was released, deleted, purged or expired.
	EventFree
	// EventHeld: an owner wrote the key (acquired or renewed).
	EventHeld
)

func (k EventKind) String() string {
	switch k {
	case EventFree:
		return "free"
	case EventHeld:
		return "held"
	default:
		return "unknown"
	}
}

// Event is one change seen by a Watcher.
type Event struct {
	LeaseID  string
	Kind     EventKind
	Holder   Holder // the writer, for EventHeld; zero if unreadable
	Revision uint64 // the store revision of the change, 0 if unknown
}

// ValidateClaim reports whether c can be passed to a Store.
func ValidateClaim(c Claim) error {
	if err := ValidateLeaseID(c.LeaseID); err != nil {
		return err
	}
	if err := ValidateOwnerID(c.OwnerID); err != nil {
		return err
	}
	if err := ValidateTerm(c.Term); err != nil {
		return err
	}
	if c.TTL <= 0 {
		return invalid("TTL", "must be positive, got %v", c.TTL)
	}
	return ValidateMeta(c.Meta)
}

// ValidateLease reports whether l can be passed to Renew or Release.
func ValidateLease(l Lease) error {
	if err := ValidateClaim(Claim{LeaseID: l.ID, OwnerID: l.OwnerID, Term: l.Term, TTL: l.TTL, Meta: l.Meta}); err != nil {
		return err
	}
	if l.Token == 0 {
		return invalid("Token", "must not be zero")
	}
	if l.Revision < uint64(l.Token) {
		return invalid("Revision", "%d is older than the token %d", l.Revision, l.Token)
	}
	return nil
}
