// Package grains runs protoactor-go's virtual actors (grains) on the NATS
// you already run: a cluster.ClusterProvider whose membership is a lease per
// member, and a cluster.IdentityLookup in which every activation holds a
// lock, with a fencing token, under its member's session.
//
// # Membership
//
// Each member holds the lease Prefix+".members.<member ID>" (an
// actors.LeaseSupervisor), with its host, port and kinds in the lease's
// metadata, and watches every lease under Prefix+".members." (the store's
// WatchPrefix). A member is in protoactor's member list while the watch
// shows its lease held: a graceful leave releases it at once; a crashed or
// cut-off member leaves when the store reports its lease expired (with
// natsstore, its TTL plus ExpiryGrace after its last renewal). No expiry
// rule of this package's own decides it.
//
// # Activations
//
// An activation of kind/identity holds the lock Prefix+".grain.<kind>.<identity>"
// (kind and identity escaped into lease-ID tokens) under its member's
// session (lock.Config{Session: true}): one lease renewed per member,
// however many activations. The lock decides who may act, and one rule in
// this package applies it: a message reaches a grain only if the
// activation's lock is valid (its token can be read) when the grain starts
// handling it; otherwise the sender gets a dead letter and looks the
// identity up again. A session lost (renewals failing until its renew
// deadline, or the store saying it is gone) stops every activation under
// it before its validity ends, as every lease here does; the next call
// activates the identity elsewhere once the store lets another member take
// the lock.
//
// A grain reads its token with ActivationOf(ctx).Token() (or Tenure, for
// lease.Fence) and passes it with every write to a shared resource. The
// lock keeps two activations from acting at once while its assumptions
// hold; the fence keeps a paused or partitioned one from writing after its
// successor did, without any.
//
// # Lookups
//
// Get reads who holds the identity's lock; it asks that member first, then
// the members that host the kind in rendezvous order, each of which takes
// the lock before it activates. A lookup is bounded by
// Config.ActivationTimeout. Member.Request wraps protoactor's call with
// clear errors (ErrUnknownKind at once) and retries, with a fresh lookup,
// calls that reached an activation no longer valid, until its context ends.
package grains
