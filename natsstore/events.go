package natsstore

import "fmt"

// Event is something a Store noticed that an operator should know about: a
// degraded state, a recovery, a change of the bucket. Every event is also
// logged (at WARN for degraded states), but a Store reports events through
// Config.OnEvent whether or not it has a logger. The set is sealed: only
// this package defines Events.
type Event interface {
	isEvent()
	fmt.Stringer
}

// BucketCreated reports that the store created its bucket because it was
// missing. In production a missing bucket usually means a wrong account,
// domain or bucket name: set Config.NoCreate there.
type BucketCreated struct {
	Bucket   string
	Domain   string // the JetStream domain, "" for the default one
	Replicas int
}

// ExpiryFallback reports that the store judges expiry by observation
// (ExpiryObserved) although it was not configured to: the server or the
// bucket lacks per-message TTLs, or stopped honouring them.
type ExpiryFallback struct {
	Bucket string
	Key    string // the key switched to observed expiry, "" for the whole store
	Reason string
}

// CorruptKey reports a value under a lease key that is not a lease this
// package wrote. Nobody can take the lease until an operator deletes the key
// (nats kv del BUCKET KEY).
type CorruptKey struct {
	Bucket   string
	Key      string
	Revision uint64
	Reason   string
}

func (BucketCreated) isEvent()  {}
func (ExpiryFallback) isEvent() {}
func (CorruptKey) isEvent()     {}

func (e BucketCreated) String() string {
	domain := e.Domain
	if domain == "" {
		domain = "(default)"
	}
	return fmt.Sprintf("created bucket %q in JetStream domain %s with %d replicas", e.Bucket, domain, e.Replicas)
}

func (e ExpiryFallback) String() string {
	if e.Key == "" {
		return fmt.Sprintf("bucket %q: expiry is judged by observation: %s", e.Bucket, e.Reason)
	}
	return fmt.Sprintf("bucket %q key %q: expiry is judged by observation: %s", e.Bucket, e.Key, e.Reason)
}

func (e CorruptKey) String() string {
	return fmt.Sprintf("key %q in bucket %q at revision %d is not an aster lease (%s); delete it: nats kv del %s %s",
		e.Key, e.Bucket, e.Revision, e.Reason, e.Bucket, e.Key)
}

// emit hands ev to Config.OnEvent, if set.
func (s *Store) emit(ev Event) {
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(ev)
	}
}

// AuthenticationFailed reports that the NATS server refused the credentials
// of the connection Dial made (they expired, were revoked, or are wrong),
// when it first happens after the connection was up. The store keeps
// reconnecting, reading the credentials file again at every attempt; until
// an attempt succeeds, operations fail with ErrAuthentication. Replace the
// credentials file. AuthenticationRecovered follows when it is accepted.
type AuthenticationFailed struct {
	Server string // the server last connected to
	Reason string // the server's refusal
}

// AuthenticationRecovered reports that the connection Dial made is up again
// after its credentials were refused.
type AuthenticationRecovered struct {
	Server   string
	Refusals int // refused attempts in between
}

func (AuthenticationFailed) isEvent()    {}
func (AuthenticationRecovered) isEvent() {}

func (e AuthenticationFailed) String() string {
	return fmt.Sprintf("NATS server %s refuses the credentials (%s); reconnecting: replace the credentials file", e.Server, e.Reason)
}

func (e AuthenticationRecovered) String() string {
	return fmt.Sprintf("reconnected to NATS server %s after %d refused attempts", e.Server, e.Refusals)
}
