package lock_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

// A process that holds many locks holds them under one session: one lease,
// renewed once per period, whatever the number of locks.
func ExampleConfig_session() {
	store := leasetest.NewMemStore() // natsstore.Dial(...) in production
	defer store.Close()
	locker, err := lock.New(store, lock.Config{OwnerID: "billing-7", Session: true})
	if err != nil {
		panic(err)
	}
	defer locker.Close(context.Background())

	ctx := context.Background()
	for _, invoice := range []string{"invoice.42", "invoice.43", "invoice.44"} {
		g, err := locker.Acquire(ctx, invoice)
		if err != nil {
			fmt.Println(err)
			return
		}
		token, _ := g.Token()
		fmt.Println("held", g.Resource(), "with token", token, "under a session:",
			strings.HasPrefix(g.Session(), "session."))
	}
	fmt.Println("locks held:", locker.Held())
	// Output:
	// held invoice.42 with token 2 under a session: true
	// held invoice.43 with token 3 under a session: true
	// held invoice.44 with token 4 under a session: true
	// locks held: 3
}
