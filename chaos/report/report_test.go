package report_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/chaos/check"
	"github.com/asterforge/aster/chaos/report"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMarkdown(t *testing.T) {
	g := report.Goals{TTL: time.Second, CrashSlack: 250 * time.Millisecond, GracefulLimit: 10 * time.Millisecond,
		MinHandovers: 10, MinScenarios: 2, CrashScenarios: []string{"kill"}, Graceful: []string{"graceful"}}
	rows := []report.Row{
		{Scenario: "kill", Runs: 3, Handovers: 3, Takeover: check.Summary{N: 3, P50: time.Second, P99: 1300 * time.Millisecond},
			Cause: "kill", Linearizable: "ok"},
		{Scenario: "graceful", Runs: 9, Handovers: 9, Violations: 1, LateStops: 2,
			Takeover: check.Summary{N: 9, P50: 1500 * time.Microsecond, P99: 4 * time.Millisecond}, Cause: "release", Linearizable: "ok"},
	}
	md := report.Markdown(rows, g, "# Reliability\n")
	assert.Contains(t, md, "| kill | 3 | 3 | 0 | 1000 ms | 1300 ms | kill | ok |")
	assert.Contains(t, md, "| graceful | 9 | 9 | 1 | 1.50 ms | 4.00 ms | release | ok | 2 workload(s)")
	assert.Contains(t, md, "**12** | **1**")
	assert.Contains(t, md, "1 violations over 12 handovers in 2 scenarios: **missed**")
	assert.Contains(t, md, "worst p99 1300 ms (kill): **missed**")
	assert.Contains(t, md, "worst p99 4.00 ms (graceful): met")
}

func TestFailoverMarkdown(t *testing.T) {
	md := report.FailoverMarkdown([]report.Failover{{Fault: "stream leader killed", TTL: 3 * time.Second, Runs: 2,
		Stream: check.Summary{N: 2, P50: 4 * time.Second, Max: 5 * time.Second},
		Work:   check.Summary{N: 2, P50: 20 * time.Millisecond, Max: 30 * time.Millisecond},
		Beyond: check.Summary{N: 2, P50: -3980 * time.Millisecond, Max: -4970 * time.Millisecond}, Handovers: 0}})
	assert.Contains(t, md, "| stream leader killed | 3s | 2 | 4000 ms / 5000 ms | 20 ms / 30 ms | -3980 ms / -4970 ms | 0 |")

	md = report.FailoverMarkdown([]report.Failover{{Fault: "rolling-restart", TTL: 15 * time.Second,
		Renew: 2 * time.Second, Runs: 3, Handovers: 1}})
	assert.Contains(t, md, "| rolling-restart | 15s, renew 2s | 3 | n/a | n/a | n/a | 1 |")
}
