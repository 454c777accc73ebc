package leasetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// A store's own tests run the conformance suite against it (here the
// in-memory store, in virtual time), and a FaultStore injects the failures
// a test needs.
func Example() {
	// In a store's tests:
	//
	//	func TestConformance(t *testing.T) {
	//		leasetest.Run(t, func(t *testing.T) lease.Store { return openStore(t) })
	//	}
	var _ func(*testing.T, func(*testing.T) lease.Store, ...leasetest.Option) = leasetest.Run

	mem := leasetest.NewMemStore()
	defer mem.Close()
	faults := leasetest.NewFaultStore(mem)
	ctx := context.Background()
	a, _ := faults.Acquire(ctx, lease.Claim{LeaseID: "job", OwnerID: "a", Term: lease.NewTerm(), TTL: time.Minute})
	faults.LoseRenewals(1) // the next renewal answers "lost", as if another owner had taken it
	_, err := faults.Renew(ctx, a.Lease)
	fmt.Println("acquired:", a.Acquired, "| renewal lost:", err != nil)
	// Output:
	// acquired: true | renewal lost: true
}
