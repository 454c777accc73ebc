// Command handover shows two instances handing a lease over: the first
// acquires and renews it, then releases it; the second, woken by the store's
// watch, takes over at once with a larger fencing token.
//
// It runs on the in-memory store and exits by itself.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "handover:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	store := leasetest.NewMemStore()
	defer store.Close()

	const id = "demo.outbox"
	ttl := 2 * time.Second
	a, b := lease.NewOwnerID(), lease.NewOwnerID()
	fmt.Printf("instance A is %s\ninstance B is %s\n", a, b)

	first, err := store.Acquire(ctx, lease.Claim{LeaseID: id, OwnerID: a, TTL: ttl})
	if err != nil || !first.Acquired {
		return fmt.Errorf("A could not acquire: %v", err)
	}
	fmt.Printf("A leads with token %d\n", first.Lease.Token)

	standby, err := store.Acquire(ctx, lease.Claim{LeaseID: id, OwnerID: b, TTL: ttl})
	if err != nil {
		return err
	}
	fmt.Printf("B is standby; the owner is %s\n", standby.Owner)
	events, err := store.Watch(ctx, id)
	if err != nil {
		return err
	}

	held := first.Lease
	for range 3 {
		time.Sleep(200 * time.Millisecond)
		if held, err = store.Renew(ctx, held); err != nil {
			return fmt.Errorf("A could not renew: %w", err)
		}
	}
	released := time.Now()
	if err := store.Release(ctx, held); err != nil {
		return fmt.Errorf("A could not release: %w", err)
	}
	fmt.Println("A released the lease")

	for ev := range events {
		if ev.Kind != lease.EventFree {
			continue
		}
		got, err := store.Acquire(ctx, lease.Claim{LeaseID: id, OwnerID: b, TTL: ttl})
		if err != nil {
			return err
		}
		if got.Acquired {
			fmt.Printf("B leads with token %d, %v after the release\n", got.Lease.Token, time.Since(released).Round(time.Microsecond))
			return store.Release(ctx, got.Lease)
		}
	}
	return fmt.Errorf("the watch ended before B took over: %w", ctx.Err())
}
