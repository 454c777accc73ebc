// Package singleton carries requests to whichever instance leads a lease,
// over NATS request/reply: a scheduler, a sequencer or an outbox dispatcher
// runs on one instance (an actors.LeaseSupervisor), and every instance, or
// any other service, can ask it something.
//
// # The leader's side
//
// Serve runs inside the leader's workload. It subscribes to the lease's
// subject (Subject) when the term starts and drains the subscription before
// the term ends: a term ends only when its workload has stopped, so no
// request is taken after the term's lease was released. Each request is
// handled with the term's token checked on the clock, as actors.TokenFrom
// does: a request that reaches a term past its validity (a process paused
// past its TTL, a term stepping down) is refused with StatusNotLeading,
// never handled. Replies carry the token and term of the tenure that
// answered. Props does the same for a workload written as an actor.
//
// # The caller's side
//
// A Client sends from any process, leader or not, leasing or not. During a
// handover or a crash it waits for the next leader, woken by the lease's
// watch (a lease.Watcher) rather than by blind retries, and sends again,
// within the caller's deadline. Requests waiting for a leader are
// bounded (ClientConfig.MaxPending) with an explicit policy for a full
// buffer (Overflow).
//
// # Delivery
//
// Delivery is at least once: a request whose reply was lost (the leader
// crashed while handling it) is sent again to the next leader, with the
// same request ID. A handler that must apply each request once checks the
// ID: Dedupe does it with an IDStore (NewMemIDStore for one process,
// NewKVIDStore for a fleet), and a handler that writes to a database does it
// best by recording the ID in the same transaction as the effect. See
// docs/guarantees.md for what a caller sees in each failure.
package singleton
