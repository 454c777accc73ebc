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

// BenchmarkObservedTakeover measures crash takeover in ExpiryObserved mode
// (servers before 2.11): how long after a holder's last renewal a standby
// takes the lease over when it times its attempt from the watch event that
// showed the renewal (the store starts its observation clock at that event),
// and polls only every 5 s (the default StandbyRetryInterval). Each
// iteration crashes 10 holders at once; the figures are over all of them:
// ms-over-ttl-p50, -p99 and -max are the takeover minus the TTL (1 s).
//
//	go test -run '^$' -bench BenchmarkObservedTakeover -benchtime 10x ./natsstore
func BenchmarkObservedTakeover(b *testing.B) {
	const keys = 10
	srv := natstest.Start(b)
	cfg := natsstore.Config{Bucket: "observed_takeover", Expiry: natsstore.ExpiryObserved}
	holder := dial(b, srv.ClientURL(), cfg)
	standby := dial(b, srv.ClientURL(), cfg)
	var over []time.Duration
	iter := 0
	for b.Loop() {
		iter++
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		for k := range keys {
			id := fmt.Sprintf("job-%d-%d", iter, k)
			wg.Go(func() {
				c := lease.Claim{LeaseID: id, OwnerID: "holder", Term: "term-" + id, TTL: ttl}
				a, err := holder.Acquire(context.Background(), c)
				if err != nil || !a.Acquired {
					b.Errorf("acquire %s: %v", id, err)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				done := make(chan time.Time, 1)
				go func() {
					_, at, err := takeOver(ctx, standby, lease.Claim{LeaseID: id, OwnerID: "standby",
						Term: "standby-" + id, TTL: ttl}, 5*time.Second)
					if err != nil {
						b.Errorf("take over %s: %v", id, err)
					}
					done <- at
				}()
				time.Sleep(ttl / 3)
				sent := time.Now()
				if _, err := holder.Renew(context.Background(), a.Lease); err != nil {
					b.Errorf("renew %s: %v", id, err)
				}
				// The holder crashes: no more renewals.
				at := <-done
				mu.Lock()
				over = append(over, at.Sub(sent)-ttl)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	slices.Sort(over)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(over[len(over)/2]), "ms-over-ttl-p50")
	b.ReportMetric(ms(over[(len(over)*99+99)/100-1]), "ms-over-ttl-p99")
	b.ReportMetric(ms(over[len(over)-1]), "ms-over-ttl-max")
	b.ReportMetric(0, "ns/op")
}
