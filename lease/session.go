package lease

import "context"

// SessionStore is an optional Store capability: leases held under a
// session, as etcd attaches keys to a lease, so that one renewal keeps any
// number of leases alive.
//
// A session is an ordinary lease, acquired, renewed and released with the
// Store's methods. A lease acquired under it with AcquireUnder is written
// once, with no expiry of its own; its value names the session's lease ID
// and term. It is held for as long as that term holds the session: a
// contender (Acquire or AcquireUnder) takes it, with a compare-and-swap on
// its revision, once the session's key is released, expired, held by
// another term, or deleted by hand and the store's wait for a vanished key
// has passed, exactly as it would take a lease whose own TTL ran out. Its
// token is the revision of its acquiring write, as for any lease, so tokens
// keep increasing across both kinds.
//
// A lease held under a session is released with Release (a
// compare-and-swap on its revision); it is never renewed. Its holder is
// valid for as long as the session is: the session's owner stops every
// lease held under it when the session is lost.
type SessionStore interface {
	Store

	// AcquireUnder takes c.LeaseID for c's term under session, a lease the
	// caller holds (its ID, owner and term are written in the value; the
	// session's liveness is not checked here: a lease written under a
	// session that has already ended is free to contenders at once). It
	// answers as Acquire does, and, like Acquire, takes the lease over from
	// c's own term with a new write and a new token. c.TTL is not written:
	// the returned Lease carries the session's TTL, for information.
	AcquireUnder(ctx context.Context, c Claim, session Lease) (Acquisition, error)
}

// ValidateUnder reports whether c and session can be passed to
// SessionStore.AcquireUnder: a valid claim, a valid lease, and two
// different lease IDs.
func ValidateUnder(c Claim, session Lease) error {
	if err := ValidateClaim(c); err != nil {
		return err
	}
	if err := ValidateLease(session); err != nil {
		return invalid("session", "%v", err)
	}
	if c.LeaseID == session.ID {
		return invalid("session", "%q cannot be held under itself", c.LeaseID)
	}
	return nil
}
