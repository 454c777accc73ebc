package shardtest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/shard/shardtest"
)

// A prefix watch on a MemStore, as a shard.Host's view of its fleet uses
// one: the leases held under "fleet." when it opens, then every change to
// one of them. Leases outside the prefix are not reported.
func ExampleMemStore() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := shardtest.NewMemStore()
	defer store.Close()

	acquire := func(id, owner string) lease.Lease {
		a, err := store.Acquire(ctx, lease.Claim{LeaseID: id, OwnerID: owner, Term: owner + "-1", TTL: time.Minute})
		if err != nil || !a.Acquired {
			panic(fmt.Sprint("not acquired: ", err))
		}
		return a.Lease
	}
	show := func(ev lease.Event) {
		if ev.Kind == lease.EventHeld {
			fmt.Println(ev.LeaseID, ev.Kind, "by", ev.Holder.OwnerID)
			return
		}
		fmt.Println(ev.LeaseID, ev.Kind)
	}

	_, changes, err := store.WatchPrefix(ctx, "fleet.")
	if err != nil {
		panic(err)
	}
	acquire("other.job", "a") // outside the prefix: not reported
	member := acquire("fleet.members.a", "a")
	show(<-changes)
	acquire("fleet.shards.0", "a")
	show(<-changes)
	if err := store.Release(ctx, member); err != nil {
		panic(err)
	}
	show(<-changes)

	// A watch opened now starts from the leases held.
	current, _, err := store.WatchPrefix(ctx, "fleet.")
	if err != nil {
		panic(err)
	}
	fmt.Println("held when the second watch opened:")
	for _, ev := range current {
		show(ev)
	}
	// Output:
	// fleet.members.a held by a
	// fleet.shards.0 held by a
	// fleet.members.a free
	// held when the second watch opened:
	// fleet.shards.0 held by a
}
