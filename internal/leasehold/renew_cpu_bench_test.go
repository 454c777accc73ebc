package leasehold

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/nats-io/nats.go/jetstream"

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
	benchRenewCPU(b, store, renewCPUPeriod, nil)
}

// BenchmarkWatchdogRenewCPUNATS is BenchmarkWatchdogRenewCPU on natsstore
// against a nats-server in a child process (loopback), each watchdog
// renewing every renewCPUPeriodNATS: 5,000 renewals a second. The server
// runs in a process of its own so that cpu-ns/renewal and
// store-cpu-ns/renewal are the client's CPU alone (the watchdogs', and as
// many direct Store.Renew calls one after the other); server-cpu-ns/renewal
// and store-server-cpu-ns/renewal are the server process's over the same
// spans (from /proc, in 10 ms ticks; 0 without /proc). The floor under
// both: raw-kv-cpu-ns/update (and raw-kv-server-cpu-ns/update) is the CPU
// of as many bare nats.go KeyValue.Update calls, one after the other, on
// keys of another bucket.
func BenchmarkWatchdogRenewCPUNATS(b *testing.B) {
	srv := startNATSProcess(b)
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
	defer cancel()
	store, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.url}},
		natsstore.Config{Bucket: "bench-renew-cpu"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	rawCPU, rawServer := spanCPU(srv.cpu, rawKVUpdates(b, srv.url))
	benchRenewCPU(b, store, renewCPUPeriodNATS, srv.cpu)
	b.ReportMetric(perOp(b, rawCPU), "raw-kv-cpu-ns/update")
	b.ReportMetric(perOp(b, rawServer), "raw-kv-server-cpu-ns/update")
}

// perOp is d over b.N, in nanoseconds.
func perOp(b *testing.B, d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }

// rawKVUpdates connects to url, writes renewCPUWatchdogs keys of 128 bytes
// in a bucket of their own, and returns a function that makes b.N
// KeyValue.Update calls over them, round-robin, each at its key's last
// revision: what a renewal's write costs nats.go alone.
func rawKVUpdates(b *testing.B, url string) func() {
	js := natstest.JetStream(b, url)
	kv, err := js.CreateKeyValue(b.Context(), jetstream.KeyValueConfig{Bucket: "bench-raw-cpu"})
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 128)
	keys := make([]string, renewCPUWatchdogs)
	revs := make([]uint64, renewCPUWatchdogs)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench.cpu.%d", i)
		if revs[i], err = kv.Put(b.Context(), keys[i], value); err != nil {
			b.Fatal(err)
		}
	}
	return func() {
		for i := range b.N {
			k := i % len(revs)
			rev, err := kv.Update(b.Context(), keys[k], value, revs[k])
			if err != nil {
				b.Fatal(err)
			}
			revs[k] = rev
		}
	}
}

// benchRenewCPU runs BenchmarkWatchdogRenewCPU's measurement on store;
// server, if not nil, reads the CPU time of the store's server process.
func benchRenewCPU(b *testing.B, store lease.Store, period time.Duration, server func() time.Duration) {
	if cpuTime() == 0 {
		b.Skip("no process CPU time on this platform")
	}
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
	if server == nil {
		server = func() time.Duration { return 0 }
	}
	storeCPU, storeServer := spanCPU(server, func() { renewDirectly(b, store, leases) })
	sys := actorsys.New(nil)
	defer sys.Shutdown()
	var pids []*actor.PID
	b.ResetTimer()
	cpu, serverCPU := spanCPU(server, func() { pids = renewByWatchdogs(b, sys, store, leases, cfg, period) })
	b.StopTimer()
	for _, pid := range pids {
		_ = sys.Root.StopFuture(pid).Wait()
	}
	b.ReportMetric(perOp(b, cpu), "cpu-ns/renewal")
	b.ReportMetric(perOp(b, storeCPU), "store-cpu-ns/renewal")
	if server() > 0 {
		b.ReportMetric(perOp(b, serverCPU), "server-cpu-ns/renewal")
		b.ReportMetric(perOp(b, storeServer), "store-server-cpu-ns/renewal")
	}
}

// spanCPU runs f and returns the CPU time this process and the server
// used meanwhile.
func spanCPU(server func() time.Duration, f func()) (self, srv time.Duration) {
	cpu0, srv0 := cpuTime(), server()
	f()
	return cpuTime() - cpu0, server() - srv0
}

// renewDirectly makes b.N Store.Renew calls, round-robin over leases: the
// store alone.
func renewDirectly(b *testing.B, store lease.Store, leases []lease.Lease) {
	for i := range b.N {
		l := &leases[i%len(leases)]
		renewed, err := store.Renew(b.Context(), *l)
		if err != nil {
			b.Fatal(err)
		}
		*l = renewed
	}
}

// renewByWatchdogs spawns a watchdog per lease in sys, their first
// renewals spread over the period, sharing a Pacer, and returns them once they have made
// b.N renewals.
func renewByWatchdogs(b *testing.B, sys *actorsys.System, store lease.Store, leases []lease.Lease, cfg lease.Config,
	period time.Duration,
) []*actor.PID {
	var renewals atomic.Int64
	target := int64(b.N)
	done := make(chan struct{})
	report := func(r Report) {
		if _, ok := r.(Renewed); ok && renewals.Add(1) == target {
			close(done)
		}
	}
	var pacer Pacer // as a Locker's watchdogs share one
	pids := make([]*actor.PID, 0, len(leases))
	for i, l := range leases {
		// Spread over the period: the first renewals come due in turn.
		sent := Now()
		sent.At = sent.At.Add(-time.Duration(i) * period / renewCPUWatchdogs)
		hold, err := NewHold(cfg, l, sent)
		if err != nil {
			b.Fatal(err)
		}
		pids = append(pids, sys.Root.Spawn(PacedWatchdogProps(store, hold, cfg, nil, report, &pacer)))
	}
	select {
	case <-done:
	case <-time.After(time.Duration(b.N/renewCPUWatchdogs+10) * period * 4):
		b.Errorf("%d renewals of %d after the time they should take", renewals.Load(), b.N)
	}
	return pids
}
