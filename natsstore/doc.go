// Package natsstore keeps leases in a NATS JetStream key-value bucket: a
// lease.Store with the lease.Watcher capability, and the shard.Directory of
// a sharded fleet (WatchPrefix).
//
// # Opening a store
//
// Dial connects with DialOptions (server URLs, credentials file, nkey seed,
// user and password, token, TLS) and owns the connection; NewConn and New use
// a connection or a JetStream context the caller already has. All of them
// bind to Config.Bucket (default "aster_leases"), creating it when it is
// missing with the configuration leases need: History 1, file storage,
// LimitMarkerTTL (per-key TTLs and expiry markers), Config.Replicas replicas,
// the bucket's maximum lease TTL (Config.MaxTTL) in its metadata, and a first
// revision drawn from the clock, so that a bucket deleted and created again
// never issues lower fencing tokens. A created bucket is reported
// (BucketCreated, and a warning naming the JetStream domain and account): in
// production, create the bucket once (CreateBucket) and set Config.NoCreate,
// so that an instance with a wrong domain or account fails instead of
// leading a bucket of its own. An existing bucket is never changed; one whose
// configuration would break leases (History above 1, a bucket-wide TTL,
// memory storage, a discard policy that drops keys, values too small) is
// refused with ErrBucketConfig and a reason. A user without the permissions the store needs gets
// ErrPermission at once, not a timeout; refused credentials give
// ErrAuthentication; a configuration that cannot work (a missing file, a
// server that requires a client certificate, an account that requires
// Config.MaxBytes) gives a *lease.FieldError naming the field to fix.
//
// The connection Dial makes keeps reconnecting while the server refuses its
// credentials, and reads the credentials file again at every attempt: to
// rotate credentials, replace the file before they expire (see
// docs/nats.md). Until a refused connection is accepted again, operations
// fail with ErrAuthentication, and Config.OnEvent receives
// AuthenticationFailed and then AuthenticationRecovered.
// DialOptions.RetryConnect retries the first connection until ctx ends.
//
// The package embedded (a separate import, so that this one never compiles
// nats-server) runs a server inside the process for demos and tests.
//
// # Operations
//
// Each key holds one line of text naming the owner, the token, the TTL and
// the acquisition time (see record.go). In the common case every operation
// is one round trip:
//
//   - Acquire and Renew publish to $KV.<bucket>.<key> with the expected last
//     subject sequence and a per-message TTL (never kv.Update, which drops
//     the TTL). The token is the revision of the acquiring write; renewals
//     keep it.
//   - Release writes a delete marker at the held revision (never revision
//     0), carrying a release record, so that contenders know the owner let
//     go.
//
// A compare-and-swap on a revision cannot tell owners apart, so Renew and
// Release check who wrote the lease's revision: the store knows when it made
// that write itself, and reads the key otherwise.
//
// # Expiry
//
// A contender judges a lease expired when it has seen the key's revision
// unchanged for the lease's TTL on its own monotonic clock, counted from the
// read or the watch event that first showed it, never by comparing clocks of
// different machines (the method of Kubernetes leader election); Acquire
// then takes it with a compare-and-swap on that revision, which fails if the
// holder renewed meanwhile. An Acquire that fails (the store did not answer,
// or refused every write) starts that count again at the next sighting:
// whatever failed the contender may have failed the holder's renewals too,
// and the holder renews as soon as the store answers again.
//
// With nats-server 2.11 or later and a bucket with LimitMarkerTTL
// (ExpiryServer mode), every held value also carries a per-message TTL: the
// lease's TTL plus Config.ExpiryGrace (one TTL by default), rounded up to
// whole seconds (TTLs under one second are refused). The server removes a
// lease nobody renewed or took within it, and writes a marker that watchers
// see. The grace is what lets a holder that stopped at its renew deadline
// during a store outage (a stream electing a leader takes 4 to 9 s) renew
// its lease when the store is back, keeping its term and token, although
// the outage outlasted the TTL since its last renewal. Otherwise
// (ExpiryObserved mode) leases are written without a TTL, and nothing
// removes a lease nobody takes. Config.Expiry forces either mode.
//
// # Keys changed by hand
//
// A key that vanished without a release (an operator's delete or purge, or a
// stream purge, which leaves no marker: the store notices an empty subject
// where it saw a value) is taken over only once the bucket's maximum lease
// TTL has passed since a contender saw it vanish, because the owner it was
// taken from may be acting until its own TTL runs out; that owner's next
// renewal reports lease.ErrLost. A contender that never saw the key cannot
// tell a purged key from a new one (see docs/guarantees.md). A value that is
// not a lease (garbage, a foreign value, a newer format) gives a
// *CorruptError, which matches lease.ErrCorrupt and names the command that
// deletes it; such a key is never free. Both are reported as Events
// (KeyVanished, CorruptKey).
//
// # The bucket changing under the store
//
// The store checks its bucket and the server after every reconnect, every
// 30 seconds, before it trusts an expiry marker (a bucket-wide MaxAge writes
// the same marker), and whenever an answer may mean a change (Check runs one
// now). A bucket deleted, re-created or edited into an unsafe
// configuration, a server that cannot read the bucket's storage, and a
// revision below one the store has seen (the server lost acknowledged
// writes) stop the store: every call then returns a *BucketError, which
// matches lease.ErrStoreConfig so that owners stop at once, and the store
// reports BucketUnusable or SequenceRegression. The store never creates a
// bucket it has opened. A server that lost per-message TTLs (replaced by one
// before 2.11) makes the store fall back to ExpiryObserved (ExpiryFallback),
// or stop if Config.Expiry is ExpiryServer.
//
// # Failures
//
// A connection made by Dial fails fast while disconnected (nothing is
// buffered for replay) and reconnects forever; requests in flight when the
// connection drops end at once. Every operation is bounded by its context's
// deadline, or Config.Timeout. A write whose outcome is unknown (a timeout
// after sending) is resolved by reading the key back: the value carries a
// nonce per write. A renewal that landed after its caller gave up on it
// (for instance replayed by a client that buffers while reconnecting) is
// recognised by the owner's next Renew or Release as its own.
//
// # Watching
//
// Watch reports the key's state and then every change, coalesced: a standby
// learns of a release within a millisecond or so instead of polling, and of
// each write of the holder, from which it counts the holder's TTL. A KV
// watch can fall silent without an error (its consumer lost with a server,
// or stalled by unanswered flow control), so the store keeps
// its watches alive: it re-creates a watch after every reconnect, whenever
// it ends, and when its consumer sends nothing, not even its idle heartbeat
// (every half Config.WatchCheckInterval), for an interval, with briefly
// bounded attempts retried quickly; and every Config.WatchCheckInterval it
// reads the key's last revision and re-creates a watch that has not
// delivered it (WatchStalled, then WatchRecovered). The Watch calls of one
// key in a store share one KV watch, each with its own channel.
// Events are hints: a standby still calls Acquire, and still polls now and
// then.
//
// WatchPrefix watches every key under a prefix ("billing." for
// billing.members.* and billing.shards.*) with one KV watch, whatever the
// number of keys: it returns the held keys, then every change, translated
// as Watch translates it, through a queue that keeps the latest event of
// each key (a slow receiver never blocks the watch). The watch is kept alive
// and checked as Watch's are (the check reads the last revision under the
// prefix), and a re-created watch reports every key's state again, and as
// free each key it had reported held that is gone. It is what package shard
// needs of a store (shard.Directory); this package does not import shard.
//
// # Replicated buckets
//
// A stream leader cut off from its cluster answers reads from its stale
// state until it notices, seconds later, that it lost its quorum. With more
// than one replica, a read the store acts on without a write (Acquire
// finding the lease held by another, Renew or Release finding it lost,
// Read, a revision below one already seen) is confirmed by the leader's
// account of its replicas (one stream-information request); one that
// cannot be confirmed is lease.ErrUnavailable. A write that goes unanswered
// or finds no responder (a stream electing a new leader drops it) is sent
// again within the call, so a renewal lands once the new leader is there.
//
// # Isolated servers
//
// When the bucket's stream is out of reach through the server the
// connection uses (typically a server cut off from its cluster, which keeps
// its clients), the store's requests failing for Config.IsolationTimeout
// (a quarter of it when the only stream leader that server reaches was cut
// off from its replicas), a store whose connection Dial made
// reconnects to another server (ServerIsolated), so that a holder there can
// keep renewing on the majority side.
//
// # Inspecting
//
// Read tells who holds one lease without taking it (Store is a
// lease.Reader, so lease.Leader and lease.Observe answer at once, even for
// a key never written). Leases lists every key of the bucket with its
// state (held, released, expired, deleted, purged, or not a lease), its
// holder, token, metadata, acquisition time and expiry: what
// `aster leases` prints. Neither writes anything.
//
// # Files
//
// Store (store.go) is a shell of parts; file names show them. write_*: the
// writes part, the write path (Acquire, Renew, Release in write_ops.go, their
// compare-and-swap loops in acquire and rewrite), coalesced Acquires and the
// reads the writes rest on (flight, current, stale, direct). keys_*: the
// keyBook, and the writes part's reading of keys and sessions that feeds the
// take decision of natsstore/internal/expiry (observe, judge, session); Read
// and Leases (inspect). watch_*: the watches, Watch and WatchPrefix and the
// KV watches under them (key, prefix, hub, consumer, liveness, hint).
// bucket_*: the openedBucket and the bucketChecks of it and of the server,
// whose state is the upkeep (open, error, check, isolation). Unprefixed: the
// shell and its connection (store, dial, backend), the value format (record),
// config, errors, events.
package natsstore
