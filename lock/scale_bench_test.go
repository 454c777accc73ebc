package lock_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

// BenchmarkHeldLocks holds many locks in one process on a MemStore, in real
// time, and reports:
//
//   - B/lock: live heap (after GC) per held lock, the store's entries
//     included; store-B/lock: what the same number of leases costs in the
//     MemStore alone; lock-B/lock: the difference, this package's cost
//     (Guard, Hold, watchdog actor, timers, keeper bookkeeping);
//   - stack-B/lock: goroutine stack memory per lock (there is no goroutine
//     per lock: this stays near 0);
//   - lag-p50-ms, lag-p99-ms, lag-max-ms: how late renewals were sent
//     relative to when they were due (send time of the previous write plus
//     the renew period), over every renewal seen while observing;
//   - renewals, poisoned, failed: renewals measured, guards poisoned (must
//     be 0), renewals that failed;
//   - cpu-us/renewal: CPU time of the whole process (store, benchmark hook
//     and GC included) while observing, per renewal: 2 cores / this is the
//     renewal rate one process can sustain;
//   - acquire-us/lock and close-ms: time to acquire all locks (8
//     goroutines) and to Close the Locker, which releases them all.
//
// Each size runs twice: acquire=burst takes the locks as fast as it can,
// so that their renewals come due in the same burst, period after period
// (the watchdog renews at a fixed period); acquire=paced spreads the
// acquisitions evenly over one renew period, as locks taken over time
// would be.
//
// The TTL is 15 s, so each lock renews every 5 s; the benchmark observes
// for 2.5 periods after the last acquisition. Run it once per size:
//
//	go test -run '^$' -bench BenchmarkHeldLocks -benchtime 1x ./lock/
//
// ASTER_LOCK_BENCH_LOCKS (a comma-separated list, e.g. 200000,400000)
// replaces the sizes, and ASTER_LOCK_BENCH_TTL (a duration) the TTL, to
// find how far it goes. ASTER_LOCK_BENCH_HEAPPROFILE names a file to which
// a heap profile is written while the locks are held (use it with
// -memprofilerate 1 and a single size):
//
//	ASTER_LOCK_BENCH_LOCKS=100000 ASTER_LOCK_BENCH_HEAPPROFILE=/tmp/held.pprof \
//	  go test -run '^$' -bench BenchmarkHeldLocks -benchtime 1x -memprofilerate 1 ./lock/
//	go tool pprof -sample_index=inuse_space -top /tmp/held.pprof
func BenchmarkHeldLocks(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if env := os.Getenv("ASTER_LOCK_BENCH_LOCKS"); env != "" {
		sizes = sizes[:0]
		for _, s := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n <= 0 {
				b.Fatalf("ASTER_LOCK_BENCH_LOCKS: %q", s)
			}
			sizes = append(sizes, n)
		}
	}
	ttl := 15 * time.Second
	if env := os.Getenv("ASTER_LOCK_BENCH_TTL"); env != "" {
		var err error
		if ttl, err = time.ParseDuration(env); err != nil {
			b.Fatalf("ASTER_LOCK_BENCH_TTL: %v", err)
		}
	}
	for _, n := range sizes {
		for _, paced := range []bool{false, true} {
			name := fmt.Sprintf("locks=%d/acquire=burst", n)
			if paced {
				name = fmt.Sprintf("locks=%d/acquire=paced", n)
			}
			b.Run(name, func(b *testing.B) { benchHeldLocks(b, n, ttl, paced) })
		}
	}
}

// heap returns the live heap and the stack memory after a full GC.
func heap() (live, stack uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse
}

func benchHeldLocks(b *testing.B, n int, ttl time.Duration, paced bool) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprint("res.", i)
	}
	storeCost := storeBytesPerLease(b, names, ttl)

	cfg := lock.Config{OwnerID: "bench-node", TTL: ttl}
	period := lease.RenewPeriod(lease.Config{TTL: ttl}.EffectiveRenewInterval(), ttl)
	observe := period * 5 / 2
	rec := newLagRecorder(cfg, n, n*4)
	cfg.OnEvent = rec.hook
	mem := leasetest.NewMemStore()
	defer mem.Close()
	guards := make([]*lock.Guard, n)
	goroutines := runtime.NumGoroutine()
	heap0, stack0 := heap()

	l, err := lock.New(mem, cfg)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if paced {
					time.Sleep(time.Until(start.Add(period * time.Duration(i) / time.Duration(n))))
				}
				g, err := l.TryAcquire(context.Background(), names[i])
				if err != nil {
					b.Error(err)
					return
				}
				rec.acquired(g)
				guards[i] = g
			}
		})
	}
	wg.Wait()
	acquireTook := time.Since(start)
	if b.Failed() {
		_ = l.Close(context.Background())
		return
	}
	heap1, stack1 := heap()
	extraGoroutines := runtime.NumGoroutine() - goroutines
	if path := os.Getenv("ASTER_LOCK_BENCH_HEAPPROFILE"); path != "" {
		writeHeapProfile(b, path)
	}

	cpu0 := cpuTime()
	renewed0 := rec.n.Load()
	time.Sleep(observe)
	cpuPerRenewal := float64((cpuTime() - cpu0).Microseconds()) / float64(max(rec.n.Load()-renewed0, 1))

	closeStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err = l.Close(ctx)
	cancel()
	closeTook := time.Since(closeStart)
	if err != nil {
		b.Errorf("Close: %v", err)
	}

	qs, maxLag, renewals := rec.quantiles(0.50, 0.99)
	sqs, sMax, sRenewals := rec.steadyQuantiles(0.50, 0.99)
	perLock := float64(heap1-heap0) / float64(n)
	b.ReportMetric(perLock, "B/lock")
	b.ReportMetric(storeCost, "store-B/lock")
	b.ReportMetric(perLock-storeCost, "lock-B/lock")
	b.ReportMetric(float64(int64(stack1)-int64(stack0))/float64(n), "stack-B/lock")
	b.ReportMetric(ms(qs[0]), "lag-p50-ms")
	b.ReportMetric(ms(qs[1]), "lag-p99-ms")
	b.ReportMetric(ms(maxLag), "lag-max-ms")
	b.ReportMetric(ms(sqs[1]), "steady-lag-p99-ms")
	b.ReportMetric(ms(sMax), "steady-lag-max-ms")
	b.ReportMetric(float64(renewals), "renewals")
	b.ReportMetric(cpuPerRenewal, "cpu-us/renewal")
	b.ReportMetric(float64(rec.poison.Load()), "poisoned")
	b.ReportMetric(float64(rec.failed.Load()), "failed")
	b.ReportMetric(float64(acquireTook.Microseconds())/float64(n), "acquire-us/lock")
	b.ReportMetric(ms(closeTook), "close-ms")
	b.Logf("%d locks: %.0f B/lock (store %.0f, lock %.0f), %d goroutines more while held; "+
		"%d renewals in %v: lag p50 %v p99 %v max %v; after each lock's first renewal (%d): p50 %v p99 %v max %v; "+
		"%.1f µs CPU per renewal (the whole process, store included); %d poisoned; acquire %v, close %v",
		n, perLock, storeCost, perLock-storeCost, extraGoroutines, renewals, observe, qs[0], qs[1], maxLag,
		sRenewals, sqs[0], sqs[1], sMax, cpuPerRenewal, rec.poison.Load(), acquireTook, closeTook)
	if p := rec.poison.Load(); p > 0 {
		b.Errorf("%d locks were poisoned: renewals did not keep up", p)
	}
	runtime.KeepAlive(guards)
}

// storeBytesPerLease is the live heap per lease of a MemStore holding the
// leases of names, with owner IDs as long as the Locker's.
func storeBytesPerLease(b *testing.B, names []string, ttl time.Duration) float64 {
	mem := leasetest.NewMemStore()
	defer mem.Close()
	owner := "bench-node/0123456789abcdef/"
	heap0, _ := heap()
	for i, name := range names {
		a, err := mem.Acquire(context.Background(), lease.Claim{LeaseID: name,
			OwnerID: owner + strconv.FormatUint(uint64(i+1), 36), Term: lease.NewTerm(), TTL: ttl})
		if err != nil || !a.Acquired {
			b.Fatal(err)
		}
	}
	heap1, _ := heap()
	return float64(heap1-heap0) / float64(len(names))
}

func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
