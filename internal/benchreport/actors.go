package benchreport

import "fmt"

// holdPkg is the package of the held-lease machinery's benchmarks.
const holdPkg = "leasehold"

// actorsSection reports the held-lease machinery's micro-benchmarks
// (internal/leasehold): no goals, but the costs the lock and the supervisor
// are built from.
func (r *report) actorsSection() {
	rows := []struct{ bench, unit, what string }{
		{"BenchmarkWatchdogFootprint", "bytes/watchdog", "live heap per idle watchdog (Hold, actor, mailbox, timer), 10,000 alive"},
		{"BenchmarkWatchdogFootprint", "ns/spawn", "time to spawn one watchdog"},
		{"BenchmarkHoldToken", "ns/op", "reading the fencing token before a fenced write (parallel)"},
		{"BenchmarkHoldToken", "allocs/op", "allocations per token read"},
		{"BenchmarkWatchdogRenewal", "ns/op", "one renewal through the watchdog actor (Extend round trip, in-memory store)"},
		{"BenchmarkWatchdogRenewal", "allocs/op", "allocations per renewal through the watchdog"},
	}
	var lines []string
	for _, row := range rows {
		s := r.spread(holdPkg, row.bench, row.unit)
		if !s.Valid() {
			continue
		}
		f := fmtNs
		switch row.unit {
		case "bytes/watchdog":
			f = fmtBytes
		case "allocs/op":
			f = fmtCount
		}
		lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s |", row.bench, row.unit, fmtSpread(s, f), row.what))
	}
	if len(lines) == 0 {
		return
	}
	b := &r.body
	b.WriteString("\n## Held leases\n\nThe building blocks the lock and the supervisor are made of (internal/leasehold; no goals of their own).\n\n")
	b.WriteString("| benchmark | metric | median ± spread (runs) | what |\n|---|---|---|---|\n")
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
}
