package benchreport

import (
	"fmt"
	"strings"
)

// Names of the sharding benchmarks.
const (
	shardPkg    = "shard"
	placeBench  = "BenchmarkPlace1024"
	fleetBench  = "BenchmarkFleet1024"
	prefixBench = "BenchmarkWatchPrefix1024"
)

// sharding reports the shard package's costs: one placement, one prefix
// watch over the fleet's keys (natsstore), and a fleet of 1,024 shards on
// 8 members that a ninth joins, leaves and crashes from.
func (r *report) sharding() {
	var rows []string
	add := func(what string, s Spread, f func(float64) string, pkg, bench string) {
		if s.Valid() {
			rows = append(rows, fmt.Sprintf("| %s | %s | %s |", what, fmtSpread(s, f), dash(r.command(pkg, bench))))
		}
	}
	ms := func(pkg, bench, unit string) Spread { return scaleSpread(r.spread(pkg, bench, unit), msNs) }
	add("one placement of 1,024 shards over 8 members (a member joined: half of them move)", r.spread(shardPkg, placeBench, "ns/op"), fmtNs, shardPkg, placeBench)
	add("its allocations", r.spread(shardPkg, placeBench, "allocs/op"), fmtCount, shardPkg, placeBench)
	add("one `natsstore.Store.WatchPrefix` of 1,024 held leases: open, read the current state, close", r.spread(storePkg, prefixBench, "ns/op"), fmtNs, storePkg, prefixBench)
	add("an open prefix watch: consumers on the server", r.spread(storePkg, prefixBench, "consumers"), fmtCount, storePkg, prefixBench)
	add("an open prefix watch: goroutines", r.spread(storePkg, prefixBench, "goroutines"), fmtCount, storePkg, prefixBench)
	add("an open prefix watch: heap after GC (the store's cache and the in-process server's share included)", r.spread(storePkg, prefixBench, "heap-B"), fmtBytes, storePkg, prefixBench)
	add("1,024 shards on 8 members: steady CPU, % of one core for all 8", r.spread(shardPkg, fleetBench, "cpu-%"), fmtCount, shardPkg, fleetBench)
	add("the first balance, the 8 members starting together", ms(shardPkg, fleetBench, "first-balance-ms"), fmtNs, shardPkg, fleetBench)
	add("a ninth member joins: balanced after", ms(shardPkg, fleetBench, "join-balance-ms"), fmtNs, shardPkg, fleetBench)
	add("it drains: balanced after", ms(shardPkg, fleetBench, "drain-balance-ms"), fmtNs, shardPkg, fleetBench)
	add("a ninth member crashes (TTL 10 s): balanced after", ms(shardPkg, fleetBench, "crash-balance-ms"), fmtNs, shardPkg, fleetBench)
	if len(rows) == 0 {
		return
	}
	if s := ms(shardPkg, fleetBench, "crash-balance-ms"); s.Valid() {
		r.goal(goalRow{figure: "1,024 shards on 8 members: balanced again after a ninth member crashes (TTL 10 s)",
			measured: fmtSpread(s, fmtNs), baseline: "after it drains: " + fmtSpread(ms(shardPkg, fleetBench, "drain-balance-ms"), fmtNs),
			goal: "reported (no goal)", status: info})
	}
	b := &r.body
	b.WriteString("\n## Sharding\n\n`shard.BenchmarkPlace1024` computes one placement, what every instance does after a " +
		"change of the fleet. `natsstore.BenchmarkWatchPrefix1024` opens one watch of a prefix with 1,024 held leases " +
		"(what a fleet's members and `aster shards --watch` read), against an in-process nats-server, and reports what " +
		"an open watch holds, averaged over 8 open at once. `shard.BenchmarkFleet1024` runs 1,024 shards on 8 members " +
		"in one process, in real time, over the in-memory store (TTL 10 s, renewals every 3.3 s); per iteration a " +
		"ninth member joins and drains, and once a run a ninth member joins and crashes (cut from the store: its " +
		"shards wait out their TTL). A member's time to balance runs until every shard is held by a running member " +
		"and every member holds its share.\n\n")
	b.WriteString("| figure | median ± spread (runs) | command |\n|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
}
