// Package leasehold is the machinery of one held lease, shared by package
// actors (the LeaseSupervisor's terms) and package lock (each Guard): the
// Hold, the shared state of one held lease, and the Watchdog actor that
// renews it and gives it up in time.
//
// Users never touch it: workloads get a read-only view (actors.Term, a
// lock.Guard) that reads the token on the clock and tells when the lease is
// lost, but cannot end, release or extend it behind its owner's back.
//
// A Hold is pessimistic: it assumes every renewal it sends may land, so its
// validity is lowered before a renewal that would end sooner is sent. The
// Watchdog renews every min(RenewInterval, TTL/2), retries a failed renewal
// with short jittered backoff until the renew deadline (validity -
// StopTimeout), and then poisons the Hold and sends Poison to its parent;
// the deadline does not wait for the store.
package leasehold

import (
	"time"

	"github.com/asterforge/aster/lease"
)

// OpTimeout bounds one acquire or release call of a lease kept with cfg:
// its renew period, so that a call never outlasts the renewals it stands
// for.
func OpTimeout(cfg lease.Config) time.Duration {
	return lease.RenewPeriod(cfg.EffectiveRenewInterval(), cfg.EffectiveTTL())
}
