// Package report renders the results of the chaos suite as the Markdown
// table of docs/reliability.md.
package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/asterforge/aster/chaos/check"
)

// Row is the result of one scenario.
type Row struct {
	Scenario    string
	Description string
	Runs        int // faults injected (or cycles run)
	Handovers   int
	Violations  int
	Takeover    check.Summary // latency from the cause to the new owner's workload
	Cause       string        // which handovers Takeover measures
	// Linearizable is porcupine's verdict on the store history: "ok",
	// "illegal" or "unknown" (the check timed out).
	Linearizable string
	LateStops    int // workloads of paused processes that outlived their validity
	Excused      int // overlaps caused by an operator's tampering
	Notes        string
}

// Goals of issue 8, reported (never asserted).
type Goals struct {
	TTL            time.Duration
	CrashSlack     time.Duration // crash takeover within TTL + CrashSlack at p99
	GracefulLimit  time.Duration // graceful handover within this at p99
	MinHandovers   int
	CrashScenarios []string
	Graceful       []string
}

// Markdown renders rows and the verdict on goals.
func Markdown(rows []Row, g Goals, header string) string {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("\n| scenario | runs | handovers | violations | takeover p50 | takeover p99 | measured from | linearizable | notes |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---|---|---|\n")
	var handovers, violations int
	for _, r := range rows {
		handovers += r.Handovers
		violations += r.Violations
		p50, p99 := "n/a", "n/a"
		if r.Takeover.N > 0 {
			p50, p99 = ms(r.Takeover.P50), ms(r.Takeover.P99)
		}
		notes := r.Notes
		if r.LateStops > 0 {
			notes = join(notes, fmt.Sprintf("%d workload(s) of paused processes outlived their validity (fenced)", r.LateStops))
		}
		if r.Excused > 0 {
			notes = join(notes, fmt.Sprintf("%d overlap(s) caused by tampering (fenced)", r.Excused))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s | %s | %s | %s |\n",
			r.Scenario, r.Runs, r.Handovers, r.Violations, p50, p99, cause(r), r.Linearizable, notes)
	}
	fmt.Fprintf(&b, "| **all** | | **%d** | **%d** | | | | | |\n\n", handovers, violations)

	b.WriteString("## Goals\n\n")
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	fmt.Fprintf(&b, "- 0 violations over at least %d handovers: %d violations over %d handovers: %s.\n",
		g.MinHandovers, violations, handovers, verdict(violations == 0 && handovers >= g.MinHandovers))
	crash := worst(rows, g.CrashScenarios)
	limit := g.TTL + g.CrashSlack
	fmt.Fprintf(&b, "- Crash takeover within TTL + %s = %s at p99: %s: %s.\n", ms(g.CrashSlack), ms(limit),
		describe(crash), verdict(crash.ok && crash.p99 <= limit))
	grace := worst(rows, g.Graceful)
	fmt.Fprintf(&b, "- Graceful handover (release to the new owner's workload running) within %s at p99: %s: %s.\n",
		ms(g.GracefulLimit), describe(grace), verdict(grace.ok && grace.p99 <= g.GracefulLimit))
	return b.String()
}

type worstP99 struct {
	ok       bool
	p99      time.Duration
	scenario string
}

// worst returns the highest p99 among the named scenarios.
func worst(rows []Row, names []string) worstP99 {
	var w worstP99
	for _, r := range rows {
		for _, n := range names {
			if r.Scenario == n && r.Takeover.N > 0 && (!w.ok || r.Takeover.P99 > w.p99) {
				w = worstP99{ok: true, p99: r.Takeover.P99, scenario: r.Scenario}
			}
		}
	}
	return w
}

func describe(w worstP99) string {
	if !w.ok {
		return "not measured"
	}
	return fmt.Sprintf("worst p99 %s (%s)", ms(w.p99), w.scenario)
}

func cause(r Row) string {
	if r.Cause == "" {
		return "-"
	}
	return r.Cause
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// ms formats d in milliseconds with one decimal below 10 ms.
func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}
