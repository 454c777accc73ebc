package benchreport

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func renewCPUInput(t *testing.T, out string) Input {
	t.Helper()
	rs := NewResults()
	require.NoError(t, rs.Parse(strings.NewReader(out), 2))
	return Input{Results: rs, Machine: Machine{Cores: 2}, Profiles: map[string]string{
		renewCPUProfile:          "Type: cpu\n      flat  flat%   sum%        cum   cum%\n     140ms  7.33%  7.33%      140ms  7.33%  runtime.lock2\n",
		renewCPUProfile + "-cum": "Type: cpu\n      flat  flat%   sum%        cum   cum%\n      70ms  3.66%  3.66%     1040ms 54.45%  github.com/asterforge/aster/internal/leasehold.(*watchdog).fire\n",
	}}
}

// The CPU-per-renewal rows and section come from the benchmark output: the
// in-memory store against the 15 µs goal, the NATS client with the server
// in a child process against the same goal, and the profile.
func TestRenewCPUFromTheRun(t *testing.T) {
	md := string(Build(renewCPUInput(t, `pkg: github.com/asterforge/aster/internal/leasehold
BenchmarkWatchdogRenewCPU-2 	 20000	 50000 ns/op	 8400 cpu-ns/renewal	 1000 store-cpu-ns/renewal
BenchmarkWatchdogRenewCPU-2 	 20000	 50000 ns/op	 8600 cpu-ns/renewal	 1100 store-cpu-ns/renewal
BenchmarkWatchdogRenewCPUNATS-2 	 5000	 200000 ns/op	 31000 cpu-ns/renewal	 25000 store-cpu-ns/renewal	 60000 server-cpu-ns/renewal	 55000 store-server-cpu-ns/renewal
BenchmarkWatchdogRenewCPUNATS-2 	 5000	 200000 ns/op	 33000 cpu-ns/renewal	 27000 store-cpu-ns/renewal	 62000 server-cpu-ns/renewal	 57000 store-server-cpu-ns/renewal	 29000 raw-kv-cpu-ns/update	 35000 raw-kv-server-cpu-ns/update
`)).Markdown)
	mem := goalLine(t, md, "CPU per renewal, 1,000 watchdogs")
	assert.Contains(t, mem, "8.50 µs")
	assert.Contains(t, mem, "MemStore.Renew alone: 1.05 µs")
	assert.Contains(t, mem, "8.10x")
	assert.True(t, strings.HasSuffix(mem, "| <= 15.0 µs | met |"), mem)
	nats := goalLine(t, md, "Client CPU per renewal on NATS")
	assert.Contains(t, nats, "32.0 µs")
	assert.Contains(t, nats, "(the server's: 61.0 µs")
	assert.True(t, strings.HasSuffix(nats, "| <= 15.0 µs | **missed** |"), nats)
	assert.Contains(t, md, "\n## Missed goals and why\n\nWhat partial runs and profiles found")
	assert.Contains(t, md, "[performance.md](performance.md)")
	assert.Contains(t, md, "\n## CPU per renewal\n")
	assert.Contains(t, md, "| BenchmarkWatchdogRenewCPUNATS | server-cpu-ns/renewal | 61.0 µs")
	assert.Contains(t, md, "| BenchmarkWatchdogRenewCPUNATS | raw-kv-cpu-ns/update | 29.0 µs")
	assert.Contains(t, md, "`KeyValue.Update`, one call after the other on keys of another bucket, costs 29.0 µs of client CPU in the same run")
	assert.Contains(t, md, "runtime.lock2")
	assert.Contains(t, md, "(*watchdog).fire")
}

// Output of the benchmark from before the server moved to a child process
// (no server figures) gets no verdict on NATS: its figures include the
// server's CPU.
func TestRenewCPUWithTheServerInProcess(t *testing.T) {
	md := string(Build(renewCPUInput(t, `pkg: github.com/asterforge/aster/internal/leasehold
BenchmarkWatchdogRenewCPUNATS-2 	 5000	 200000 ns/op	 89000 cpu-ns/renewal	 96000 store-cpu-ns/renewal
`)).Markdown)
	row := goalLine(t, md, "CPU per renewal on NATS, client and in-process server together")
	assert.Contains(t, row, "89.0 µs")
	assert.True(t, strings.HasSuffix(row, "| - |"), row)
	assert.Contains(t, goalLine(t, md, "CPU per renewal, 1,000 watchdogs"), "| not measured |")
}

// Without the benchmarks, there is neither row nor section.
func TestRenewCPUNotRun(t *testing.T) {
	md := string(Build(Input{}).Markdown)
	assert.NotContains(t, md, "CPU per renewal, 1,000 watchdogs")
	assert.NotContains(t, md, "## CPU per renewal")
}
