package lock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

func Example() {
	store := leasetest.NewMemStore() // natsstore.Dial(...) in production
	defer store.Close()
	locker, err := lock.New(store, lock.Config{OwnerID: "billing-7"})
	if err != nil {
		panic(err)
	}
	defer locker.Close(context.Background())

	ctx := context.Background()
	g, err := locker.Acquire(ctx, "invoice.42", lock.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	token, err := g.Token()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held", g.Resource(), "by", g.OwnerID(), "with token", token)

	// The critical section runs under g.Context(), which is cancelled if
	// the lock is lost, and passes the token to every write.

	if err := g.Release(ctx); err != nil {
		fmt.Println(err)
	}
	_, err = g.Token()
	fmt.Println("after release:", err)
	// Output:
	// held invoice.42 by billing-7 with token 1
	// after release: lease: released
}
