package benchreport

import "fmt"

// Names of the supervision benchmarks.
const (
	supervisionPkg = "supervision"
	throughput     = "BenchmarkThroughput"
	restartActor   = "BenchmarkRestartLatency/actor"
	restartFunc    = "BenchmarkRestartLatency/func"

	throughputGoal = 0.95 // supervised/bare, at least
)

func (r *report) supervision() {
	ratio := r.spread(supervisionPkg, throughput, "supervised/bare")
	sup := r.spread(supervisionPkg, throughput, "supervised-ns/msg")
	bare := r.spread(supervisionPkg, throughput, "bare-ns/msg")
	g := goalRow{figure: "Throughput of a supervised actor against a bare protoactor-go actor",
		goal: fmt.Sprintf(">= %.2fx", throughputGoal), profiles: []string{"supervision-throughput.cpu"}}
	if ratio.Valid() {
		g.measured = fmtSpread(sup, func(v float64) string { return fmtNs(v) + "/msg" })
		g.baseline = "bare: " + fmtSpread(bare, func(v float64) string { return fmtNs(v) + "/msg" })
		g.ratio = fmtSpread(ratio, fmtRatio)
		g.status = verdict(ratio.Median >= throughputGoal)
		g.why = fmt.Sprintf("The ratio is the median over each run of the per-round ratios (one batch to each actor, "+
			"alternating); its runs ranged from %s to %s.", fmtRatio(ratio.Min), fmtRatio(ratio.Max))
	}
	r.goal(g)
	for _, rl := range []struct{ name, bench string }{
		{"Restart latency of a supervised actor (panic to restarted)", restartActor},
		{"Restart latency of a supervised function child", restartFunc},
	} {
		p50, p99 := r.spread(supervisionPkg, rl.bench, "p50-ns"), r.spread(supervisionPkg, rl.bench, "p99-ns")
		row := goalRow{figure: rl.name, goal: "reported (no goal)"}
		if p50.Valid() {
			row.measured = fmt.Sprintf("p50 %s, p99 %s", fmtSpread(p50, fmtNs), fmtSpread(p99, fmtNs))
			row.status = info
		}
		r.goal(row)
	}

	b := &r.body
	b.WriteString("\n## Supervision\n\n")
	b.WriteString("`supervision.BenchmarkThroughput` sends batches of messages to a bare protoactor-go actor and to the same\n" +
		"actor as a child of a supervision tree, alternating, in one run. `supervision.BenchmarkRestartLatency` times a\n" +
		"child's failure to its next incarnation running, with an immediate backoff.\n\n")
	b.WriteString("| benchmark | metric | median ± spread (runs) |\n|---|---|---|\n")
	for _, m := range []struct{ bench, unit string }{
		{throughput, "bare-ns/msg"}, {throughput, "supervised-ns/msg"}, {throughput, "supervised/bare"},
		{restartActor, "p50-ns"}, {restartActor, "p99-ns"}, {restartFunc, "p50-ns"}, {restartFunc, "p99-ns"},
	} {
		s := r.spread(supervisionPkg, m.bench, m.unit)
		f := fmtNs
		if m.unit == "supervised/bare" {
			f = fmtRatio
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", m.bench, m.unit, fmtSpread(s, f))
	}
}
