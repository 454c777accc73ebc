package natsstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/natsstore/embedded"
)

// Take a lease, renew it, and hand it to a standby that watches for its
// release.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// An in-process server; in production, Dial your servers instead.
	srv, err := embedded.Start(ctx, embedded.Config{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	store, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, natsstore.Config{})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	a, err := store.Acquire(ctx, lease.Claim{LeaseID: "billing.outbox", OwnerID: "owner-a", Term: "term-owner-a", TTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("owner-a acquired:", a.Acquired)
	held, err := store.Renew(ctx, a.Lease)
	if err != nil {
		panic(err)
	}
	fmt.Println("token unchanged by renewal:", held.Token == a.Lease.Token)

	b, err := store.Acquire(ctx, lease.Claim{LeaseID: "billing.outbox", OwnerID: "owner-b", Term: "term-owner-b", TTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("owner-b acquired:", b.Acquired, "- held by", b.Holder.OwnerID)

	events, err := store.Watch(ctx, "billing.outbox")
	if err != nil {
		panic(err)
	}
	if err := store.Release(ctx, held); err != nil {
		panic(err)
	}
	for ev := range events {
		if ev.Kind == lease.EventFree {
			break
		}
	}
	b, err = store.Acquire(ctx, lease.Claim{LeaseID: "billing.outbox", OwnerID: "owner-b", Term: "term-owner-b", TTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("owner-b acquired after the release:", b.Acquired, "with a larger token:", b.Lease.Token > a.Lease.Token)
	// Output:
	// owner-a acquired: true
	// token unchanged by renewal: true
	// owner-b acquired: false - held by owner-a
	// owner-b acquired after the release: true with a larger token: true
}
