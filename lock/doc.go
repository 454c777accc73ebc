// Package lock is a distributed lock with fencing tokens, kept as leases in
// a lease.Store (NATS JetStream KV through natsstore, or an in-memory store
// in tests).
//
// # Locks
//
// A Locker holds locks for one process. Acquire blocks until the lock is
// held or its context ends; TryAcquire makes one attempt:
//
//	locker, err := lock.New(store, lock.Config{OwnerID: "billing-7"})
//	defer locker.Close(context.Background())
//
//	g, err := locker.Acquire(ctx, "invoice.42", lock.WithTTL(10*time.Second))
//	if err != nil { ... }
//	defer g.Release(context.Background())
//
// Acquire tries at once, and opens no watch when the lock is free: an
// uncontended Acquire and Release are the store's two writes. A waiting
// Acquire is woken by the store's watch (lease.Watcher) as soon as the key
// is released or expires (or, for a lock held under a session, the session
// ends), so a handover takes one or two round trips; because a watch can be
// silent, it also polls, with exponential backoff and jitter up to the
// retry interval.
//
// The Acquire calls of one Locker that wait for one resource queue up, first
// come first served: only the first contends at the store, so that a
// handover wakes one contender per Locker, not every waiter (a herd of 100
// candidates in 4 processes is 4 contenders), and a guard released by its
// own Locker hands the lock to that Locker's next waiter at once. Across
// Lockers there is no order: the first to write wins.
//
// Every acquisition writes its own owner ID (node ID, a random instance
// suffix fresh for each Locker, and a sequence number), so two guards never
// share an owner ID: a store lets an owner re-acquire its own key, and a
// shared ID would let two guards of one process both "hold" a lock. All
// attempts of one Acquire write the same owner ID, so a retry after an
// attempt whose outcome the store could not tell takes the key over if that
// attempt had landed (with a new, larger token).
//
// # Sessions
//
// With Config.Session, a Locker holds its locks under one session, as
// etcd's concurrency.Mutex holds its keys under a session's lease: the
// session is a lease of its own (key Prefix+"session."+term), opened by
// the first acquisition that needs it and renewed by one watchdog; each
// lock key is written once, without a TTL, naming the session. Holding a
// lock then costs no renewal of its own, whatever the number of locks:
//
//	locker, err := lock.New(store, lock.Config{OwnerID: "billing-7", Session: true})
//
// A lock under the session keeps its own fencing token (its key's
// revision) and is valid while the session is; when the session is lost
// (its renewals fail until the renew deadline, or the store says it is
// gone), every lock under it is lost at once, and the next acquisition opens
// a new session. Contenders take a lock once its session has ended:
// released, expired, or deleted by hand and the store's wait for vanished
// keys passed. A lock that must expire on its own, or that Extend may
// change, takes WithOwnLease (or WithTTL): a lease and a watchdog of its
// own. Close releases the session, which frees all its locks in one write,
// then deletes their keys. Never delete a lock key held under a session by
// hand: its holder would not learn it (delete the session's key instead);
// see docs/guarantees.md.
//
// # Guards
//
// A Guard is one held lock. Token returns its fencing token, and fails once
// the lock is lost, released or expired. Lost is closed and Context is
// cancelled, with the cause, when the guard ends. Remaining gives the
// validity left. Extend renews at once with a new TTL, which the watchdog
// then keeps using. Release deletes the key with a compare-and-swap on the
// revision of the last renewal, so it never deletes a newer owner's key; it
// is idempotent.
//
// # Watchdog and poison
//
// Each held lock with a lease of its own has a watchdog actor (the same
// watchdog a LeaseSupervisor term has), a child of the Locker's keeper
// actor, started min(100 ms, a quarter of the renew period) after the
// acquisition (a lock released sooner never has one; the first renewal is
// due a renew period after the acquisition whenever it starts). It renews
// every min(RenewInterval, TTL/2). A session has one such watchdog; the
// locks under it have none. A renewal that fails with a transient
// error is retried with short backoff until the renew deadline (the
// validity minus the stop timeout); then, or at once when the store says
// the lease is lost, the watchdog poisons the guard and sends Poison to the
// keeper, which stops it. There are no panics: a poisoned guard's Token
// fails and its Context is cancelled with an error matching lease.ErrLost.
//
// A lock lost at its renew deadline (the store did not answer) leaves its
// key behind, and natsstore keeps a key for a grace past its TTL, while
// the waiters that met the outage count the TTL again from when the store
// is back. So the Locker gives such a key back in the background: from the
// lock's TTL after its last write (when a store without a grace would have
// expired it) until twice that, it releases the key with a
// compare-and-swap on that write's revision, and waiters take it at once.
// A lock taken over or expired meanwhile is left alone. A session lost so
// is given back the same way, which frees the locks under it. Close stops
// these releases.
//
// # Fencing
//
// A lock alone cannot protect a resource from a holder that was paused (a
// GC pause, a stopped VM) past its validity: it may still act after another
// owner took over. The fencing token fixes that. Every acquisition's token
// is greater than every earlier one's; pass it with every write, and let the
// resource refuse a token lower than the highest it has accepted.
//
// In process, lease.Fence does exactly that, and Guard.Fenced reads the
// token and writes through a fence:
//
//	var fence lease.Fence
//	err := g.Fenced(&fence, func(token lease.Token) error { return write(token) })
//	// errors.Is(err, lease.ErrStaleToken): a newer owner has written
//
// In SQL, keep the highest token in the row and let the write check it:
//
//	UPDATE accounts SET balance = $1, fence = $2
//	 WHERE id = $3 AND fence <= $2
//
// "0 rows updated" (for an existing row) is a rejection: a newer owner has
// written. Insert new rows with the token as their fence. The check and the
// write are one statement, so no interleaving can let a stale write in.
//
// In a NATS KV bucket, keep the token in the value and write with a
// compare-and-swap on the revision you read, retrying when someone wrote in
// between:
//
//	for {
//		e, err := kv.Get(ctx, key)                 // (handle ErrKeyNotFound with kv.Create)
//		cur := decode(e.Value())
//		if token < cur.Fence {
//			return lease.ErrStaleToken             // a newer owner has written
//		}
//		next := encode(value{Fence: token, ...})
//		_, err = kv.Update(ctx, key, next, e.Revision())
//		if errors.Is(err, jetstream.ErrKeyExists) { // changed since we read it: read again
//			continue
//		}
//		return err
//	}
//
// The test TestFenceNATSKVCompareAndSwap runs this against a real server
// with a stale owner.
//
// # Closing
//
// Locker.Close releases every lock still held, stops the watchdogs and the
// Locker's own actor system (if it was started), and is bounded by its context; it returns a
// *CloseError naming the locks it could not release (they expire at the
// store) and what did not stop. Calls after Close return lease.ErrClosed.
//
// # Metrics
//
// Config.MeterProvider receives two OpenTelemetry instruments: the locks
// held (MetricHeld) and how long acquisitions took, by outcome
// (MetricWait). Config.OnEvent receives the lock's events (Event):
// LockAcquired, LockRenewed, LockRenewalFailed, LockPoisoned, LockReleased
// and LockNotReleased.
//
// # Scale
//
// A held lock with a lease of its own costs a Guard, the shared state of
// its lease, a watchdog actor with its mailbox, Props and one timer, and
// the store's own entry; there is no goroutine per lock (a watchdog's
// renewal runs on a goroutine only while it runs), about 2 KB per lock
// besides the store's entry. Each renewal is a write to the store: against
// a real nats-server (BenchmarkHeldLocksNATS, client and server in one
// process, on the 2-core machine this was built on), a renewal costs about
// 60 µs of CPU time, client and server together, so 10,000 locks at the
// default TTL (a renewal every 10 s) take about 0.04 cores. (Against the
// in-memory store, BenchmarkHeldLocks, a renewal costs 12 to 15 µs: the
// store's and the network's share is the larger one.) What limits a
// process is the renewal rate (locks / renew period) together with the
// garbage collector's work on a large heap; renewals are sent at a fixed
// period after the previous one, so locks taken in a burst come due in a
// burst.
//
// Under a session (Config.Session) a held lock costs a Guard, the state of
// its lease under the session and the store's entry, about 0.8 to 1.5 KB
// (the server's memory included), and no CPU time while it is held: 10,000
// and 100,000 locks under one session took about 0.001 and 0.002 cores,
// client and server together, the session's renewal every 10 s. See
// docs/benchmarks.md for the figures of the last make bench, and its
// comparison with etcd.
//
// New does not touch the store and starts nothing. The Locker's actor
// system (a few milliseconds of CPU time to start), unless Config.System
// gives one to share, is started by the first watchdog that is due, or by
// the session's; a short-lived Locker whose locks are released before
// their watchdog is due starts none, so its whole life (New, Acquire,
// Release, Close) costs about the two store writes. There is no
// package-level actor system: a Locker never shares state with another
// unless it is given a System.
package lock
