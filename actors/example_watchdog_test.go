package actors_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// A held lease kept alive by a Watchdog, as a lock's Guard does: read the
// token before each fenced write, extend, and release.
func ExampleWatchdogProps() {
	ctx := context.Background()
	store := leasetest.NewMemStore()
	defer store.Close()
	quiet := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()

	cfg := lease.Config{LeaseID: "orders.42", OwnerID: lease.NewOwnerID(), TTL: 10 * time.Second}
	sent := time.Now() // before the request: validity counts from here
	acq, err := store.Acquire(ctx, lease.Claim{LeaseID: cfg.LeaseID, OwnerID: cfg.OwnerID, Term: lease.NewTerm(), TTL: cfg.TTL})
	if err != nil || !acq.Acquired {
		fmt.Println("not acquired", err)
		return
	}
	hold, err := actors.NewHold(cfg, acq.Lease, sent)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Spawned from the root here; spawn it from an actor to receive its
	// Poison message.
	dog := sys.Root.Spawn(actors.WatchdogProps(store, hold, cfg, nil, nil))

	token, err := hold.Token()
	fmt.Println("token", token, err)

	res, err := actors.RequestExtend(ctx, sys.Root, dog, time.Minute)
	fmt.Println("extended to", res.Lease.TTL, err)

	hold.MarkReleased()
	_ = sys.Root.StopFuture(dog).Wait()
	fmt.Println("released:", actors.ReleaseHold(ctx, store, hold))
	_, err = hold.Token()
	fmt.Println("token after release:", err)
	// Output:
	// token 1 <nil>
	// extended to 1m0s <nil>
	// released: <nil>
	// token after release: actors: lease released
}
