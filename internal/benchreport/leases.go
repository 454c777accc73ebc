package benchreport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Names of the lock scale benchmarks (package lock).
const (
	leasesPkg  = "lock"
	heldLocks  = "BenchmarkHeldLocks/locks="
	renewalCPU = "BenchmarkRenewalCPU/locks="

	memoryGoal = 4096  // bytes per held lease, at most
	lagGoalMs  = 100.0 // renewal lag p99, at most
)

// goalSizes are the numbers of leases the goals are about.
var goalSizes = []int{10_000, 100_000}

// heldSizes returns the sizes BenchmarkHeldLocks ran with, ascending.
func (r *report) heldSizes() []int {
	var sizes []int
	for _, b := range r.in.Results.Benchmarks() {
		if !strings.HasSuffix(b.Pkg, "/"+leasesPkg) && b.Pkg != leasesPkg {
			continue
		}
		for _, prefix := range []string{heldLocks, renewalCPU} {
			if s, ok := strings.CutPrefix(b.Name, prefix); ok {
				if n, err := strconv.Atoi(s); err == nil && !slices.Contains(sizes, n) {
					sizes = append(sizes, n)
				}
			}
		}
	}
	slices.Sort(sizes)
	return sizes
}

func (r *report) leases() {
	sizes := r.heldSizes()
	for _, n := range goalSizes {
		held, cpu := heldLocks+strconv.Itoa(n), renewalCPU+strconv.Itoa(n)
		heapMem := r.spread(leasesPkg, held, "B/lock")
		stackMem := r.spread(leasesPkg, held, "stack-B/lock")
		mem := Summarize(sums(r.values(leasesPkg, held, "B/lock"), r.values(leasesPkg, held, "stack-B/lock")))
		storeMem := r.spread(leasesPkg, held, "store-B/lock")
		lag := r.spread(leasesPkg, held, "lag-p99-ms")
		lagMax := r.spread(leasesPkg, held, "lag-max-ms")
		cpuPer := r.spread(leasesPkg, cpu, "cpu-ns/renewal")
		storeCPU := r.spread(leasesPkg, cpu, "store-cpu-ns/renewal")
		label := countAxis(float64(n))
		profiles := []string{fmt.Sprintf("lock-held-%d.cpu", n), fmt.Sprintf("lock-held-%d.mem", n)}

		g := goalRow{figure: fmt.Sprintf("%s leases held: memory per lease (heap + stacks)", label), goal: "<= " + fmtBytes(memoryGoal), profiles: profiles[1:]}
		if mem.Valid() {
			g.measured = fmt.Sprintf("%s (heap %s, stacks %s)", fmtSpread(mem, fmtBytes), fmtBytes(heapMem.Median), fmtBytes(stackMem.Median))
			g.baseline = "the MemStore's own entries: " + fmtSpread(storeMem, fmtBytes)
			g.ratio = fmtRatio(mem.Median / storeMem.Median)
			g.status = verdict(mem.Median <= memoryGoal)
			g.why = fmt.Sprintf("Per held lock, once all were acquired: live heap after GC %s (the store's entries, %s, "+
				"included), and goroutine stack memory %s more than before the locks were taken. The goal is judged "+
				"on their sum: a lock holds no goroutine by design, so stacks that grow with the number of locks are "+
				"goroutines (actor mailboxes) busy with a backlog of work.",
				fmtSpread(heapMem, fmtBytes), fmtBytes(storeMem.Median), fmtSpread(stackMem, fmtBytes))
		}
		r.goal(g)

		c := goalRow{figure: fmt.Sprintf("%s leases held: CPU per renewal", label), goal: "reported (no goal)"}
		if cpuPer.Valid() {
			c.measured = fmtSpread(cpuPer, fmtNs)
			c.baseline = "MemStore.Renew alone: " + fmtSpread(storeCPU, fmtNs)
			c.ratio = fmtRatio(cpuPer.Median / storeCPU.Median)
			c.status = info
		}
		r.goal(c)

		l := goalRow{figure: fmt.Sprintf("%s leases held: renewal lag p99", label), goal: fmt.Sprintf("<= %s", fmtNs(lagGoalMs*1e6)), profiles: profiles[:1]}
		if lag.Valid() {
			l.measured = fmtSpread(scaleSpread(lag, 1e6), fmtNs)
			l.status = verdict(lag.Median <= lagGoalMs)
			l.why = fmt.Sprintf("How late renewals were sent relative to when they were due, p99 of each run's "+
				"renewals; the worst renewal of a run was late by %s (median of the runs). In the CPU benchmark the "+
				"process renewed %s leases per second, at %s of CPU each: %.2f cores busy with renewals alone, "+
				"of %d. Goroutine stacks grew by %s per lock while the locks were held.",
				fmtNs(lagMax.Median*1e6), fmtCount(r.spread(leasesPkg, cpu, "renewals/s").Median), fmtNs(cpuPer.Median),
				r.spread(leasesPkg, cpu, "renewals/s").Median*cpuPer.Median/1e9, r.in.Machine.Cores,
				fmtBytes(r.spread(leasesPkg, held, "stack-B/lock").Median))
		}
		r.goal(l)
	}

	b := &r.body
	b.WriteString("\n## Leases held by one process\n\n")
	b.WriteString("`lock.BenchmarkHeldLocks` holds N locks of one `lock.Locker` on an in-memory store (so that the store's\n" +
		"server is not what is measured), TTL 9 s, renewed every 3 s, and observes them for 7.5 s: live heap per\n" +
		"lock after GC, and how late each renewal was sent relative to when it was due. `lock.BenchmarkRenewalCPU`\n" +
		"holds the same number of locks and divides the process's CPU time (getrusage) over two renew periods by the\n" +
		"renewals made in them; its baseline is `MemStore.Renew` called alone as many times, in the same run.\n\n")
	b.WriteString("| leases | memory per lease | store's share | stacks per lease | lag p50 | lag p99 | lag max | CPU per renewal | renewals/s | poisoned |\n" +
		"|---:|---|---|---|---|---|---|---|---|---|\n")
	var p50s, p99s, maxs []float64
	for _, n := range sizes {
		held, cpu := heldLocks+strconv.Itoa(n), renewalCPU+strconv.Itoa(n)
		ms := func(unit string) Spread { return scaleSpread(r.spread(leasesPkg, held, unit), 1e6) }
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", countAxis(float64(n)),
			fmtSpread(r.spread(leasesPkg, held, "B/lock"), fmtBytes), fmtSpread(r.spread(leasesPkg, held, "store-B/lock"), fmtBytes),
			fmtSpread(r.spread(leasesPkg, held, "stack-B/lock"), fmtBytes),
			fmtSpread(ms("lag-p50-ms"), fmtNs), fmtSpread(ms("lag-p99-ms"), fmtNs), fmtSpread(ms("lag-max-ms"), fmtNs),
			fmtSpread(r.spread(leasesPkg, cpu, "cpu-ns/renewal"), fmtNs), fmtSpread(r.spread(leasesPkg, cpu, "renewals/s"), fmtCount),
			fmtSpread(r.spread(leasesPkg, held, "poisoned"), fmtCount))
		p50s = append(p50s, ms("lag-p50-ms").Median)
		p99s = append(p99s, ms("lag-p99-ms").Median)
		maxs = append(maxs, ms("lag-max-ms").Median)
	}
	fmt.Fprintf(b, "\n![Leases held against renewal lag](%s)\n", LeasesFigure)

	xs := make([]float64, len(sizes))
	for i, n := range sizes {
		xs[i] = float64(n)
	}
	p := Plot{
		Title: "Renewal lag against leases held by one process (median of runs)",
		X:     Axis{Label: "leases held (log scale)", Log: true, Format: countAxis},
		Y:     Axis{Label: "renewal lag (log scale)", Log: true, Format: durAxis},
		Series: []Series{
			{Name: "lag p50", X: xs, Y: p50s, Markers: true},
			{Name: "lag p99", X: xs, Y: p99s, Markers: true},
			{Name: "lag max", X: xs, Y: maxs, Markers: true, Dashed: true},
		},
		Refs: []Ref{{Label: "goal: p99 " + fmtNs(lagGoalMs*1e6), Value: lagGoalMs * 1e6}},
	}
	r.figs[LeasesFigure] = p.SVG()
}

// sums returns a[i]+b[i] for the runs that have both.
func sums(a, b []float64) []float64 {
	out := make([]float64, 0, min(len(a), len(b)))
	for i := range min(len(a), len(b)) {
		out = append(out, a[i]+b[i])
	}
	return out
}

// scaleSpread multiplies every figure of s by k (milliseconds to
// nanoseconds).
func scaleSpread(s Spread, k float64) Spread {
	if !s.Valid() {
		return s
	}
	return Spread{N: s.N, Median: s.Median * k, Min: s.Min * k, Max: s.Max * k}
}
