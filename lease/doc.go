// Package lease is the contract between Aster's lease actors and the stores
// that keep leases: configuration, the Store interface, fencing tokens and
// the errors every store reports.
//
// It has no actors and imports no NATS: a store adapter (such as natsstore)
// translates its backend's answers into this package's types and errors, and
// the actors in package actors build on nothing else.
//
// # Leases
//
// A lease names one singleton (a scheduler, an outbox dispatcher) or one
// critical section. An owner acquires it for a TTL, renews it before the TTL
// runs out, and releases it with a compare-and-swap when it is done. While
// another owner holds it, Acquire answers with the current owner instead.
//
// # Owners and terms
//
// Claim.OwnerID names the instance that asks, for people (a pod name, or
// NewOwnerID). Claim.Term identifies one tenure: each acquisition a
// supervisor starts, each lock guard, draws a fresh one with NewTerm. Stores
// tell holders apart by term, never by OwnerID: a lease held by another
// term is held, even when both terms carry the same OwnerID (two supervisors
// in one process, two processes configured with one pod name). An Acquire
// whose outcome was unknown is retried with the same Term, and the store
// recognises its own write by it.
//
// # Fencing tokens
//
// Every acquisition yields a Token that is strictly greater than the token of
// every earlier acquisition of the same lease, across owners, releases,
// expiries and store restarts. A token does not change on renewal. Give it,
// with its term (a Tenure), to every downstream write, and let the
// downstream system reject writes whose token is lower than the highest it
// has seen, or equal to it from another term (see Fence): a paused or
// partitioned former owner can then never overwrite a newer owner's work.
//
// # Validity
//
// An owner must stop acting before its lease can expire at the store. Config
// carries a SafetyMargin (clock-rate drift) and a StopTimeout (time to stop
// the workload); see Config.ValidUntil and Config.RenewDeadline.
//
// # Observing
//
// Any process, candidate or not, can learn who holds a lease through a
// store's Watcher: Leader answers once, Observe reports the current holder
// and every change (another term acquired it, or it became free), like
// etcd's Election.Leader and Observe. A store that is also a Reader (as
// natsstore's is) gives the current state at once. Holder.Meta carries
// what the holder published with it (an address, a pod name).
//
// # Conformance
//
// Package leasetest holds the suite every Store must pass and an in-memory
// Store with an injectable clock for tests.
package lease
