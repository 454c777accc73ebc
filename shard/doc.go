// Package shard spreads many keyed workloads over a fleet, each running on
// exactly one instance at a time, with a fencing token: 64 partitions, 500
// tenants, a worker per region. It is the next step from a singleton
// (actors.LeaseSupervisor): each shard is one, and the instances agree on
// who should run which through nothing but the leases.
//
// # Declaring shards
//
// A Config names the fleet (Prefix), the shards (Shards, or SetShards at
// run time) and what runs for each: a function, Props or a supervision
// tree, exactly as a singleton's workload (actors.Workload). Each instance
// runs a Host with the same Config and its own OwnerID:
//
//	host, err := shard.NewHost(shard.Config{
//		Prefix:   "billing",
//		Shards:   shard.Range("tenant", 64), // tenant/0 … tenant/63
//		Lease:    lease.Config{OwnerID: podName, TTL: 10 * time.Second},
//		Store:    store, // lease.Store and shard.Directory
//		Workload: func(name string) actors.Workload {
//			return actors.WorkloadFunc(func(ctx context.Context, token lease.Token) error {
//				return consume(ctx, name) // fenced writes: actors.TokenFrom(ctx)
//			})
//		},
//	})
//	err = host.Run(ctx)
//
// # How it works
//
// Each shard s is guarded by a lease of its own, Prefix.shards.<s>, held by
// an actors.LeaseSupervisor: every guarantee of a singleton holds per shard
// (a fencing token fixed at acquisition, a workload stopped before its
// validity ends, a bounded stop, the restart policy, a term that ends only
// when its workload has stopped). Each instance also holds a membership
// lease, Prefix.members.<OwnerID>, with its Meta, and watches every lease
// under the prefix through a Directory.
//
// From the members and the shards' holders it sees, each instance computes
// the same placement (Place): balanced (every member gets S/N or S/N+1
// shards), sticky (only shards of members above their share move, the
// fewest any balanced placement needs) and stable while its moves are
// made. It runs a LeaseSupervisor for each shard placed on it and hands over
// each shard placed elsewhere: the workload stops (its context is cancelled
// with actors.ErrResigned), the lease is released, and the new member's
// standby, woken by its watch, acquires it at once. A crashed member's
// shards are taken when their leases expire. No coordinator is needed: two
// instances that see the fleet differently for a moment both compete for a
// shard, and its lease lets one of them run it; a wrong view costs balance,
// never safety.
//
// # Operating it
//
// Status lists the shards this instance runs, its view of the members and
// where the placement puts every shard. Drain hands every shard over before
// a deploy. Events (MemberJoined, ShardStarted, ShardHandedOver, Balanced…)
// reach Config.OnEvent one at a time, and metrics (MetricShardsOwned,
// MetricMovedIn, MetricTimeToBalance…) the Config's MeterProvider.
// Assess computes, from a fleet's leases, the placement and the balance
// verdict its members compute: what `aster shards` prints. A
// natsstore.Store is a Directory. docs/sharding.md explains the design.
package shard
