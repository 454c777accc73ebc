package benchreport

import (
	"fmt"
	"regexp"
	"strings"
)

// Names of the durability and observed-expiry benchmarks.
const (
	syncPkg       = "natsstore/embedded"
	syncBench     = "BenchmarkSync/sync="
	observedBench = "BenchmarkObservedTakeover"
)

// syncOps are the operations of BenchmarkSync, with what each writes.
var syncOps = []struct{ op, what string }{
	{"acquire", "acquire (one write of a new key)"},
	{"renew", "renew (one write)"},
	{"handover", "handover (release, then the next owner's read and write)"},
}

// command returns the command of the run that ran the benchmark bench
// (a top-level name) of package pkg, in a code span, or "" if none did: the
// first whose package argument is ./pkg and whose -bench pattern matches
// bench, as go test matches it. Profiling commands are skipped.
func (r *report) command(pkg, bench string) string {
	for _, c := range r.in.Commands {
		f := strings.Fields(c)
		if len(f) == 0 || strings.HasPrefix(c, "#") || strings.Contains(c, "-cpuprofile") || f[len(f)-1] != "./"+pkg {
			continue
		}
		for _, arg := range f {
			pat, ok := strings.CutPrefix(arg, "-bench=")
			if !ok {
				continue
			}
			re, err := regexp.Compile(strings.Trim(pat, "'\""))
			if err == nil && re.MatchString(bench) {
				return "`" + c + "`"
			}
		}
	}
	return ""
}

// reproduce is the sentence that names the command behind a section.
func (r *report) reproduce(pkg, bench string) string {
	if c := r.command(pkg, bench); c != "" {
		return "Reproduce with " + c + ".\n"
	}
	return ""
}

// durability reports what sync_interval: always costs a lease's writes
// (natsstore/embedded.BenchmarkSync): each operation with the server's
// default and with every write flushed, in the same run, and their ratio.
func (r *report) durability() {
	var rows []string
	for _, o := range syncOps {
		def, always := syncBench+"default/"+o.op, syncBench+"always/"+o.op
		d, a := r.spread(syncPkg, def, "ns/op"), r.spread(syncPkg, always, "ns/op")
		if !d.Valid() && !a.Valid() {
			continue
		}
		ratio := Summarize(Ratios(r.values(syncPkg, always, "ns/op"), r.values(syncPkg, def, "ns/op")))
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", o.what, fmtSpread(d, fmtNs), fmtSpread(a, fmtNs), fmtSpread(ratio, fmtRatio)))
		if o.op == "handover" && ratio.Valid() {
			r.goal(goalRow{figure: "Handover (release + acquire) with `sync_interval: always` against the server's default",
				measured: fmtSpread(a, fmtNs), baseline: "default (flush every 2 min): " + fmtSpread(d, fmtNs),
				ratio: fmtSpread(ratio, fmtRatio), goal: "reported (no goal)", status: info})
		}
	}
	if len(rows) == 0 {
		return
	}
	b := &r.body
	b.WriteString("\n## Durability: `sync_interval: always`\n\n`natsstore/embedded.BenchmarkSync` times a lease's writes, one " +
		"client at a time, against an in-process nats-server whose store is on the test's temporary directory: with " +
		"JetStream's default `sync_interval` (files flushed every 2 minutes: a machine that fails can lose acknowledged " +
		"writes) and with `sync_interval: always` (every write flushed before it is acknowledged), one after the other " +
		"in every run. The ratio is always ÷ default, run by run. What the flush costs depends on the disk: this one is " +
		"the machine's, shared with other work.\n\n")
	b.WriteString(r.reproduce(syncPkg, "BenchmarkSync"))
	b.WriteString("\n| operation | default (flush every 2 min) | `sync_interval: always` | always/default |\n|---|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
}

// observed reports the crash takeover of ExpiryObserved mode
// (natsstore.BenchmarkObservedTakeover): how long after the holder's last
// renewal, beyond the TTL, a standby took the lease over.
func (r *report) observed() {
	p50 := r.spread(storePkg, observedBench, "ms-over-ttl-p50")
	if !p50.Valid() {
		return
	}
	p99 := r.spread(storePkg, observedBench, "ms-over-ttl-p99")
	worst := Summarize(r.values(storePkg, observedBench, "ms-over-ttl-max"))
	ms := func(s Spread) string { return fmtSpread(scaleSpread(s, msNs), fmtNs) }
	r.goal(goalRow{figure: "Observed-expiry takeover (servers before 2.11), TTL 1 s: last renewal to taken over, beyond the TTL, p99",
		measured: ms(p99), baseline: "p50 " + ms(p50), goal: "reported (no goal)", status: info})
	b := &r.body
	b.WriteString("\n## Observed-expiry takeover\n\n`natsstore.BenchmarkObservedTakeover`: on servers before 2.11 " +
		"(`natsstore.ExpiryObserved`) a key that expires leaves no marker, so a standby times the holder's TTL itself, " +
		"from the watch event that showed the holder's last renewal. Each iteration has 10 holders (TTL 1 s) renew once " +
		"and then crash, while a standby store polls only every 5 s (the default `StandbyRetryInterval`) otherwise; a " +
		"run is 10 iterations, 100 takeovers. The figures are the time from each holder's last renewal to the standby's " +
		"takeover, minus the TTL: the median over the runs of each run's percentile.\n\n")
	b.WriteString(r.reproduce(storePkg, observedBench))
	b.WriteString("\n| beyond the TTL | median ± spread (runs) |\n|---|---|\n")
	fmt.Fprintf(b, "| p50 | %s |\n| p99 | %s |\n| max (the largest of any run: %s) | %s |\n", ms(p50), ms(p99),
		fmtNs(worst.Max*msNs), ms(worst))
}
