package benchreport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runOutput is go test -bench output of every benchmark the report reads,
// two runs each. Acquire meets its goal, renew misses it.
const runOutput = `pkg: github.com/asterforge/aster/natsstore
cpu: Test CPU
BenchmarkStoreVsRawKV/acquire-2 	 1000	 44000 ns/op	 42000 raw-ns/op	 1.05 store/raw	 1.04 store/raw-p50	 30 allocs/op
BenchmarkStoreVsRawKV/acquire-2 	 1000	 46000 ns/op	 42000 raw-ns/op	 1.09 store/raw	 1.06 store/raw-p50	 30 allocs/op
BenchmarkStoreVsRawKV/renew-2 	 1000	 60000 ns/op	 40000 raw-ns/op	 1.50 store/raw	 1.45 store/raw-p50	 30 allocs/op
BenchmarkStoreVsRawKV/renew-2 	 1000	 62000 ns/op	 40000 raw-ns/op	 1.55 store/raw	 1.50 store/raw-p50	 30 allocs/op
pkg: github.com/asterforge/aster/supervision
BenchmarkThroughput-2 	 100	 300000 ns/op	 140 bare-ns/msg	 145 supervised-ns/msg	 0.97 supervised/bare
BenchmarkThroughput-2 	 100	 300000 ns/op	 150 bare-ns/msg	 151 supervised-ns/msg	 0.99 supervised/bare
BenchmarkRestartLatency/actor-2 	 100	 90000 ns/op	 90000 p50-ns	 600000 p99-ns
pkg: github.com/asterforge/aster/actors
BenchmarkHandover/watch-2 	 40	 20000000 ns/op	 900000 p50-ns	 3000000 p99-ns
BenchmarkHandover/poll-2 	 40	 500000000 ns/op	 250000000 p50-ns	 450000000 p99-ns	 500000000 retry-ns
BenchmarkCrashTakeover-2 	 20	 1000000000 ns/op	 700000000 p50-ns	 1400000000 p99-ns	 1000000000 ttl-ns	 500000000 renew-ns
pkg: github.com/asterforge/aster/lock
BenchmarkHeldLocks/locks=10000/acquire=burst-2 	 1	 8e9 ns/op	 2847 B/lock	 345 store-B/lock	 13 stack-B/lock	 0.58 lag-p50-ms	 3.7 lag-p99-ms	 2.0 steady-lag-p99-ms	 5.5 lag-max-ms	 13.2 cpu-us/renewal	 20000 renewals	 0 poisoned
BenchmarkHeldLocks/locks=10000/acquire=paced-2 	 1	 8e9 ns/op	 2800 B/lock	 345 store-B/lock	 10 stack-B/lock	 0.5 lag-p50-ms	 2.0 lag-p99-ms	 2.0 steady-lag-p99-ms	 4.0 lag-max-ms	 12.0 cpu-us/renewal	 20000 renewals	 0 poisoned
BenchmarkHeldLocks/locks=100000/acquire=burst-2 	 1	 2e10 ns/op	 50 acquire-us/lock	 5000 B/lock	 324 store-B/lock	 3017 stack-B/lock	 5.3 lag-p50-ms	 1118 lag-p99-ms	 900 steady-lag-p99-ms	 1736 lag-max-ms	 14.5 cpu-us/renewal	 250000 renewals	 0 poisoned
pkg: github.com/asterforge/aster/lease/leasetest
BenchmarkMemStoreRenew/leases=10000-2 	 700000	 1320 ns/op
`

func testInput(t *testing.T) Input {
	t.Helper()
	rs := NewResults()
	require.NoError(t, rs.Parse(strings.NewReader(runOutput), 2))
	watch := make([]float64, 200)
	for i := range watch {
		watch[i] = float64(500_000 + i*10_000) // 0.5 ms .. 2.49 ms
	}
	return Input{
		Results: rs,
		Samples: map[string][]float64{
			"handover-watch":       watch,
			"handover-watch-event": {400_000, 450_000},
			"handover-raw-watch":   {350_000, 380_000},
			"handover-poll":        {100e6, 300e6, 450e6},
			"takeover-crash":       {700e6, 900e6, 1400e6},
			"takeover-crash-late":  {10e6, 400e6},
		},
		Profiles: map[string]string{
			"natsstore-renew.cpu": "File: x.test\nType: cpu\n      flat  flat%   sum%        cum   cum%\n     1.2s 50% 50% 1.2s 50%  encoding/json.Marshal\n",
		},
		Benchstat: "benchstat summary here\n",
		Commands:  []string{"go test -run='^$' -bench=BenchmarkStoreVsRawKV -count=2 ./natsstore"},
		Machine:   Machine{CPU: "Test CPU", Cores: 2, GoVersion: "go1.26.8", OS: "linux", Arch: "amd64", Date: "2026-11-30T20:00:00Z", Duration: 14 * time.Minute, LoadBefore: "1.00, 2.00, 3.00"},
	}
}

// goalLine returns the goals table row whose figure starts with prefix.
func goalLine(t *testing.T, md, prefix string) string {
	t.Helper()
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(line, "| "+prefix) {
			return line
		}
	}
	t.Fatalf("no goal row %q in:\n%s", prefix, md)
	return ""
}

func TestBuildJudgesGoalsFromTheMeasurements(t *testing.T) {
	out := Build(testInput(t))
	md := string(out.Markdown)

	assert.Contains(t, md, "Test CPU, 2 logical cores, linux/amd64, go1.26.8")
	assert.Contains(t, md, "The run took 14m0s")

	acq := goalLine(t, md, "`acquire`")
	assert.Contains(t, acq, "1.05x ±1% (n=2) (of means: 1.07x ±2% (n=2))", "median of the per-run ratios, with spread")
	assert.True(t, strings.HasSuffix(acq, "| met |"), acq)

	renew := goalLine(t, md, "`renew`")
	assert.Contains(t, renew, "**missed**")
	assert.Contains(t, md, "### `renew` against the raw KV write")
	assert.Contains(t, md, "encoding/json.Marshal", "the profile of a missed goal is shown")
	assert.NotContains(t, md, "Build ID", "profile headers are trimmed")

	rel := goalLine(t, md, "`release`")
	assert.True(t, strings.HasSuffix(rel, "| not measured |"), rel)

	hand := goalLine(t, md, "Graceful handover")
	assert.Contains(t, hand, "p99 2.47 ms", "the p99 of the pooled samples (rank 198 of 200)")
	assert.Contains(t, hand, "200 samples")
	assert.Contains(t, hand, "polling standby (every 500 ms)")
	assert.True(t, strings.HasSuffix(hand, "| met |"), hand)

	crash := goalLine(t, md, "Crash takeover")
	assert.Contains(t, crash, "p99 1.40 s")
	assert.Contains(t, crash, "TTL + 250 ms = 1.25 s")
	assert.True(t, strings.HasSuffix(crash, "| **missed** |"), crash)
	assert.Contains(t, md, "No profile \"actors-crash.cpu\" was collected.")
	assert.Contains(t, md, "the renew period (500 ms here)")

	thr := goalLine(t, md, "Throughput of a supervised actor")
	assert.Contains(t, thr, "0.98x ±1% (n=2)")
	assert.True(t, strings.HasSuffix(thr, "| met |"), thr)

	mem10k := goalLine(t, md, "10k leases held: memory per lease")
	assert.Contains(t, mem10k, "2.79 KB (n=1) (heap 2.78 KB, stacks 13.0 B; acquire=burst, the worse)", "heap and stacks summed per run")
	assert.True(t, strings.HasSuffix(mem10k, "| met |"), mem10k)
	assert.True(t, strings.HasSuffix(goalLine(t, md, "100k leases held: memory per lease"), "| **missed** |"))
	cpu10k := goalLine(t, md, "10k leases held: CPU per renewal")
	assert.Contains(t, cpu10k, "13.2 µs (n=1) (acquire=burst); 12.0 µs (n=1) (acquire=paced)")
	assert.Contains(t, cpu10k, "10.00x (acquire=burst)", "against MemStore.Renew alone")
	assert.Contains(t, goalLine(t, md, "100k leases held: CPU per renewal"), "14.5 µs")
	assert.True(t, strings.HasSuffix(goalLine(t, md, "10k leases held: renewal lag p99 (acquire=burst)"), "| met |"))
	assert.True(t, strings.HasSuffix(goalLine(t, md, "10k leases held: renewal lag p99 (acquire=paced)"), "| met |"))
	lag100k := goalLine(t, md, "100k leases held: renewal lag p99 (acquire=burst)")
	assert.Contains(t, lag100k, "1.12 s (n=1)")
	assert.Contains(t, lag100k, "after the first renewal of every lock: 900 ms (n=1)")
	assert.True(t, strings.HasSuffix(lag100k, "| **missed** |"), lag100k)
	assert.Contains(t, md, "The 100k locks were taken in 5.00 s, so their renewals come due within that time of each "+
		"other, every period; at 14.5 µs of CPU per renewal, renewing all of them once takes 1.45 s of CPU, 725 ms of "+
		"wall time on 2 cores if nothing else ran.")
	assert.True(t, strings.HasSuffix(goalLine(t, md, "100k leases held: renewal lag p99 (acquire=paced)"), "| not measured |"))
	require.Contains(t, out.Figures, LeasesFigure)
	lnames := wellFormed(t, out.Figures[LeasesFigure])
	assert.Equal(t, 2*3+1*3+6, lnames["circle"], "burst: 2 sizes x 3 series, paced: 1 size x 3; and a dot per series in the legend")

	assert.Contains(t, md, "go test -run='^$' -bench=BenchmarkStoreVsRawKV -count=2 ./natsstore")
	assert.Contains(t, md, "benchstat summary here")
	assert.Contains(t, md, "![Handover latency distribution]("+HandoverFigure+")")

	require.Contains(t, out.Figures, HandoverFigure)
	names := wellFormed(t, out.Figures[HandoverFigure])
	assert.Equal(t, 5, names["polyline"], "one line per sample set plotted")
}

func TestBuildWithNothingMeasured(t *testing.T) {
	out := Build(Input{})
	md := string(out.Markdown)
	assert.NotContains(t, md, "| met |")
	assert.NotContains(t, md, "missed")
	assert.Contains(t, md, "not measured")
	for _, svg := range out.Figures {
		wellFormed(t, svg)
	}
}

func TestLoadAndWrite(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	_, err := Load(dir, 2)
	require.Error(t, err, "no benchmark output")

	write("all.bench.txt", runOutput)
	write("samples/handover-watch.txt", "1000000\n\n2000000\n")
	write("prof/natsstore-renew.cpu.top.txt", "flat flat%\n")
	write("benchstat.txt", "stats\n")
	write("commands.txt", "go test a\ngo test b\n")
	write("start", time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)+"\n")
	write("load-before", "0.50 0.60 0.70 1/100 12345\n")
	write("warnings.txt", "lock: go test exited 1 after every benchmark passed: goleak: found goroutines\n")

	in, err := Load(dir, 2)
	require.NoError(t, err)
	assert.NotNil(t, in.Results.Get("natsstore", "BenchmarkStoreVsRawKV/renew"))
	assert.Equal(t, []float64{1e6, 2e6}, in.Samples["handover-watch"])
	assert.Equal(t, "flat flat%\n", in.Profiles["natsstore-renew.cpu"])
	assert.Equal(t, "stats\n", in.Benchstat)
	assert.Equal(t, []string{"go test a", "go test b"}, in.Commands)
	assert.Equal(t, "0.50, 0.60, 0.70", in.Machine.LoadBefore)
	assert.Equal(t, []string{"lock: go test exited 1 after every benchmark passed: goleak: found goroutines"}, in.Warnings)
	assert.InDelta(t, time.Minute, in.Machine.Duration, float64(30*time.Second))

	write("samples/bad.txt", "12\nnot a number\n")
	_, err = Load(dir, 2)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bad.txt:2")
	require.NoError(t, os.Remove(filepath.Join(dir, "samples/bad.txt")))

	md := filepath.Join(dir, "docs", "benchmarks.md")
	require.NoError(t, Write(Build(in), md))
	b, err := os.ReadFile(md)
	require.NoError(t, err)
	assert.Contains(t, string(b), "# Benchmarks")
	assert.Contains(t, string(b), "- lock: go test exited 1 after every benchmark passed")
	svg, err := os.ReadFile(filepath.Join(dir, "docs", HandoverFigure))
	require.NoError(t, err)
	wellFormed(t, svg)
}

func TestTopLines(t *testing.T) {
	p := "File: a.test\nBuild ID: x\nType: cpu\nTime: now\nShowing nodes\n      flat  flat%   sum%        cum   cum%\n a\n b\n c\n"
	assert.Equal(t, "Type: cpu\nShowing nodes\n      flat  flat%   sum%        cum   cum%\n a\n b\n", topLines(p, 2))
}

func TestSummarizeTop(t *testing.T) {
	p := `Type: cpu
      flat  flat%   sum%        cum   cum%
     0.97s  8.64%  8.64%      0.97s  8.64%  runtime.spanClass.sizeclass (inline)
     0.45s  4.01% 12.64%      0.45s  4.01%  internal/runtime/maps.ctrlGroup.matchH2 (inline)
     0.37s  3.29% 15.94%      0.52s  4.63%  internal/sync.(*Mutex).Lock
     0.10s  0.89% 47.28%      0.24s  2.14%  github.com/asynkron/protoactor-go/internal/queue/mpsc.(*Queue).Push
     0.10s  0.50% 47.28%      0.24s  2.14%  github.com/asterforge/aster/actors.(*watchdog).renew
`
	assert.Equal(t, "By package, these 5 entries (17.3% of the samples, flat) are: Go runtime (GC, maps, scheduler, timers) 12.7%, "+
		"sync 3.3%, protoactor-go 0.9%, aster 0.5%.", summarizeTop(p))
	assert.Empty(t, summarizeTop("no profile here"))
}
