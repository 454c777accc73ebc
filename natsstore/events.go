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
	Reason string
}

// CorruptKey reports a value under a lease key that is not a lease this
// package wrote. Nobody can take the lease until an operator deletes the key
// (nats kv del BUCKET KEY), and then for the bucket's maximum lease TTL.
type CorruptKey struct {
	Bucket   string
	Key      string
	Revision uint64
	Reason   string
}

// SessionEnded reports that the store ended a session to take a lease held
// under it: it judged the session ended (its key unchanged for its TTL,
// vanished, or released) and wrote a release marker over the session's key
// at the revision it judged, which its holder, were it alive, would have
// written over. The holder's next renewal reports lease.ErrLost.
type SessionEnded struct {
	Bucket   string
	Session  string // the session's key
	Owner    string // the session's owner, as the lease under it names it
	Term     string // the session's term
	Revision uint64 // the release marker's revision
	Lease    string // the lease taken under it
}

func (SessionEnded) isEvent() {}

func (e SessionEnded) String() string {
	return fmt.Sprintf("ended session %q (owner %s, term %s) in bucket %q at revision %d, to take lease %q held under it",
		e.Session, e.Owner, e.Term, e.Bucket, e.Revision, e.Lease)
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
	return fmt.Sprintf("bucket %q: expiry is judged by observation: %s", e.Bucket, e.Reason)
}

func (e CorruptKey) String() string {
	return fmt.Sprintf("key %q in bucket %q at revision %d is not an aster lease (%s); delete it: nats kv del %s %s "+
		"(nobody may take it then for the bucket's maximum lease TTL: its last holder may still be acting)",
		e.Key, e.Bucket, e.Revision, e.Reason, e.Bucket, e.Key)
}

// emit hands ev to Config.OnEvent, if set.
func (w *writes) emit(ev Event) {
	if w.cfg.OnEvent != nil {
		w.cfg.OnEvent(ev)
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

// BucketUnusable reports that the store stopped because its bucket, or the
// server that keeps it, changed under it: deleted, re-created, edited into
// an unsafe configuration, or downgraded while ExpiryServer was required.
// Every later call fails with a *BucketError, which matches
// lease.ErrStoreConfig.
type BucketUnusable struct {
	Bucket  string
	Problem Problem
	Reason  string
}

// SequenceRegression reports that the bucket issued or showed a revision
// below one the store had already seen: the server lost acknowledged
// writes, or was restored from an older copy, and could issue a fencing
// token twice. The store stops, as after BucketUnusable.
type SequenceRegression struct {
	Bucket  string
	Key     string // the key where it showed, "" for the stream's last revision
	Highest uint64 // the highest revision the store had seen
	Got     uint64 // the lower revision it was given
}

// StaleRead reports that a read of a replicated bucket showed a key (or
// the stream's end, Key "") at a revision below one the store had seen:
// usually a stream leader deposed without knowing it yet, answering from
// its old state. The read fails with lease.ErrUnavailable and its caller
// retries; if it persists for 30 s, the store takes it for lost writes and
// stops (SequenceRegression). It is reported once per spell.
type StaleRead struct {
	Bucket  string
	Key     string
	Highest uint64 // the highest revision the store had seen
	Got     uint64 // the lower revision it was shown
}

// KeyVanished reports a lease key that disappeared without a release: a
// delete or purge marker that no owner wrote, or an empty subject where the
// store had seen a value (a stream-level purge leaves no marker). Nobody
// takes the lease through this store until the bucket's maximum lease TTL
// (Store.MaxTTL) has passed since it saw the key vanish, since the holder
// may act until its own TTL runs out.
type KeyVanished struct {
	Bucket   string
	Key      string
	Revision uint64 // the marker's revision, or the last revision seen before the subject emptied
	Emptied  bool   // the subject is empty: no marker was left
}

// BucketDegraded reports, when the store opens, that its bucket lacks
// something a guarantee rests on: a recorded maximum lease TTL. Leases
// work; Reason says what is weaker and how to fix it.
type BucketDegraded struct {
	Bucket string
	Reason string
}

func (BucketUnusable) isEvent()     {}
func (SequenceRegression) isEvent() {}
func (StaleRead) isEvent()          {}
func (KeyVanished) isEvent()        {}
func (BucketDegraded) isEvent()     {}

func (e BucketUnusable) String() string {
	return fmt.Sprintf("bucket %q is unusable (%s): %s; the store stopped", e.Bucket, e.Problem, e.Reason)
}

func (e SequenceRegression) String() string {
	where := atRevision(e.Key)
	return fmt.Sprintf("bucket %q: %s at revision %d, below revision %d seen before: the server lost "+
		"acknowledged writes; the store stopped", e.Bucket, where, e.Got, e.Highest)
}

func (e StaleRead) String() string {
	where := atRevision(e.Key)
	return fmt.Sprintf("bucket %q: a read shows that %s at revision %d, below revision %d seen before: taken for a "+
		"stale answer and retried; the store stops if it lasts %v", e.Bucket, where, e.Got, e.Highest, regressionPersists)
}

func (e KeyVanished) String() string {
	how := fmt.Sprintf("was deleted or purged (marker at revision %d)", e.Revision)
	if e.Emptied {
		how = fmt.Sprintf("was emptied without a marker (last revision seen %d; a stream purge?)", e.Revision)
	}
	return fmt.Sprintf("bucket %q key %q %s without a release; it is free once the bucket's maximum lease TTL "+
		"has passed", e.Bucket, e.Key, how)
}

func (e BucketDegraded) String() string {
	return fmt.Sprintf("bucket %q: %s", e.Bucket, e.Reason)
}

// WatchStalled reports a watch that fell silent: its consumer sent
// nothing, not even a heartbeat, for a check interval, or the key changed
// and the watch did not deliver the change (found by the liveness check, see
// Config.WatchCheckInterval), or a lost watch could not be re-created for
// longer than a check interval. Meanwhile the watch reports only what it
// reads of its keys after seeing them written (if the user may subscribe to
// the keys' subjects, see Store.Watch), and standbys that rely on it poll.
// The store keeps re-creating the watch and reports WatchRecovered when it
// delivers again.
type WatchStalled struct {
	Bucket string
	// Key is the key watched, or the prefix followed by ">" for a
	// WatchPrefix.
	Key string
	// Silent is how long the watch is known to have been silent: since its
	// consumer last sent anything, since the check that first read a
	// revision it had not delivered, or since the watch was lost.
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
	Key    string        // as in WatchStalled
	Silent time.Duration // how long the watch was silent in all
}

// ServerIsolated reports that the bucket's stream was out of reach through
// the server the store's connection uses, the store's requests failing for
// Config.IsolationTimeout (a quarter of it when the only stream leader that
// server reaches was cut off from its replicas), while the connection knows
// other servers (typically a server cut off from the rest of its cluster):
// the store reconnects to another server.
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
