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
// A waiting Acquire is woken by the store's watch (lease.Watcher) as soon as
// the key is released or expires, so a handover takes one or two round
// trips; because a watch can be silent, it also polls, with exponential
// backoff and jitter up to the retry interval.
//
// Every acquisition writes its own owner ID (node ID, a random instance
// suffix fresh for each Locker, and a sequence number), so two guards never
// share an owner ID: a store lets an owner re-acquire its own key, and a
// shared ID would let two guards of one process both "hold" a lock.
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
// Each held lock has a watchdog actor (the same watchdog a
// LeaseSupervisor term has), a child of the Locker's keeper actor. It renews
// every min(RenewInterval, TTL/2). A renewal that fails with a transient
// error is retried with short backoff until the renew deadline (the
// validity minus the stop timeout); then, or at once when the store says
// the lease is lost, the watchdog poisons the guard and sends Poison to the
// keeper, which stops it. There are no panics: a poisoned guard's Token
// fails and its Context is cancelled with an error matching lease.ErrLost.
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
// Locker's own actor system, and is bounded by its context; it returns a
// *CloseError naming the locks it could not release (they expire at the
// store) and what did not stop. Calls after Close return lease.ErrClosed.
//
// # Metrics
//
// Config.MeterProvider receives two OpenTelemetry instruments: the locks
// held (MetricHeld) and how long acquisitions took, by outcome
// (MetricWait). Config.OnEvent receives the lock's events.
//
// # Scale
//
// A held lock costs a Guard, the shared state of its lease, a watchdog actor with its
// mailbox, Props and one timer, and the store's own entry; there is no
// goroutine per lock (a watchdog's renewal runs on a goroutine only while
// it runs). On the 2-core machine this was built on, that is about 2 KB per
// lock besides the store's entry, and a renewal costs the whole process
// about 12 to 15 µs of CPU time with the in-memory store. What limits a
// process is the renewal rate (locks / renew period) together with the
// garbage collector's work on a large heap: 100,000 locks renewed every
// 5 s and 500,000 renewed every 20 s kept up there; 200,000 every 5 s did
// not. Renewals are sent at a fixed period after the previous one, so locks
// taken in a burst come due in a burst. See BenchmarkHeldLocks in
// scale_bench_test.go.
package lock
