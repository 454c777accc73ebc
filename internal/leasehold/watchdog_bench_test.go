package leasehold

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// BenchmarkWatchdogFootprint measures the memory held per idle watchdog
// (its Hold, Props, actor process, mailbox and timer) with 10,000 of them
// alive in one actor system; the lock package needs at most 4 KB per held
// lock. The lease itself (ID and owner strings) is shared, as a lock's
// would be. Reported as bytes/watchdog; ns/op is the cost of spawning one.
func BenchmarkWatchdogFootprint(b *testing.B) {
	const n = 10_000
	store := leasetest.NewMemStore()
	defer store.Close()
	cfg := lease.Config{TTL: time.Hour} // no renewal during the measurement
	leases := make([]lease.Lease, n)
	for i := range leases {
		a, err := store.Acquire(b.Context(), lease.Claim{LeaseID: fmt.Sprintf("bench.%d", i), OwnerID: "owner", Term: "term-owner", TTL: cfg.TTL})
		if err != nil || !a.Acquired {
			b.Fatal(err)
		}
		leases[i] = a.Lease
	}
	pids := make([]*actor.PID, n)
	var total int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		sys := actorsys.New(nil)
		var before, after runtime.MemStats
		settle()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for i := range pids {
			hold, err := NewHold(cfg, leases[i], Now())
			if err != nil {
				b.Fatal(err)
			}
			pids[i] = sys.Root.Spawn(WatchdogProps(store, hold, cfg, nil, nil))
		}
		b.StopTimer()
		settle() // every Started processed, garbage collected
		runtime.ReadMemStats(&after)
		total += int64(after.HeapAlloc) - int64(before.HeapAlloc)
		for _, pid := range pids {
			_ = sys.Root.StopFuture(pid).Wait()
		}
		sys.Shutdown()
		clear(pids) // a PID caches its process: keep none alive into the next round
		b.StartTimer()
	}
	b.ReportMetric(float64(total)/float64(b.N*n), "bytes/watchdog")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/spawn")
}

// settle lets mailbox goroutines finish and collects garbage.
func settle() {
	for range 3 {
		time.Sleep(20 * time.Millisecond)
		runtime.GC()
	}
}

// BenchmarkHoldToken measures the token read a workload makes before each
// fenced write.
func BenchmarkHoldToken(b *testing.B) {
	l := lease.Lease{ID: "bench", OwnerID: "owner", Term: "t", Token: 7, TTL: time.Hour, Revision: 7}
	h, err := NewHold(lease.Config{}, l, Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.Token(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWatchdogRenewal measures one renewal through the watchdog (an
// Extend round trip with the in-memory store): the actor overhead on top of
// the store call.
func BenchmarkWatchdogRenewal(b *testing.B) {
	sys := actorsys.New(nil)
	defer sys.Shutdown()
	store := leasetest.NewMemStore()
	defer store.Close()
	cfg := lease.Config{TTL: time.Hour}
	a, err := store.Acquire(b.Context(), lease.Claim{LeaseID: "bench", OwnerID: "owner", Term: "term-owner", TTL: cfg.TTL})
	if err != nil {
		b.Fatal(err)
	}
	hold, err := NewHold(cfg, a.Lease, Now())
	if err != nil {
		b.Fatal(err)
	}
	pid := sys.Root.Spawn(WatchdogProps(store, hold, cfg, nil, nil))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := RequestExtend(b.Context(), sys.Root, pid, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = sys.Root.StopFuture(pid).Wait()
}
