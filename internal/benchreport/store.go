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
		"its own. Acquire is timed on its fast path (a key this store released itself: one round trip). `store/raw`\n" +
		"is the ratio of the means of a run, `store/raw-p50` the ratio of its medians.\n\n")
	b.WriteString("| operation | store | raw KV write | store/raw | store/raw-p50 | allocs/op (store + raw) |\n|---|---|---|---|---|---|\n")
	for _, op := range []string{"acquire", "renew", "release"} {
		name := storeBench + op
		store, raw := r.spread(storePkg, name, "ns/op"), r.spread(storePkg, name, "raw-ns/op")
		ratio, ratio50 := r.spread(storePkg, name, "store/raw"), r.spread(storePkg, name, "store/raw-p50")
		allocs := r.spread(storePkg, name, "allocs/op")
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", op, fmtSpread(store, fmtNs), fmtSpread(raw, fmtNs),
			fmtSpread(ratio, fmtRatio), fmtSpread(ratio50, fmtRatio), fmtSpread(allocs, sig))
		g := goalRow{figure: "`" + op + "` against the raw KV write", goal: fmt.Sprintf("<= %.1fx", storeGoal),
			profiles: []string{"natsstore-" + op + ".cpu"}}
		if ratio.Valid() {
			g.measured = fmtSpread(store, fmtNs)
			g.baseline = fmtSpread(raw, fmtNs)
			g.ratio = fmtSpread(ratio, fmtRatio)
			g.status = verdict(ratio.Median <= storeGoal)
			g.why = fmt.Sprintf("The store's %s took %s more than the raw write (medians of the runs' means); over "+
				"the runs the ratio ranged from %s to %s, and the ratio of the medians was %s. The CPU profile "+
				"of the benchmark (store operations, raw writes and the in-process server together) shows "+
				"where the time goes.",
				op, fmtNs(store.Median-raw.Median), fmtRatio(ratio.Min), fmtRatio(ratio.Max), fmtSpread(ratio50, fmtRatio))
		}
		r.goal(g)
	}
}
