package singleton_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/natsstore/embedded"
	"github.com/asterforge/aster/singleton"
)

// A sequencer runs on whichever instance holds its lease; any process asks
// it for the next number through a Client. In production the store is a
// natsstore.Store on the same NATS deployment, and the Client's Watcher
// is that store.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := embedded.Start(ctx, embedded.Config{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	store := leasetest.NewMemStore()
	defer store.Close()

	// The leader's side: a workload that serves while its term leads.
	serving, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	defer serving.Close()
	next := uint64(0)
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease: lease.Config{LeaseID: "sequencer", OwnerID: "instance-a", TTL: 10 * time.Second},
		Store: store,
		Workload: actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			return singleton.Serve(ctx, serving, singleton.ServeConfig{},
				func(_ context.Context, req *singleton.Request) ([]byte, error) {
					next++ // one request at a time: Serve handles them in order
					return []byte(strconv.FormatUint(next, 10)), nil
				})
		}),
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sup.Run(runCtx) }()
	defer func() { stop(); <-done }()

	// The caller's side, from any process.
	calling, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	defer calling.Close()
	c, err := singleton.NewClient(calling, singleton.ClientConfig{LeaseID: "sequencer", Watcher: store})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	for range 3 {
		rep, err := c.Request(ctx, nil) // waits for a leader, within ctx
		if err != nil {
			panic(err)
		}
		fmt.Println("number", string(rep.Data), "from the term with token", rep.Tenure.Token)
	}
	// Output:
	// number 1 from the term with token 1
	// number 2 from the term with token 1
	// number 3 from the term with token 1
}
