package leasehold

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/natsstore"
)

// renewCPUWatchdogs is how many watchdogs BenchmarkWatchdogRenewCPU runs
// at once, each renewing every renewCPUPeriod: 20,000 renewals a second,
// spread over the period as leases taken over time would be.
const (
	renewCPUWatchdogs = 1000
	renewCPUPeriod    = 50 * time.Millisecond

	renewCPUPeriodNATS = 200 * time.Millisecond
)

// BenchmarkWatchdogRenewCPU measures the CPU time of the whole process per
// renewal that watchdogs make on their own, on their tick timers (the path
// every held lease takes once a renew period), with 1,000 watchdogs on
// the in-memory store. b.N is the number of renewals; cpu-ns/renewal is the
// process's user and system CPU time over them, and store-cpu-ns/renewal
// that of as many MemStore.Renew calls made directly, in the same run: the
// store's share. ns/op is wall time per renewal, set by the schedule.
func BenchmarkWatchdogRenewCPU(b *testing.B) {
	store := leasetest.NewMemStore()
	defer store.Close()
	benchRenewCPU(b, store, renewCPUPeriod)
}

// BenchmarkWatchdogRenewCPUNATS is BenchmarkWatchdogRenewCPU on natsstore
// against an in-process nats-server (loopback), each watchdog renewing
// every renewCPUPeriodNATS: 5,000 renewals a second. The CPU time is the
// process's, so the server's share of each renewal is in both figures;
// cpu-ns/renewal minus store-cpu-ns/renewal is what the watchdog adds to
// the store call.
func BenchmarkWatchdogRenewCPUNATS(b *testing.B) {
	srv := natstest.Start(b)
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
	defer cancel()
	store, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}},
		natsstore.Config{Bucket: "bench-renew-cpu"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	benchRenewCPU(b, store, renewCPUPeriodNATS)
}

// benchRenewCPU runs BenchmarkWatchdogRenewCPU's measurement on store.
func benchRenewCPU(b *testing.B, store lease.Store, period time.Duration) {
	if cpuTime() == 0 {
		b.Skip("no process CPU time on this platform")
	}
	sys := actorsys.New(nil)
	defer sys.Shutdown()
	cfg := lease.Config{TTL: time.Minute, RenewInterval: period}
	leases := make([]lease.Lease, renewCPUWatchdogs)
	for i := range leases {
		a, err := store.Acquire(b.Context(), lease.Claim{LeaseID: fmt.Sprintf("bench.cpu.%d", i), OwnerID: "owner",
			Term: "term-owner", TTL: cfg.TTL})
		if err != nil || !a.Acquired {
			b.Fatal(a, err)
		}
		leases[i] = a.Lease
	}

	// The store alone: as many direct renewals, round-robin.
	cpu0 := cpuTime()
	for i := range b.N {
		l := &leases[i%len(leases)]
		renewed, err := store.Renew(b.Context(), *l)
		if err != nil {
			b.Fatal(err)
		}
		*l = renewed
	}
	storeCPU := cpuTime() - cpu0

	var renewals atomic.Int64
	target := int64(b.N)
	done := make(chan struct{})
	report := func(r Report) {
		if _, ok := r.(Renewed); ok && renewals.Add(1) == target {
			close(done)
		}
	}
	pids := make([]*actor.PID, len(leases))
	b.ResetTimer()
	cpu0 = cpuTime()
	for i, l := range leases {
		// Spread over the period: the first renewals come due in turn.
		sent := Now()
		sent.At = sent.At.Add(-time.Duration(i) * period / renewCPUWatchdogs)
		hold, err := NewHold(cfg, l, sent)
		if err != nil {
			b.Fatal(err)
		}
		pids[i] = sys.Root.Spawn(WatchdogProps(store, hold, cfg, nil, report))
	}
	select {
	case <-done:
	case <-time.After(time.Duration(b.N/renewCPUWatchdogs+10) * period * 4):
		b.Fatalf("%d renewals of %d after the time they should take", renewals.Load(), b.N)
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	for _, pid := range pids {
		_ = sys.Root.StopFuture(pid).Wait()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/renewal")
	b.ReportMetric(float64(storeCPU.Nanoseconds())/float64(b.N), "store-cpu-ns/renewal")
}
