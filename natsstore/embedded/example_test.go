package embedded_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/natsstore/embedded"
)

// Run nats-server with JetStream inside the process, for development,
// demos and tests, and open a store on it.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := embedded.Start(ctx, embedded.Config{}) // a free loopback port, a temporary store
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	store, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, natsstore.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	fmt.Println("bucket", store.Bucket(), "expiry", store.Expiry())
	// Output:
	// bucket aster_leases expiry server
}
