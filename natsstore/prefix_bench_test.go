package natsstore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// BenchmarkWatchPrefix1024 opens a watch of a prefix with 1,024 held leases
// and reads its current state (ns/op), and reports what an open watch
// holds, averaged over 8 watches open at once, each through a store of its
// own: goroutines, heap bytes after a GC (the store's and the in-process
// server's share included) and consumers on the server.
//
//	go test -run '^$' -bench WatchPrefix1024 -benchtime 20x ./natsstore
func BenchmarkWatchPrefix1024(b *testing.B) {
	const n = 1024
	srv := natstest.Start(b)
	nc, js := conn(b, srv.ClientURL())
	s, err := natsstore.NewConn(ctxT(b), nc, natsstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				if _, err := s.Acquire(ctxT(b), longClaim(fmt.Sprintf("bench.shards.s%d", i), "owner-a")); err != nil {
					b.Error(err)
				}
			}
		})
	}
	wg.Wait()
	stream, err := js.Stream(ctxT(b), "KV_"+s.Bucket())
	if err != nil {
		b.Fatal(err)
	}
	consumers := func() int {
		info, err := stream.Info(ctxT(b))
		if err != nil {
			b.Fatal(err)
		}
		return info.State.Consumers
	}
	open := func(s *natsstore.Store) (context.CancelFunc, <-chan lease.Event) {
		ctx, cancel := context.WithCancel(context.Background())
		current, changes, err := s.WatchPrefix(ctx, "bench.")
		if err != nil || len(current) != n {
			b.Fatal(len(current), err)
		}
		return cancel, changes
	}
	closeWatch := func(cancel context.CancelFunc, changes <-chan lease.Event) {
		cancel()
		for range changes { //nolint:revive // until closed
		}
	}

	const k = 8
	watchers := make([]*natsstore.Store, k)
	for i := range watchers {
		watchers[i] = dial(b, srv.ClientURL(), natsstore.Config{})
	}
	var before, after runtime.MemStats
	c0, g0 := consumers(), runtime.NumGoroutine()
	runtime.GC()
	runtime.ReadMemStats(&before)
	cancels := make([]context.CancelFunc, k)
	changes := make([]<-chan lease.Event, k)
	for i, w := range watchers {
		cancels[i], changes[i] = open(w)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	goroutines, cons := float64(runtime.NumGoroutine()-g0)/k, float64(consumers()-c0)/k
	heap := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / k
	for i := range watchers {
		closeWatch(cancels[i], changes[i])
	}

	for b.Loop() {
		closeWatch(open(s))
	}
	// After the loop: Loop's first call deletes the metrics reported before.
	b.ReportMetric(goroutines, "goroutines")
	b.ReportMetric(heap, "heap-B")
	b.ReportMetric(cons, "consumers")
}
