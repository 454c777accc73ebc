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
	Stubborn     int // workloads built to ignore their cancellation that outlived their validity
	Notes        string
}

// Goals, reported (never asserted).
type Goals struct {
	TTL            time.Duration
	CrashSlack     time.Duration // crash takeover within TTL + CrashSlack at p99
	GracefulLimit  time.Duration // graceful handover within this at p99
	MinHandovers   int
	MinScenarios   int
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
		if r.Stubborn > 0 {
			notes = join(notes, fmt.Sprintf("%d workload(s) ignoring their cancellation outlived their validity (fenced)", r.Stubborn))
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
	fmt.Fprintf(&b, "- 0 violations over at least %d handovers in at least %d scenarios: %d violations over %d handovers "+
		"in %d scenarios: %s.\n", g.MinHandovers, g.MinScenarios, violations, handovers, len(rows),
		verdict(violations == 0 && handovers >= g.MinHandovers && len(rows) >= g.MinScenarios))
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

// Failover is one cluster fault measured at one TTL and renew interval:
// the stream's own unavailability, and the gap it left in the leader's
// fenced writes.
type Failover struct {
	Fault     string
	TTL       time.Duration
	Renew     time.Duration // the renew interval; 0: the lease default (TTL/3)
	Runs      int
	Stream    check.Summary // the longest gap between successful probe writes to the stream
	Work      check.Summary // the longest gap between accepted fenced writes of the lease
	Beyond    check.Summary // Work - Stream, run by run (negative: the workload ran through the outage)
	Handovers int           // handovers of the lease over the runs
	Notes     string
}

// FailoverMarkdown renders fs as a table; a row with a renew interval of
// its own names it beside the TTL.
func FailoverMarkdown(fs []Failover) string {
	var b strings.Builder
	b.WriteString("| fault | TTL | runs | stream unavailable p50 / max | workload gap p50 / max | gap beyond the stream's p50 / max | handovers | notes |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|\n")
	pm := func(s check.Summary) string {
		if s.N == 0 {
			return "n/a"
		}
		return signed(s.P50) + " / " + signed(s.Max)
	}
	for _, f := range fs {
		ttl := f.TTL.String()
		if f.Renew > 0 {
			ttl += ", renew " + f.Renew.String()
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %d | %s |\n", f.Fault, ttl, f.Runs, pm(f.Stream), pm(f.Work),
			pm(f.Beyond), f.Handovers, f.Notes)
	}
	return b.String()
}

func signed(d time.Duration) string {
	if d < 0 {
		return "-" + ms(-d)
	}
	return ms(d)
}
