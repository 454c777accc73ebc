package natsstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// BenchmarkStoreVsRawKV (acquire, renew and release beside the raw KV
// write) is in ops_bench_test.go.

// BenchmarkRenewals measures renewal throughput with 1, 8 and 64 owners
// renewing leases of their own concurrently through one store.
//
//	go test -run '^$' -bench BenchmarkRenewals ./natsstore
func BenchmarkRenewals(b *testing.B) {
	srv := natstest.Start(b)
	s := dial(b, srv.ClientURL(), natsstore.Config{})
	ctx := context.Background()
	for _, owners := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("owners-%d", owners), func(b *testing.B) {
			leases := make([]lease.Lease, owners)
			for i := range leases {
				a, err := s.Acquire(ctx, lease.Claim{LeaseID: fmt.Sprintf("bench-renewals-%d-%d", owners, i),
					OwnerID: lease.NewOwnerID(), Term: lease.NewTerm(), TTL: 10 * time.Second})
				if err != nil || !a.Acquired {
					b.Fatal(a, err)
				}
				leases[i] = a.Lease
			}
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, owners)
			for i := range owners {
				n := b.N / owners
				if i < b.N%owners {
					n++
				}
				wg.Go(func() {
					l := leases[i]
					for range n {
						var err error
						if l, err = s.Renew(ctx, l); err != nil {
							errs <- err
							return
						}
					}
					leases[i] = l
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "renewals/s")
			for _, l := range leases {
				if err := s.Release(ctx, l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWatchRelease measures how long after Release returns a standby's
// watch (another store on another connection) reports the lease free.
//
//	go test -run '^$' -bench BenchmarkWatchRelease ./natsstore
func BenchmarkWatchRelease(b *testing.B) {
	srv := natstest.Start(b)
	owner := dial(b, srv.ClientURL(), natsstore.Config{})
	standby := dial(b, srv.ClientURL(), natsstore.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := lease.Claim{LeaseID: "bench-watch", OwnerID: lease.NewOwnerID(), Term: lease.NewTerm(), TTL: 10 * time.Second}
	events, err := standby.Watch(ctx, c.LeaseID)
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		a, err := owner.Acquire(ctx, c)
		if err != nil || !a.Acquired {
			b.Fatal(a, err)
		}
		for ev := range events { // wait for our own write to be seen
			if ev.Kind == lease.EventHeld && ev.Revision == a.Lease.Revision {
				break
			}
		}
		start := time.Now()
		if err := owner.Release(ctx, a.Lease); err != nil {
			b.Fatal(err)
		}
		for ev := range events {
			if ev.Kind == lease.EventFree {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
}
