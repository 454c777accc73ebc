package natsdir_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/internal/natsdir"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// BenchmarkWatchPrefix1024 is natsstore's BenchmarkWatchPrefix1024 over a
// Directory, averaged over 2 watches: on a server that allows more than its
// default of 1,000 consumers per stream, which a Directory of 1,024 keys
// exceeds.
//
//	go test -run '^$' -bench WatchPrefix1024 -benchtime 5x ./internal/natsdir
func BenchmarkWatchPrefix1024(b *testing.B) {
	const n, k = 1024, 2
	srv := natstest.Start(b, natstest.WithOptions(func(o *server.Options) { o.JetStreamLimits.DefaultMaxConsumers = -1 }))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type watcher struct {
		st  *natsstore.Store
		dir *natsdir.Directory
	}
	newWatcher := func() watcher {
		nc, err := nats.Connect(srv.ClientURL(), nats.ReconnectBufSize(-1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		st, err := natsstore.NewConn(ctx, nc, natsstore.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		js, _ := jetstream.New(nc)
		kv, err := js.KeyValue(ctx, st.Bucket())
		if err != nil {
			b.Fatal(err)
		}
		return watcher{st, natsdir.New(kv, st, 30*time.Second)}
	}
	main := newWatcher()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				c := lease.Claim{LeaseID: fmt.Sprintf("bench.shards.s%d", i), OwnerID: "owner-a", Term: "term-owner-a",
					TTL: time.Minute, Meta: map[string]string{"addr": "owner-a:80"}}
				if _, err := main.st.Acquire(ctx, c); err != nil {
					b.Error(err)
				}
			}
		})
	}
	wg.Wait()
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx, "KV_"+main.st.Bucket())
	if err != nil {
		b.Fatal(err)
	}
	consumers := func() int {
		info, err := stream.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return info.State.Consumers
	}
	open := func(w watcher) (context.CancelFunc, <-chan lease.Event) {
		wctx, cancel := context.WithCancel(context.Background())
		current, changes, err := w.dir.WatchPrefix(wctx, "bench.")
		if err != nil || len(current) != n {
			b.Fatal(len(current), err)
		}
		return cancel, changes
	}
	closeWatch := func(cancel context.CancelFunc, changes <-chan lease.Event) {
		cancel()
		for range changes {
		}
	}
	watchers := make([]watcher, k)
	for i := range watchers {
		watchers[i] = newWatcher()
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
		closeWatch(open(main))
	}
	b.ReportMetric(goroutines, "goroutines")
	b.ReportMetric(heap, "heap-B")
	b.ReportMetric(cons, "consumers")
}
