package actors_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// A singleton outbox dispatcher from plain Go: Run returns after the
// workload has stopped and the lease has been released.
func ExampleLeaseSupervisor_Run() {
	store := leasetest.NewMemStore() // natsstore.Dial(...) in production
	defer store.Close()

	ctx, cancel := context.WithCancel(context.Background())
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease: lease.Config{LeaseID: "billing.outbox", OwnerID: lease.NewOwnerID(), TTL: 10 * time.Second},
		Store: store,
		Workload: actors.WorkloadFunc(func(ctx context.Context, token lease.Token) error {
			fmt.Println("dispatching with token", token)
			cancel() // for the example: shut down at once
			<-ctx.Done()
			fmt.Println("stopped:", context.Cause(ctx))
			return nil
		}),
		OnEvent: func(ev actors.Event) {
			if r, ok := ev.(actors.Released); ok {
				fmt.Println("released token", r.Token)
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("run:", sup.Run(ctx))
	// Output:
	// dispatching with token 1
	// stopped: supervision: shutdown
	// released token 1
	// run: <nil>
}
