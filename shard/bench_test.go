//go:build unix

package shard_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/asterforge/aster/shard"
)

// BenchmarkPlace1024 is one placement of 1,024 shards over 8 members, half
// of them moving (a member joined): what every instance computes after a
// change of the fleet.
func BenchmarkPlace1024(b *testing.B) {
	shards := shard.Range("tenant", 1024)
	var members []string
	for i := range 8 {
		members = append(members, fmt.Sprintf("node-%d", i))
	}
	holders := shard.Place(shards, members[:7], nil)
	b.ReportAllocs()
	for b.Loop() {
		shard.Place(shards, members, holders)
	}
}

// BenchmarkFleet1024 runs 1,024 shards on 8 members in one process, in real
// time, over the in-memory store (TTL 10 s, renewals every 3.3 s). It
// reports the CPU the fleet uses while steady (cpu-%, of one core, for all
// 8 members), how long the first balance took, and, per iteration, how long
// the fleet takes to balance after a ninth member joins and after it
// drains. After the iterations, once per run, a ninth member joins and
// crashes (cut from the store: it renews and releases nothing), and it
// reports how long the fleet takes to balance after the crash
// (crash-balance-ms: its shards wait out their TTL). The workloads write
// once through their fence and wait. make bench runs it (docs/benchmarks.md).
//
//	go test -run '^$' -bench Fleet1024 -benchtime 3x ./shard/
func BenchmarkFleet1024(b *testing.B) {
	r := newRig(b, 1024)
	r.check.idle = true // the framework's cost, not the test workload's
	began := time.Now()
	for i := range 8 {
		r.start(fmt.Sprintf("node-%d", i))
	}
	r.awaitBalance(began, time.Minute)
	first := time.Since(began)

	time.Sleep(time.Second)
	cpu0, wall0 := cpuTime(), time.Now()
	time.Sleep(10 * time.Second) // three rounds of renewals
	steady := float64(cpuTime()-cpu0) / float64(time.Since(wall0)) * 100

	var join, drain time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		r.start("node-extra")
		join += r.awaitBalance(start, time.Minute)
		start = time.Now()
		r.leave("node-extra")
		drain += r.awaitBalance(start, time.Minute)
	}
	b.StopTimer()
	r.start("node-crash")
	r.awaitBalance(time.Now(), time.Minute)
	start := time.Now()
	r.crash("node-crash")
	crash := r.awaitBalance(start, time.Minute)
	b.ReportMetric(steady, "cpu-%")
	b.ReportMetric(first.Seconds()*1000, "first-balance-ms")
	b.ReportMetric(join.Seconds()*1000/float64(b.N), "join-balance-ms")
	b.ReportMetric(drain.Seconds()*1000/float64(b.N), "drain-balance-ms")
	b.ReportMetric(crash.Seconds()*1000, "crash-balance-ms")
	r.check.safe(b)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
