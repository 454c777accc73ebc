package natsstore

import (
	"fmt"
	"time"
)

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

// WatchStalled reports a watch that fell silent: the key changed and the
// watch did not deliver the change (found by the liveness check, see
// Config.WatchCheckInterval), or a lost watch could not be re-created for
// longer than a check interval. Standbys that rely on the watch fall back to
// polling meanwhile. The store keeps re-creating the watch and reports
// WatchRecovered when it delivers again.
type WatchStalled struct {
	Bucket string
	Key    string
	// Silent is how long the watch is known to have been silent: since the
	// check that first read a revision it had not delivered, or since the
	// watch was lost.
	Silent time.Duration
	// Cause is the likely cause, for example refused flow-control replies
	// (the user may not publish to $JS.FC.KV_<bucket>.>), a consumer lost
	// with its server, or the error that keeps the watch from being
	// re-created.
	Cause string
}

// WatchRecovered reports that a watch reported by WatchStalled was
// re-created and delivers again, starting with the key's current state.
type WatchRecovered struct {
	Bucket string
	Key    string
	Silent time.Duration // how long the watch was silent in all
}

// ServerIsolated reports that the bucket's stream was out of reach through
// the server the store's connection uses, the store's requests failing for
// longer than Config.IsolationTimeout, while the connection knows other
// servers (typically a server cut off from the rest of its cluster): the
// store reconnects to another server.
type ServerIsolated struct {
	Bucket      string
	Server      string        // the server left, as its URL without credentials
	Unavailable time.Duration // how long the store's requests had been failing
	Reason      string        // what the check found
}

func (WatchStalled) isEvent()   {}
func (WatchRecovered) isEvent() {}
func (ServerIsolated) isEvent() {}

func (e WatchStalled) String() string {
	return fmt.Sprintf("bucket %q key %q: the watch has been silent for %v and is being re-created: %s",
		e.Bucket, e.Key, e.Silent.Round(time.Millisecond), e.Cause)
}

func (e WatchRecovered) String() string {
	return fmt.Sprintf("bucket %q key %q: the watch delivers again after %v of silence",
		e.Bucket, e.Key, e.Silent.Round(time.Millisecond))
}

func (e ServerIsolated) String() string {
	return fmt.Sprintf("bucket %q: JetStream unreachable through %s for %v (%s); reconnecting to another server",
		e.Bucket, e.Server, e.Unavailable.Round(time.Millisecond), e.Reason)
}
