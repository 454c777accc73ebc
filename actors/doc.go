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
//     without competing for a while, so that another takes over: after a
//     workload's step down, for StandbyRetryInterval or until another
//     term has taken the lease, whichever comes first; after Resign, for
//     the time it names;
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
// # The workload's view
//
// A workload reads its term through a Term (Granted.Term for an actor,
// TermFrom(ctx) for a function; TokenFrom(ctx) for just the token): the
// token checked on the clock, the tenure for a lease.Fence, the validity
// left and a channel closed when the lease is lost. It cannot end, release
// or extend the lease: the supervisor's Watchdog child renews it, and the
// supervisor alone ends the term. The machinery (the Hold and the Watchdog,
// shared with package lock) is not part of the API.
//
// # Timing
//
// With the lease.Config of a lease: the owner may act until ValidUntil =
// (send time of the last successful acquire or renew) + TTL - SafetyMargin,
// or earlier: a Hold assumes that every renewal it sends may land, so a
// renewal with a shorter TTL lowers ValidUntil before it is sent.
// The Watchdog renews every min(RenewInterval, TTL/2) (at least 1 ms),
// re-derived after each renewal; retries a failed renewal with short
// jittered backoff; and poisons at the renew deadline, ValidUntil -
// StopTimeout, which leaves StopTimeout to stop the workload before
// another owner can acquire.
//
// A term poisoned at the renew deadline because the store did not answer
// (lease.LossDeadline) lapses rather than releasing: its workload stops,
// and the standby renews the lease with a compare-and-swap on its last
// write's revision until the store answers (or until that write's send
// time + 2 × TTL, Status.ResumableUntil). If the store kept it (a stream election shorter than the TTL),
// the term resumes with the same token (Acquired.Resumed): no handover.
//
// # Events, logs and metrics
//
// Every actor reports typed Events (Acquired, Standby, AcquisitionFailed,
// Renewed, RenewalFailed, Poisoned, Released, NotReleased, SteppedDown,
// WorkloadStopTimeout, StuckWorkloadStopped, WorkloadExited, Restarting,
// GaveUp) through a hook, whether or not a logger is set; its log records
// carry lease_id, owner_id and, while leading, token. The LeaseSupervisor
// counts acquisitions, renewals, renewal failures, losses and handovers,
// keeps a leader gauge, a histogram of the validity left at each renewal
// and one of the round trip of each acquisition attempt, through the
// OpenTelemetry metric API, on
// SupervisorConfig.MeterProvider or a no-op provider; the instruments are
// named aster.lease.* (docs/operations.md lists them).
package actors
