package benchreport

import "fmt"

// Names of the store benchmarks (package natsstore).
const (
	storePkg   = "natsstore"
	storeBench = "BenchmarkStoreVsRawKV/"

	storeGoal = 1.1 // store op / raw KV write, at most
)

func (r *report) storeOps() {
	b := &r.body
	b.WriteString("\n## Store operations against the raw KV write\n\n")
	b.WriteString("`natsstore.BenchmarkStoreVsRawKV` times each store operation and one raw KV write side by side in every\n" +
		"iteration, in alternating order: the raw write is the primitive the store's writes are made of, a conditional\n" +
		"publish to a key of the same bucket with the expected last sequence and a per-message TTL, on a connection of\n" +
		"its own (for release, a delete marker, as Release writes). Acquire is timed on its fast path (a key this store released itself: one round trip). `store/raw-p50`\n" +
		"is the ratio of a run's median latencies, which a burst of load from other processes skews less than\n" +
		"`store/raw`, the ratio of its means; the goal is judged on the former, the median of the runs. Allocations\n" +
		"count everything an iteration does: the timed operation, the raw write and, for acquire and release, the\n" +
		"untimed operation that restores the key.\n\n")
	b.WriteString("| operation | store (mean) | raw KV write (mean) | store/raw | store/raw-p50 | allocs per iteration |\n|---|---|---|---|---|---|\n")
	for _, op := range []string{"acquire", "renew", "release"} {
		name := storeBench + op
		store, raw := r.spread(storePkg, name, "ns/op"), r.spread(storePkg, name, "raw-ns/op")
		ratio, ratio50 := r.spread(storePkg, name, "store/raw"), r.spread(storePkg, name, "store/raw-p50")
		allocs := r.spread(storePkg, name, "allocs/op")
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", op, fmtSpread(store, fmtNs), fmtSpread(raw, fmtNs),
			fmtSpread(ratio, fmtRatio), fmtSpread(ratio50, fmtRatio), fmtSpread(allocs, fmtCount))
		g := goalRow{figure: "`" + op + "` against the raw KV write", goal: fmt.Sprintf("<= %.1fx", storeGoal),
			profiles: []string{"natsstore-" + op + ".cpu"}}
		if ratio50.Valid() {
			g.measured = "mean " + fmtSpread(store, fmtNs)
			g.baseline = "mean " + fmtSpread(raw, fmtNs)
			g.ratio = fmt.Sprintf("%s (of means: %s)", fmtSpread(ratio50, fmtRatio), fmtSpread(ratio, fmtRatio))
			g.status = verdict(ratio50.Median <= storeGoal)
			g.why = fmt.Sprintf("The ratio of the median latencies ranged from %s to %s over the runs (of the means: "+
				"%s to %s); the store's %s took %s more than the raw write on average. The CPU profile below "+
				"keeps only the store's own call tree (cumulative): what the store does around its one write.",
				fmtRatio(ratio50.Min), fmtRatio(ratio50.Max), fmtRatio(ratio.Min), fmtRatio(ratio.Max), op,
				fmtNs(store.Median-raw.Median))
			if o, p := r.spread(storePkg, "BenchmarkOverhead/renew", "ns/op"), r.spread(storePkg, "BenchmarkOverhead/acquire-release", "ns/op"); o.Valid() && p.Valid() {
				g.why += fmt.Sprintf(" Without a server (a fake KV that acknowledges at once, BenchmarkOverhead), the "+
					"store's own work costs %s per Renew and %s per Release and Acquire pair.", fmtNs(o.Median), fmtNs(p.Median))
			}
		}
		r.goal(g)
	}

	// The store's own cost (no server), its throughput and its watch.
	var more []string
	for _, m := range []struct{ bench, unit, what string }{
		{"BenchmarkOverhead/renew", "ns/op", "Renew with a fake KV that acknowledges at once: the store's own cost"},
		{"BenchmarkOverhead/renew", "allocs/op", "allocations of that Renew"},
		{"BenchmarkOverhead/acquire-release", "ns/op", "Release then Acquire with the fake KV"},
		{"BenchmarkOverhead/acquire-release", "allocs/op", "allocations of that pair"},
		{"BenchmarkRenewals/owners-1", "renewals/s", "renewals per second through one store, 1 owner"},
		{"BenchmarkRenewals/owners-8", "renewals/s", "the same, 8 owners renewing concurrently"},
		{"BenchmarkRenewals/owners-64", "renewals/s", "the same, 64 owners"},
		{"BenchmarkWatchRelease", "p50-ns", "Release returning to a standby store's watch reporting it free, p50"},
		{"BenchmarkWatchRelease", "p99-ns", "the same, p99"},
	} {
		s := r.spread(storePkg, m.bench, m.unit)
		if !s.Valid() {
			continue
		}
		f := fmtNs
		if m.unit != "ns/op" && m.unit != "p50-ns" && m.unit != "p99-ns" {
			f = fmtCount
		}
		more = append(more, fmt.Sprintf("| %s | %s | %s | %s |", m.bench, m.unit, fmtSpread(s, f), m.what))
	}
	if len(more) > 0 {
		b.WriteString("\nThe store's other benchmarks, from the same run:\n\n| benchmark | metric | median ± spread (runs) | what |\n|---|---|---|---|\n")
		for _, l := range more {
			b.WriteString(l + "\n")
		}
	}
}
