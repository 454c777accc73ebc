package benchreport

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockCrashOutput is the output of the lock takeover benchmarks: locks with
// leases of their own meet the crash goal (TTL 2 s + 250 ms), locks under a
// session with session contenders miss it, with lease contenders meet it.
const lockCrashOutput = `pkg: github.com/asterforge/aster/lock
BenchmarkLockCrashTakeover/lease-2 	 10	 2.2e9 ns/op	 4e6 late-p50-ns	 1.2e7 late-p99-ns	 1.96e9 max-ns	 1.59e9 p50-ns	 1.95e9 p90-ns	 1.96e9 p99-ns	 0.98 p99/ttl	 40 takeovers	 2e9 ttl-ns
BenchmarkLockCrashTakeover/session-2 	 10	 3.0e9 ns/op	 6e8 late-p50-ns	 2e9 late-p99-ns	 3.89e9 max-ns	 1.98e9 p50-ns	 3.8e9 p90-ns	 3.89e9 p99-ns	 1.94 p99/ttl	 40 takeovers	 2e9 ttl-ns
BenchmarkLockCrashTakeover/session-lease-contenders-2 	 10	 2.4e9 ns/op	 7e6 late-p50-ns	 2.1e7 late-p99-ns	 1.89e9 max-ns	 1.63e9 p50-ns	 1.8e9 p90-ns	 1.89e9 p99-ns	 0.95 p99/ttl	 40 takeovers	 2e9 ttl-ns
BenchmarkSessionLockHandover-2 	 10	 5.6e7 ns/op	 40 handovers	 1.2e6 max-ns	 6.8e5 p50-ns	 1.0e6 p90-ns	 1.1e6 p99-ns
`

func TestBuildReportsLockTakeovers(t *testing.T) {
	rs := NewResults()
	require.NoError(t, rs.Parse(strings.NewReader(lockCrashOutput), 2))
	md := string(Build(Input{Results: rs}).Markdown)

	row := goalLine(t, md, "Lock crash takeover, locks with leases of their own")
	assert.Contains(t, row, "| met |")
	assert.Contains(t, row, "p99 <= TTL + 250 ms = 2.25 s")
	assert.Contains(t, row, "0.98x of the TTL")
	row = goalLine(t, md, "Lock crash takeover, locks under a session, contenders under sessions")
	assert.Contains(t, row, "**missed**", "3.89 s > 2.25 s")
	assert.Contains(t, row, "1.98x of theirs", "against the locks with leases of their own")
	assert.Contains(t, goalLine(t, md, "Lock crash takeover, locks under a session, contenders with leases"), "| met |")
	assert.Contains(t, goalLine(t, md, "Lock handover under sessions"), "| met |")
	assert.Contains(t, md, "## Lock takeover")

	// A slow graceful handover misses its goal.
	rs = NewResults()
	require.NoError(t, rs.Parse(strings.NewReader("pkg: github.com/asterforge/aster/lock\n"+
		"BenchmarkSessionLockHandover-2 \t 10\t 5.6e7 ns/op\t 4e6 p50-ns\t 9e6 p90-ns\t 1.2e7 p99-ns\t 2e7 max-ns\n"), 2))
	md = string(Build(Input{Results: rs}).Markdown)
	assert.Contains(t, goalLine(t, md, "Lock handover under sessions"), "**missed**", "12 ms > 10 ms")
	assert.Contains(t, goalLine(t, md, "Lock crash takeover, locks with leases"), "not measured")

	// Pooled samples win over the runs' medians.
	rs = NewResults()
	require.NoError(t, rs.Parse(strings.NewReader(lockCrashOutput), 2))
	md = string(Build(Input{Results: rs, Samples: map[string][]float64{
		"lock-takeover-crash-session": {1.5e9, 1.7e9, 2.0e9, 2.1e9},
	}}).Markdown)
	row = goalLine(t, md, "Lock crash takeover, locks under a session, contenders under sessions")
	assert.Contains(t, row, "| met |")
	assert.Contains(t, row, "4 samples")
}
