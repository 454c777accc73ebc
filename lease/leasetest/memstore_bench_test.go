package leasetest_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// BenchmarkMemStoreRenew measures MemStore.Renew alone, round-robin over N
// held leases: the store's share of a renewal, the baseline of the CPU per
// renewal that lock.BenchmarkHeldLocks measures with N locks held.
func BenchmarkMemStoreRenew(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			mem := leasetest.NewMemStore()
			defer mem.Close()
			ctx := context.Background()
			leases := make([]lease.Lease, n)
			for i := range leases {
				a, err := mem.Acquire(ctx, lease.Claim{LeaseID: "res." + strconv.Itoa(i),
					OwnerID: "bench-node/0123456789abcdef/" + strconv.Itoa(i), Term: lease.NewTerm(), TTL: 15 * time.Second})
				if err != nil || !a.Acquired {
					b.Fatal(a, err)
				}
				leases[i] = a.Lease
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l, err := mem.Renew(ctx, leases[i])
				if err != nil {
					b.Fatal(err)
				}
				leases[i] = l
				i = (i + 1) % n
			}
		})
	}
}
