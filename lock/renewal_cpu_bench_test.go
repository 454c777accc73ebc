package lock_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

// BenchmarkRenewalCPU measures the CPU time one process spends per renewal
// while it holds many locks (BenchmarkHeldLocks measures their memory and
// renewal lag): N locks on a MemStore, TTL 9 s, so each renews every 3 s.
// Once all are held it waits one period for the renewals to spread, then
// counts the renewals (actors.Renewed events) and the process's CPU time
// (user + system, getrusage) over the next two periods.
//
//   - cpu-ns/renewal: CPU time of the process per renewal (watchdog actor,
//     timers, keeper, store, GC: everything the process did);
//   - store-cpu-ns/renewal: the same for MemStore.Renew alone, called in a
//     loop over as many held leases, in the same run: the baseline;
//   - renewals/s: renewals per second over the window.
func BenchmarkRenewalCPU(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			for range b.N {
				renewalCPU(b, n)
			}
		})
	}
}

// cpuNow returns the process's user plus system CPU time.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func renewalCPU(b *testing.B, n int) {
	const ttl = 9 * time.Second
	period := lease.RenewPeriod(lease.Config{TTL: ttl}.EffectiveRenewInterval(), ttl)
	var renewals, failures atomic.Int64
	cfg := lock.Config{NodeID: "bench-node", TTL: ttl, OnEvent: func(ev actors.Event) {
		switch ev.(type) {
		case actors.Renewed:
			renewals.Add(1)
		case actors.RenewalFailed, actors.Poisoned:
			failures.Add(1)
		}
	}}
	mem := leasetest.NewMemStore()
	defer mem.Close()
	l, err := lock.New(mem, cfg)
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := l.TryAcquire(context.Background(), "res."+strconv.FormatInt(i, 10)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if !b.Failed() {
		time.Sleep(period) // renewals spread over the period
		r0, c0, t0 := renewals.Load(), cpuNow(b), time.Now()
		time.Sleep(2 * period)
		r1, c1, elapsed := renewals.Load(), cpuNow(b), time.Since(t0)
		b.ReportMetric(float64(c1-c0)/float64(max(r1-r0, 1)), "cpu-ns/renewal")
		b.ReportMetric(float64(r1-r0)/elapsed.Seconds(), "renewals/s")
		b.ReportMetric(float64(failures.Load()), "failures")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		b.Errorf("Close: %v", err)
	}
	b.ReportMetric(storeRenewalCPU(b, n, ttl), "store-cpu-ns/renewal")
}

// storeRenewalCPU is the CPU time per MemStore.Renew of one of n held
// leases, each renewed once.
func storeRenewalCPU(b *testing.B, n int, ttl time.Duration) float64 {
	mem := leasetest.NewMemStore()
	defer mem.Close()
	ctx := context.Background()
	leases := make([]lease.Lease, n)
	for i := range leases {
		a, err := mem.Acquire(ctx, lease.Claim{LeaseID: "res." + strconv.Itoa(i), OwnerID: "bench-node/0123456789abcdef/" + strconv.Itoa(i), TTL: ttl})
		if err != nil || !a.Acquired {
			b.Fatal(err)
		}
		leases[i] = a.Lease
	}
	c0 := cpuNow(b)
	for i, le := range leases {
		l, err := mem.Renew(ctx, le)
		if err != nil {
			b.Fatal(err)
		}
		leases[i] = l
	}
	return float64(cpuNow(b)-c0) / float64(n)
}
