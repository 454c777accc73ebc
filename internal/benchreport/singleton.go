package benchreport

import "fmt"

// Names of the singleton benchmarks.
const (
	singletonPkg    = "singleton"
	requestBench    = "BenchmarkRequest/"
	requestHandover = "BenchmarkRequestHandover"
)

// singleton reports requests routed to the leader against plain NATS
// request/reply, measured side by side in every run, and requests across
// handovers.
func (r *report) singleton() {
	plain, routed := requestBench+"plain", requestBench+"routed"
	ratio := func(unit string) Spread {
		return Summarize(Ratios(r.values(singletonPkg, routed, unit), r.values(singletonPkg, plain, unit)))
	}
	us := func(s Spread) string { return fmtSpread(scaleSpread(s, usNs), fmtNs) }
	type row struct{ what, plain, routed, ratio string }
	var rows []row
	if p := r.spread(singletonPkg, plain, "p50-µs"); p.Valid() {
		rp50, rp99 := ratio("p50-µs"), ratio("p99-µs")
		rows = append(rows,
			row{"p50", us(p), us(r.spread(singletonPkg, routed, "p50-µs")), fmtSpread(rp50, fmtRatio)},
			row{"p99", us(r.spread(singletonPkg, plain, "p99-µs")), us(r.spread(singletonPkg, routed, "p99-µs")), fmtSpread(rp99, fmtRatio)},
			row{"mean", fmtSpread(r.spread(singletonPkg, plain, "ns/op"), fmtNs), fmtSpread(r.spread(singletonPkg, routed, "ns/op"), fmtNs),
				fmtSpread(ratio("ns/op"), fmtRatio)})
		r.goal(goalRow{figure: "Singleton request routed to the leader against a plain NATS request (p50)",
			measured: us(r.spread(singletonPkg, routed, "p50-µs")), baseline: "plain request/reply: " + us(p),
			ratio: fmtSpread(rp50, fmtRatio) + " (p99: " + fmtSpread(rp99, fmtRatio) + ")", goal: "reported (no goal)", status: info})
	}
	failed := r.spread(singletonPkg, requestHandover, "failed")
	if failed.Valid() {
		r.goal(goalRow{figure: "Singleton requests across handovers (4 callers, the leader resigns every iteration): failed requests",
			measured: fmtSpread(failed, fmtCount) + " a run", baseline: "requests answered: " +
				fmtSpread(r.spread(singletonPkg, requestHandover, "requests"), fmtCount) + " a run",
			goal: "0", status: verdict(failed.Max == 0)})
	}
	if len(rows) == 0 && !failed.Valid() {
		return
	}
	b := &r.body
	b.WriteString("\n## Singleton routing\n")
	if len(rows) > 0 {
		b.WriteString("\n`singleton.BenchmarkRequest` sends one request at a time to a leader serving with `Serve`, through " +
			"`Client.Request`, and, as the baseline, a plain NATS request to a fixed responder, with the same connections " +
			"(one for the caller, one for the responder) and payload, against an in-process nats-server. Both run in " +
			"every run, one after the other; the ratio is routed ÷ plain, run by run: the cost of routing.\n\n")
		b.WriteString(r.reproduce(singletonPkg, "BenchmarkRequest"))
		b.WriteString("\n| latency | plain NATS request | routed to the leader | routed/plain |\n|---|---|---|---|\n")
		for _, x := range rows {
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", x.what, x.plain, x.routed, x.ratio)
		}
	}
	if failed.Valid() {
		ms := func(unit string) string {
			return fmtSpread(scaleSpread(r.spread(singletonPkg, requestHandover, unit), msNs), fmtNs)
		}
		b.WriteString("\n`singleton.BenchmarkRequestHandover` keeps 4 callers sending requests (a deadline of 1 s each) " +
			"to two instances while the leader steps down (`Resign`) once an iteration, 100 iterations a run.\n\n")
		b.WriteString(r.reproduce(singletonPkg, requestHandover))
		b.WriteString("\n| figure | median ± spread (runs) |\n|---|---|\n")
		fmt.Fprintf(b, "| requests that failed (goal: 0) | %s |\n", fmtSpread(failed, fmtCount))
		fmt.Fprintf(b, "| requests answered | %s |\n", fmtSpread(r.spread(singletonPkg, requestHandover, "requests"), fmtCount))
		fmt.Fprintf(b, "| p99 of the requests that straddled a handover (sent before the step down, answered by the next term) | %s |\n", ms("straddle-p99-ms"))
		fmt.Fprintf(b, "| p99 of the handovers (Resign called to the next term answering) | %s |\n", ms("handover-p99-ms"))
		fmt.Fprintf(b, "| p99 of Resign itself | %s |\n", ms("resign-p99-ms"))
	}
}
