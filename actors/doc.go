// Package actors runs work behind leases as protoactor-go actors: the
// LeaseSupervisor keeps a workload running on exactly one instance of a
// fleet, and the Watchdog keeps one held lease alive.
//
// # The tree
//
//	your supervision tree
//	└── LeaseSupervisor(lease "billing.outbox")   standby <-> leading
//	    ├── Watchdog                              renews; sends Poison to its parent
//	    └── Workload                              WorkloadFunc, WorkloadProps or WorkloadTree,
//	                                              alive only while the lease is held
//
// A LeaseSupervisor is made by NewLeaseSupervisor. Spawn its Props as a
// child anywhere (a supervision.ChildSpec.Props, for example), or call Run
// from plain Go:
//
//	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
//		Lease:    lease.Config{LeaseID: "billing.outbox", OwnerID: lease.NewOwnerID()},
//		Store:    store, // a natsstore.Store
//		Workload: actors.WorkloadFunc(dispatch),
//		Logger:   logger,
//	})
//	err = sup.Run(ctx)
//
// Standby tries to acquire, wakes on the store's watch (a lease.Watcher)
// and polls every jittered StandbyRetryInterval. Leading starts the
// Watchdog, then the Workload. Every term has an identity of its own
// (lease.Claim.Term): a LeaseSupervisor never takes over a key held by
// another term, even one with its own OwnerID.
//
// A term ends in one of four ways:
//
//   - lost: the Watchdog poisons the lease; token reads fail at once, the
//     workload's context is cancelled with a cause matching lease.ErrLost,
//     and the RestartPolicy applies once it has stopped;
//   - failed: the workload returns an error, panics or its actor fails;
//     the RestartPolicy applies (a jittered, capped backoff, or escalation
//     to the parent after too many restarts);
//   - stepped down: the workload returns nil or its actor stops itself, or
//     Resign is called; no failure is counted, and the instance stands by
//     without competing for a while, so that another takes over;
//   - shut down: the actor stops (Run's context ends).
//
// In every case the term ends only when every part of the workload has
// stopped; the lease is then released with a compare-and-swap while it is
// still valid, so that a standby takes over at once. A workload that does
// not stop within StopTimeout is reported (WorkloadStopTimeout) and its
// lease left to expire; no term starts in the process until it has stopped
// (StuckWorkloadStopped).
//
// # Operating it
//
// Status returns the state (standby, leading, stopping...), the term, the
// token, since when, the validity left, who else holds the lease, and the
// last error, without waiting for the actor. Resign steps down before a
// deploy. SupervisorConfig.Meta is published with the lease while this
// instance leads (lease.Holder.Meta), so that any process can see who
// leads and how to reach it.
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
//	acq, err := store.Acquire(ctx, lease.Claim{LeaseID: id, OwnerID: owner, Term: lease.NewTerm(), TTL: ttl})
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
// A Watchdog keeps one timer and no goroutine of its own; an idle one
// costs about 1.7 KB with its Hold (BenchmarkWatchdogFootprint).
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
//
// # Events, logs and metrics
//
// Every actor reports typed Events (Acquired, Standby, AcquisitionFailed,
// Renewed, RenewalFailed, Poisoned, Released, NotReleased, SteppedDown,
// WorkloadStopTimeout, StuckWorkloadStopped, WorkloadExited, Restarting,
// Escalated) through a hook, whether or not a logger is set; its log records
// carry lease_id, owner_id and, while leading, token. The LeaseSupervisor
// counts acquisitions, renewals, renewal failures, losses and handovers,
// keeps a leader gauge (MetricLeader) and a histogram of the validity left
// at each renewal (MetricValidityRemaining), through the OpenTelemetry
// metric API, on SupervisorConfig.MeterProvider or a no-op provider.
package actors
