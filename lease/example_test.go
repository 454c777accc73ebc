package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// An owner acquires a lease, renews it and releases it; a contender stands
// by meanwhile, and its acquisition gets a larger fencing token. The store
// here is the in-memory one; natsstore.Store behaves the same.
func Example() {
	ctx := context.Background()
	store := leasetest.NewMemStore()
	defer store.Close()

	claim := lease.Claim{LeaseID: "billing.outbox", OwnerID: "instance-a", Term: lease.NewTerm(), TTL: 10 * time.Second}
	a, err := store.Acquire(ctx, claim)
	if err != nil {
		panic(err)
	}
	fmt.Println("a acquired:", a.Acquired, "token", a.Lease.Token)

	bClaim := lease.Claim{LeaseID: "billing.outbox", OwnerID: "instance-b", Term: lease.NewTerm(), TTL: 10 * time.Second}
	b, _ := store.Acquire(ctx, bClaim)
	fmt.Println("b acquired:", b.Acquired, "owner", b.Holder.OwnerID)

	held, _ := store.Renew(ctx, a.Lease) // the token stays, the revision moves
	fmt.Println("a renewed: token", held.Token, "revision", held.Revision)
	_ = store.Release(ctx, held)

	b, _ = store.Acquire(ctx, bClaim)
	fmt.Println("b acquired:", b.Acquired, "token", b.Lease.Token)

	// A release with an old revision changes nothing: it can never delete
	// a newer owner's key.
	err = store.Release(ctx, held)
	fmt.Println("a's second release:", errors.Is(err, lease.ErrLost))

	// Output:
	// a acquired: true token 1
	// b acquired: false owner instance-a
	// a renewed: token 1 revision 2
	// b acquired: true token 4
	// a's second release: true
}

// A Fence guards a downstream resource: it admits a write only if its token
// is above the highest it has admitted, or equal to it from the same term,
// so a former owner that still believes it holds the lease (paused,
// partitioned) is turned away.
func ExampleFence() {
	var fence lease.Fence // the zero Fence is ready to use
	first := lease.Tenure{Token: 7, Term: "a1"}
	second := lease.Tenure{Token: 12, Term: "b1"}

	fmt.Println(fence.Admit(first))  // the first owner writes
	fmt.Println(fence.Admit(first))  // and again
	fmt.Println(fence.Admit(second)) // a newer owner writes
	err := fence.Admit(first)        // the first owner, thawed, tries again
	fmt.Println(err, errors.Is(err, lease.ErrStaleToken))
	fmt.Printf("%+v\n", fence.Stats())

	// Output:
	// <nil>
	// <nil>
	// <nil>
	// lease: stale fencing token: 7 < 12 true
	// {Highest:{Token:12 Term:b1} Accepted:3 Rejected:1}
}

// Do checks the token and writes under one lock, so that no newer owner's
// write can slip in between the check and the write.
func ExampleFence_Do() {
	var (
		fence  lease.Fence
		ledger []string
	)
	write := func(token lease.Token, entry string) error {
		t := lease.Tenure{Token: token, Term: fmt.Sprint("term-", token)}
		return fence.Do(t, func() error {
			ledger = append(ledger, fmt.Sprintf("%s (token %d)", entry, token))
			return nil
		})
	}
	_ = write(3, "invoice 1")
	_ = write(5, "invoice 2")
	if err := write(3, "invoice 3"); err != nil {
		fmt.Println("refused:", err)
	}
	fmt.Println(strings.Join(ledger, "; "))

	// Output:
	// refused: lease: stale fencing token: 3 < 5
	// invoice 1 (token 3); invoice 2 (token 5)
}

// A Config's zero durations take their defaults, derived from the TTL. The
// owner may act until ValidUntil and gives up renewing at RenewDeadline.
func ExampleConfig() {
	cfg := lease.Config{LeaseID: "billing.outbox", OwnerID: lease.NewOwnerID(), TTL: 10 * time.Second}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	fmt.Println("renew interval:", cfg.EffectiveRenewInterval())
	fmt.Println("renew period:  ", lease.RenewPeriod(cfg.EffectiveRenewInterval(), cfg.EffectiveTTL()))
	fmt.Println("safety margin: ", cfg.EffectiveSafetyMargin())
	fmt.Println("stop timeout:  ", cfg.EffectiveStopTimeout())

	sent := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) // when the last renewal was sent
	fmt.Println("valid until:   ", cfg.ValidUntil(sent).Format(time.TimeOnly))
	fmt.Println("renew deadline:", cfg.RenewDeadline(sent).Format(time.TimeOnly))

	// Output:
	// renew interval: 3.333333333s
	// renew period:   3.333333333s
	// safety margin:  1s
	// stop timeout:   1s
	// valid until:    12:00:09
	// renew deadline: 12:00:08
}

// Validate names the field at fault; its errors match ErrInvalid.
func ExampleConfig_Validate() {
	cfg := lease.Config{LeaseID: "billing.outbox", OwnerID: "instance-a", TTL: 2 * time.Second,
		SafetyMargin: time.Second, StopTimeout: 900 * time.Millisecond}
	err := cfg.Validate()
	fmt.Println(err)
	fmt.Println(errors.Is(err, lease.ErrInvalid))

	var fe *lease.FieldError
	if errors.As(err, &fe) {
		fmt.Println("field:", fe.Field)
	}

	// Output:
	// lease: invalid SafetyMargin: TTL 2s - SafetyMargin 1s - StopTimeout 900ms leaves no time for a renewal every 1s
	// true
	// field: SafetyMargin
}

// Every process start gets a fresh owner ID; never persist one.
func ExampleNewOwnerID() {
	id := lease.NewOwnerID()
	fmt.Println(strings.HasPrefix(id, lease.OwnerIDPrefix), len(id))
	fmt.Println(id != lease.NewOwnerID())

	// Output:
	// true 40
	// true
}

// A standby watches the lease and tries to acquire it as soon as it is
// released, instead of waiting for its next poll. Events are hints: the
// Acquire decides.
func ExampleWatcher() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := leasetest.NewMemStore()
	defer store.Close()

	a, _ := store.Acquire(ctx, lease.Claim{LeaseID: "reports.nightly", OwnerID: "instance-a", Term: lease.NewTerm(), TTL: time.Minute})
	events, err := store.Watch(ctx, "reports.nightly")
	if err != nil {
		panic(err)
	}
	go func() { _ = store.Release(ctx, a.Lease) }() // instance-a shuts down

	for ev := range events {
		if ev.Kind != lease.EventFree {
			continue
		}
		b, _ := store.Acquire(ctx, lease.Claim{LeaseID: "reports.nightly", OwnerID: "instance-b", Term: lease.NewTerm(), TTL: time.Minute})
		if b.Acquired {
			fmt.Println("instance-b took over with token", b.Lease.Token)
			break
		}
	}

	// Output:
	// instance-b took over with token 3
}
