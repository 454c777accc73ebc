// Package actors runs work behind leases as protoactor-go actors: the
// LeaseSupervisor keeps a workload running on exactly one instance of a
// fleet, and the Watchdog keeps one held lease alive.
//
// # Hold and Watchdog
//
// A Hold is the shared state of one held lease: its lease.Lease (whose
// revision changes on every renewal), its fencing token, its TTL and its
// validity on the monotonic clock. A Watchdog actor renews the lease of one
// Hold, and gives up (poisons the Hold and sends Poison to its parent) when
// the store says the lease is lost, or when renewals have failed until the
// renew deadline. The distributed lock and the LeaseSupervisor share them:
//
//	sent := time.Now()
//	acq, err := store.Acquire(ctx, lease.Claim{LeaseID: id, OwnerID: owner, TTL: ttl})
//	// ... acq.Acquired
//	hold, err := actors.NewHold(cfg, acq.Lease, sent)
//	dog := parentCtx.Spawn(actors.WatchdogProps(store, hold, cfg, logger, onEvent))
//
//	token, err := hold.Token()   // fails once poisoned, released or expired
//	<-hold.Lost()                // closed when poisoned or released
//	_, err = actors.RequestExtend(ctx, parentCtx, dog, 2*ttl)
//
//	hold.MarkReleased()                        // no token, no renewal from now on
//	_ = parentCtx.StopFuture(dog).Wait()       // the renewal in flight, if any, is aborted
//	err = actors.ReleaseHold(ctx, store, hold) // compare-and-swap, only while valid
//
// # Timing
//
// With the lease.Config of a lease: the owner may act until ValidUntil =
// (send time of the last successful acquire or renew) + TTL - SafetyMargin.
// The Watchdog renews every min(RenewInterval, TTL/2) (at least 1 ms),
// re-derived after each renewal; retries a failed renewal with short
// jittered backoff; and poisons at the renew deadline, ValidUntil -
// StopTimeout, which leaves StopTimeout to stop the workload before
// another owner can acquire.
package actors
