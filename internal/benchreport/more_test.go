package benchreport

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moreOutput is go test -bench output of the durability, observed-expiry,
// singleton and sharding benchmarks, two runs each (one of the singleton's
// handover runs failed requests).
const moreOutput = `pkg: github.com/asterforge/aster/natsstore/embedded
BenchmarkSync/sync=default/acquire-2 	 2000	 140000 ns/op
BenchmarkSync/sync=default/renew-2 	 2000	 120000 ns/op
BenchmarkSync/sync=default/handover-2 	 2000	 600000 ns/op
BenchmarkSync/sync=always/acquire-2 	 2000	 590000 ns/op
BenchmarkSync/sync=always/renew-2 	 2000	 410000 ns/op
BenchmarkSync/sync=always/handover-2 	 2000	 1200000 ns/op
BenchmarkSync/sync=default/acquire-2 	 2000	 150000 ns/op
BenchmarkSync/sync=default/renew-2 	 2000	 130000 ns/op
BenchmarkSync/sync=default/handover-2 	 2000	 640000 ns/op
BenchmarkSync/sync=always/acquire-2 	 2000	 600000 ns/op
BenchmarkSync/sync=always/renew-2 	 2000	 420000 ns/op
BenchmarkSync/sync=always/handover-2 	 2000	 1600000 ns/op
pkg: github.com/asterforge/aster/natsstore
BenchmarkObservedTakeover-2 	 10	 0 ns/op	 3.5 ms-over-ttl-p50	 42 ms-over-ttl-p99	 42 ms-over-ttl-max
BenchmarkObservedTakeover-2 	 10	 0 ns/op	 4.5 ms-over-ttl-p50	 50 ms-over-ttl-p99	 61 ms-over-ttl-max
BenchmarkWatchPrefix1024-2 	 20	 14000000 ns/op	 6 goroutines	 900000 heap-B	 1 consumers
BenchmarkWatchPrefix1024-2 	 20	 15000000 ns/op	 6 goroutines	 950000 heap-B	 1 consumers
pkg: github.com/asterforge/aster/singleton
BenchmarkRequest/plain-2 	 10000	 110000 ns/op	 100 p50-µs	 300 p99-µs
BenchmarkRequest/routed-2 	 10000	 160000 ns/op	 150 p50-µs	 450 p99-µs
BenchmarkRequest/plain-2 	 10000	 120000 ns/op	 110 p50-µs	 320 p99-µs
BenchmarkRequest/routed-2 	 10000	 150000 ns/op	 132 p50-µs	 400 p99-µs
BenchmarkRequestHandover-2 	 100	 60000000 ns/op	 0 failed	 20000 requests	 45 straddle-p99-ms	 40 handover-p99-ms	 30 resign-p99-ms
BenchmarkRequestHandover-2 	 100	 60000000 ns/op	 2 failed	 21000 requests	 55 straddle-p99-ms	 44 handover-p99-ms	 32 resign-p99-ms
pkg: github.com/asterforge/aster/shard
BenchmarkPlace1024-2 	 3000	 400000 ns/op	 60000 B/op	 87 allocs/op
BenchmarkPlace1024-2 	 3000	 440000 ns/op	 60000 B/op	 87 allocs/op
BenchmarkFleet1024-2 	 3	 1500000000 ns/op	 3.0 cpu-%	 9800 crash-balance-ms	 50 drain-balance-ms	 900 first-balance-ms	 60 join-balance-ms
BenchmarkFleet1024-2 	 3	 1500000000 ns/op	 2.5 cpu-%	 10200 crash-balance-ms	 70 drain-balance-ms	 1100 first-balance-ms	 66 join-balance-ms
`

var moreCommands = []string{
	"go test -run='^$' -bench=. -benchmem -count=2 ./supervision",
	"go test -run='^$' -bench=BenchmarkSync -benchtime=2000x -count=2 ./natsstore/embedded",
	"go test -run='^$' -bench=BenchmarkObservedTakeover -benchtime=10x -count=2 ./natsstore",
	"go test -run='^$' -bench=BenchmarkWatchPrefix1024 -benchtime=20x -count=2 ./natsstore",
	"go test -run='^$' -bench='BenchmarkRequest$' -benchtime=10000x -count=2 ./singleton",
	"go test -run='^$' -bench=BenchmarkRequestHandover -benchtime=100x -count=2 ./singleton",
	"go test -run='^$' -bench=BenchmarkPlace1024 -benchmem -count=2 ./shard",
	"go test -run='^$' -bench=BenchmarkFleet1024 -benchtime=3x -count=2 ./shard",
}

func moreInput(t *testing.T) Input {
	t.Helper()
	rs := NewResults()
	require.NoError(t, rs.Parse(strings.NewReader(moreOutput), 2))
	return Input{Results: rs, Commands: moreCommands}
}

// section returns the Markdown of the section whose heading is title, up to
// the next heading of its level.
func section(t *testing.T, md, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "\n## "+title+"\n")
	require.True(t, ok, "no section %q in:\n%s", title, md)
	body, _, _ := strings.Cut(rest, "\n## ")
	return body
}

func TestCommandFindsTheRunThatRanABenchmark(t *testing.T) {
	r := &report{in: moreInput(t)}
	assert.Equal(t, "`"+moreCommands[4]+"`", r.command("singleton", "BenchmarkRequest"), "BenchmarkRequest$ and not the handover")
	assert.Equal(t, "`"+moreCommands[5]+"`", r.command("singleton", "BenchmarkRequestHandover"))
	assert.Equal(t, "`"+moreCommands[1]+"`", r.command("natsstore/embedded", "BenchmarkSync"))
	assert.Equal(t, "`"+moreCommands[3]+"`", r.command("natsstore", "BenchmarkWatchPrefix1024"))
	assert.Equal(t, "`"+moreCommands[0]+"`", r.command("supervision", "BenchmarkThroughput"), "-bench=. runs every benchmark")
	assert.Empty(t, r.command("shard", "BenchmarkView"), "not run")
	assert.Empty(t, r.command("natsstore", "BenchmarkSync"), "another package")
}

func TestBuildReportsDurabilityRunByRun(t *testing.T) {
	md := string(Build(moreInput(t)).Markdown)
	s := section(t, md, "Durability: `sync_interval: always`")
	assert.Contains(t, s, "Reproduce with `"+moreCommands[1]+"`.")
	assert.Contains(t, s, "| acquire (one write of a new key) | 145 µs ±3% (n=2) | 595 µs ±1% (n=2) | 4.11x ±3% (n=2) |")
	// 1.2/0.6 and 1.6/0.64: the median of the runs' ratios (2.25x), not the
	// ratio of the medians (1.4/0.62 = 2.26x).
	assert.Contains(t, s, "| handover (release, then the next owner's read and write) | 620 µs ±3% (n=2) | 1.40 ms ±14% (n=2) | 2.25x ±11% (n=2) |")
	g := goalLine(t, md, "Handover (release + acquire) with `sync_interval: always`")
	assert.Contains(t, g, "| 2.25x ±11% (n=2) | reported (no goal) | - |")
}

func TestBuildReportsObservedTakeover(t *testing.T) {
	md := string(Build(moreInput(t)).Markdown)
	s := section(t, md, "Observed-expiry takeover")
	assert.Contains(t, s, "Reproduce with `"+moreCommands[2]+"`.")
	assert.Contains(t, s, "| p50 | 4.00 ms ±12% (n=2) |")
	assert.Contains(t, s, "| p99 | 46.0 ms ±9% (n=2) |")
	assert.Contains(t, s, "| max (the largest of any run: 61.0 ms) | 51.5 ms ±18% (n=2) |")
	assert.Contains(t, goalLine(t, md, "Observed-expiry takeover"), "| 46.0 ms ±9% (n=2) | p50 4.00 ms ±12% (n=2) |")
}

func TestBuildReportsSingletonRoutingAgainstPlainNATS(t *testing.T) {
	md := string(Build(moreInput(t)).Markdown)
	s := section(t, md, "Singleton routing")
	assert.Contains(t, s, "Reproduce with `"+moreCommands[4]+"`.")
	// 150/100 and 132/110: the median of the runs' ratios is 1.35x (the
	// ratio of the medians would be 141/105 = 1.34x).
	assert.Contains(t, s, "| p50 | 105 µs ±5% (n=2) | 141 µs ±6% (n=2) | 1.35x ±11% (n=2) |")
	assert.Contains(t, s, "| p99 | 310 µs ±3% (n=2) | 425 µs ±6% (n=2) | 1.38x ±9% (n=2) |")
	assert.Contains(t, s, "| mean | 115 µs ±4% (n=2) | 155 µs ±3% (n=2) | 1.35x ±8% (n=2) |")
	assert.Contains(t, s, "Reproduce with `"+moreCommands[5]+"`.")
	assert.Contains(t, s, "| requests that failed (goal: 0) | 1 ±100% (n=2) |")
	assert.Contains(t, s, "| p99 of the requests that straddled a handover (sent before the step down, answered by the next term) | 50.0 ms ±10% (n=2) |")

	routed := goalLine(t, md, "Singleton request routed to the leader")
	assert.Contains(t, routed, "| 1.35x ±11% (n=2) (p99: 1.38x ±9% (n=2)) |")
	failed := goalLine(t, md, "Singleton requests across handovers")
	assert.True(t, strings.HasSuffix(failed, "| 0 | **missed** |"), "a run failed 2 requests: %s", failed)
}

func TestBuildReportsSharding(t *testing.T) {
	md := string(Build(moreInput(t)).Markdown)
	s := section(t, md, "Sharding")
	for _, row := range []string{
		"| one placement of 1,024 shards over 8 members (a member joined: half of them move) | 420 µs ±5% (n=2) | `" + moreCommands[6] + "` |",
		"| its allocations | 87 ±0% (n=2) |",
		"| one `natsstore.Store.WatchPrefix` of 1,024 held leases: open, read the current state, close | 14.5 ms ±3% (n=2) | `" + moreCommands[3] + "` |",
		"| an open prefix watch: consumers on the server | 1 ±0% (n=2) |",
		"| an open prefix watch: heap after GC (the store's cache and the in-process server's share included) | 903 KB ±3% (n=2) |",
		"| 1,024 shards on 8 members: steady CPU, % of one core for all 8 | 2.75 ±9% (n=2) | `" + moreCommands[7] + "` |",
		"| a ninth member joins: balanced after | 63.0 ms ±5% (n=2) |",
		"| it drains: balanced after | 60.0 ms ±17% (n=2) |",
		"| a ninth member crashes (TTL 10 s): balanced after | 10.0 s ±2% (n=2) |",
	} {
		assert.Contains(t, s, row)
	}
	assert.Contains(t, goalLine(t, md, "1,024 shards on 8 members: balanced again after a ninth member crashes"), "| 10.0 s ±2% (n=2) | after it drains: 60.0 ms ±17% (n=2) |")
}

func TestBuildLeavesOutSectionsNotMeasured(t *testing.T) {
	md := string(Build(testInput(t)).Markdown)
	for _, title := range []string{"Durability", "Observed-expiry takeover", "Singleton routing", "Sharding"} {
		assert.NotContains(t, md, "\n## "+title)
	}
}
