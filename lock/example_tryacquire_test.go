package lock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

func ExampleLocker_TryAcquire() {
	store := leasetest.NewMemStore()
	defer store.Close()
	ctx := context.Background()
	a, _ := lock.New(store, lock.Config{OwnerID: "node-a"})
	defer a.Close(ctx)
	b, _ := lock.New(store, lock.Config{OwnerID: "node-b"})
	defer b.Close(ctx)

	if _, err := a.TryAcquire(ctx, "report.daily"); err != nil {
		fmt.Println(err)
		return
	}
	_, err := b.TryAcquire(ctx, "report.daily")
	var held *lock.HeldError
	if errors.As(err, &held) {
		fmt.Println("held:", errors.Is(err, lock.ErrHeld), "by", held.Owner)
	}
	// Output:
	// held: true by node-a
}
