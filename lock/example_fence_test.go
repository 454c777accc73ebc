package lock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

func ExampleGuard_Fenced() {
	store := leasetest.NewMemStore()
	defer store.Close()
	ctx := context.Background()
	locker, _ := lock.New(store, lock.Config{OwnerID: "node-a"})
	defer locker.Close(ctx)

	var fence lease.Fence // guards a downstream resource
	write := func(token lease.Token) error {
		fmt.Println("write with token", token)
		return nil
	}

	first, _ := locker.Acquire(ctx, "ledger")
	_ = first.Fenced(&fence, write)
	stale := first.Tenure() // a holder that pauses keeps its token...
	_ = first.Release(ctx)

	second, _ := locker.Acquire(ctx, "ledger")
	_ = second.Fenced(&fence, write)

	// ...and when it wakes up, the fence refuses its write.
	err := fence.Do(stale, func() error { return write(stale.Token) })
	fmt.Println("stale write refused:", errors.Is(err, lease.ErrStaleToken))
	st := fence.Stats()
	fmt.Printf("Highest token %d, accepted %d, rejected %d\n", st.Highest.Token, st.Accepted, st.Rejected)
	_ = second.Release(ctx)
	// Output:
	// write with token 1
	// write with token 3
	// stale write refused: true
	// Highest token 3, accepted 2, rejected 1
}
