package main

import (
	"context"
	"fmt"
	"time"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/shard"
	"github.com/asterforge/aster/supervision"
)

// shardNames are the shards of shard mode: s/0 … s/<n-1>.
func shardNames(n int) []string { return shard.Range("s", n) }

// shardHost runs a shard.Host of the fleet named by -lease, with -shards
// shards, until ctx is done; then it drains. Each shard's workload writes
// through the fence every -write-every with the shard's tenure, under the
// shard's lease ID (shard.ShardKey), as the supervisor mode's workload
// does for its lease. Every store operation of the Host (membership and
// shard leases) is recorded; the Host watches the fleet through the store
// itself (natsstore is a shard.Directory).
func (e *env) shardHost(ctx context.Context) error {
	o := e.o
	owner := o.owner
	if owner == "" {
		owner = lease.NewOwnerID()
	}
	cfg := lease.Config{OwnerID: owner, TTL: o.ttl, RenewInterval: o.renew, StandbyRetryInterval: o.standby}
	host, err := shard.NewHost(shard.Config{
		Prefix:    o.leaseID,
		Shards:    shardNames(o.shards),
		Lease:     cfg,
		Store:     record.NewStore(e.store, e.log, o.proc, cfg, nil),
		Directory: e.store,
		Meta:      map[string]string{"proc": o.proc},
		Restart: actors.RestartPolicy{Backoff: supervision.Backoff{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond},
			Intensity: supervision.Unlimited},
		Workload: func(name string) actors.Workload {
			key := shard.ShardKey(o.leaseID, name)
			sup := o.proc + "/" + name
			return actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
				term, _ := actors.TermFrom(ctx)
				return e.workWith(ctx, key, sup, owner, term.Tenure)
			})
		},
		OnEvent: func(ev shard.Event) {
			switch ev := ev.(type) {
			case shard.MemberJoined, shard.MemberLeft, shard.ShardQuarantined, shard.Balanced:
				fmt.Printf("shard event: %T %+v\n", ev, ev)
			case shard.ShardHandedOver:
				if ev.Err != nil {
					fmt.Printf("shard event: %T %+v\n", ev, ev)
				}
			}
		},
	})
	if err != nil {
		return err
	}
	if err := host.Run(ctx); err != nil {
		return fmt.Errorf("shard host %s (%s): %w", o.proc, owner, err)
	}
	return nil
}
