package benchreport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Names of the lock scale benchmark (package lock) and its store baseline
// (package lease/leasetest).
const (
	leasesPkg    = "lock"
	heldLocks    = "BenchmarkHeldLocks/locks="
	memStorePkg  = "leasetest"
	memStoreRenw = "BenchmarkMemStoreRenew/leases="

	memoryGoal = 4096  // bytes per held lease, at most
	lagGoalMs  = 100.0 // renewal lag p99, at most
)

// acquireModes are BenchmarkHeldLocks's ways of taking the locks: all at
// once, so that their renewals come due in bursts, or spread over a renew
// period.
var acquireModes = []string{"burst", "paced"}

// goalSizes are the numbers of leases the goals are about.
var goalSizes = []int{10_000, 100_000}

func heldName(n int, mode string) string { return heldLocks + strconv.Itoa(n) + "/acquire=" + mode }

// heldSizes returns the sizes BenchmarkHeldLocks ran with, ascending.
func (r *report) heldSizes() []int {
	var sizes []int
	for _, b := range r.in.Results.Benchmarks() {
		if b.Pkg != leasesPkg && !strings.HasSuffix(b.Pkg, "/"+leasesPkg) {
			continue
		}
		if s, ok := strings.CutPrefix(b.Name, heldLocks); ok {
			s, _, _ = strings.Cut(s, "/")
			if n, err := strconv.Atoi(s); err == nil && !slices.Contains(sizes, n) {
				sizes = append(sizes, n)
			}
		}
	}
	slices.Sort(sizes)
	return sizes
}

// leases reports BenchmarkHeldLocks: the goals on memory, CPU and renewal
// lag for each goal size, then the table of every size and the figure.
func (r *report) leases() {
	for _, n := range goalSizes {
		r.goal(r.heldMemoryGoal(n))
		r.goal(r.heldCPUGoal(n))
		for _, mode := range acquireModes {
			r.goal(r.heldLagGoal(n, mode))
		}
	}
	r.heldTable()
}

// heldProfiles are the CPU and memory profiles of n locks held.
func heldProfiles(n int) []string {
	return []string{fmt.Sprintf("lock-held-%d.cpu", n), fmt.Sprintf("lock-held-%d.mem", n)}
}

// heldMemoryGoal is the memory per lease of n locks held, the worse of the
// two ways of acquiring.
func (r *report) heldMemoryGoal(n int) goalRow {
	g := goalRow{figure: fmt.Sprintf("%s leases held: memory per lease (heap + stacks)", countAxis(float64(n))),
		goal: "<= " + fmtBytes(memoryGoal), profiles: heldProfiles(n)[1:]}
	worst, worstMode := Spread{}, ""
	for _, mode := range acquireModes {
		name := heldName(n, mode)
		s := Summarize(sums(r.values(leasesPkg, name, "B/lock"), r.values(leasesPkg, name, "stack-B/lock")))
		if s.Valid() && (!worst.Valid() || s.Median > worst.Median) {
			worst, worstMode = s, mode
		}
	}
	if !worst.Valid() {
		return g
	}
	name := heldName(n, worstMode)
	heapMem, stackMem := r.spread(leasesPkg, name, "B/lock"), r.spread(leasesPkg, name, "stack-B/lock")
	storeMem := r.spread(leasesPkg, name, "store-B/lock")
	g.measured = fmt.Sprintf("%s (heap %s, stacks %s; acquire=%s, the worse)", fmtSpread(worst, fmtBytes),
		fmtBytes(heapMem.Median), fmtBytes(stackMem.Median), worstMode)
	g.baseline = "the MemStore's own entries: " + fmtSpread(storeMem, fmtBytes)
	g.ratio = fmtRatio(worst.Median / storeMem.Median)
	g.status = verdict(worst.Median <= memoryGoal)
	g.why = fmt.Sprintf("Per held lock, once all were acquired (acquire=%s): live heap after GC %s (the "+
		"store's entries, %s, included), and goroutine stack memory %s more than before the locks were "+
		"taken. The goal is judged on their sum: a lock holds no goroutine of its own, so stacks that grow "+
		"with the number of locks are goroutines (actor mailboxes, timers) busy with a backlog of work.",
		worstMode, fmtSpread(heapMem, fmtBytes), fmtBytes(storeMem.Median), fmtSpread(stackMem, fmtBytes))
	return g
}

// heldCPUGoal is the CPU per renewal of n locks held, against
// MemStore.Renew alone.
func (r *report) heldCPUGoal(n int) goalRow {
	c := goalRow{figure: fmt.Sprintf("%s leases held: CPU per renewal", countAxis(float64(n))), goal: "reported (no goal)"}
	base := r.spread(memStorePkg, memStoreRenw+strconv.Itoa(n), "ns/op")
	var parts []string
	for _, mode := range acquireModes {
		if s := r.spread(leasesPkg, heldName(n, mode), "cpu-us/renewal"); s.Valid() {
			parts = append(parts, fmt.Sprintf("%s (acquire=%s)", fmtSpread(scaleSpread(s, 1e3), fmtNs), mode))
			if c.ratio == "" && base.Valid() {
				c.ratio = fmtRatio(s.Median*1e3/base.Median) + " (acquire=" + mode + ")"
			}
		}
	}
	if len(parts) > 0 {
		c.measured = strings.Join(parts, "; ")
		c.baseline = "MemStore.Renew alone: " + fmtSpread(base, fmtNs)
		c.status = info
	}
	return c
}

// heldLagGoal is the renewal lag p99 of n locks held, acquired in mode.
func (r *report) heldLagGoal(n int, mode string) goalRow {
	name := heldName(n, mode)
	lag := r.spread(leasesPkg, name, "lag-p99-ms")
	l := goalRow{figure: fmt.Sprintf("%s leases held: renewal lag p99 (acquire=%s)", countAxis(float64(n)), mode),
		goal: "<= " + fmtNs(lagGoalMs*1e6), profiles: heldProfiles(n)[:1]}
	if !lag.Valid() {
		return l
	}
	l.measured = fmtSpread(scaleSpread(lag, 1e6), fmtNs)
	if steady := r.spread(leasesPkg, name, "steady-lag-p99-ms"); steady.Valid() {
		l.baseline = "after the first renewal of every lock: " + fmtSpread(scaleSpread(steady, 1e6), fmtNs)
	}
	l.status = verdict(lag.Median <= lagGoalMs)
	cpu := r.spread(leasesPkg, name, "cpu-us/renewal").Median
	rate := r.spread(leasesPkg, name, "renewals").Median
	l.why = fmt.Sprintf("How late renewals were sent relative to when they were due, p99 of each run's "+
		"renewals while observing (%s renewals a run); the worst renewal of a run was late by %s "+
		"(median of the runs). CPU per renewal was %s; goroutine stacks grew by %s per lock "+
		"while the locks were held.",
		fmtCount(rate), fmtNs(r.spread(leasesPkg, name, "lag-max-ms").Median*1e6), fmtNs(cpu*1e3),
		fmtBytes(r.spread(leasesPkg, name, "stack-B/lock").Median))
	if acq := r.spread(leasesPkg, name, "acquire-us/lock"); mode == "burst" && acq.Valid() && r.in.Machine.Cores > 0 {
		work := float64(n) * cpu * 1e3 // ns of CPU per burst
		l.why += fmt.Sprintf(" The %s locks were taken in %s, so their renewals come due within that "+
			"time of each other, every period; at %s of CPU per renewal, renewing all of them once "+
			"takes %s of CPU, %s of wall time on %d cores if nothing else ran.",
			countAxis(float64(n)), fmtNs(acq.Median*1e3*float64(n)), fmtNs(cpu*1e3), fmtNs(work),
			fmtNs(work/float64(r.in.Machine.Cores)), r.in.Machine.Cores)
	}
	return l
}

// heldTable writes the section on every size BenchmarkHeldLocks ran with,
// and its figure.
func (r *report) heldTable() {
	b := &r.body
	b.WriteString("\n## Leases held by one process\n\n")
	b.WriteString("`lock.BenchmarkHeldLocks` holds N locks of one `lock.Locker` on an in-memory store (so that no store\n" +
		"server is measured), TTL 15 s, renewed every 5 s, and observes them for 2.5 renew periods. `acquire=burst`\n" +
		"takes the locks as fast as it can, so that their renewals come due together, period after period;\n" +
		"`acquire=paced` spreads the acquisitions over one renew period, as locks taken over time would be. It\n" +
		"reports the live heap per lock after GC (the store's entries included), the goroutine stack memory per\n" +
		"lock, how late each renewal was sent relative to when it was due (and the same after every lock's first\n" +
		"renewal: steady), and the process's CPU time per renewal while observing. `leasetest.BenchmarkMemStoreRenew`\n" +
		"times `MemStore.Renew` alone, round-robin over as many leases: the store's share of a renewal.\n\n")
	b.WriteString("| leases | acquire | memory per lease (heap) | stacks per lease | store's share | lag p50 | lag p99 | steady lag p99 | lag max | CPU per renewal | poisoned |\n" +
		"|---:|---|---|---|---|---|---|---|---|---|---|\n")
	lines := map[string][3][]float64{} // per mode: p50, p99, max
	for _, n := range r.heldSizes() {
		for _, mode := range acquireModes {
			if l, ok := r.heldRow(n, mode); ok {
				lines[mode] = [3][]float64{append(lines[mode][0], l[0]...), append(lines[mode][1], l[1]...),
					append(lines[mode][2], l[2]...)}
			}
		}
	}
	fmt.Fprintf(b, "\n![Leases held against renewal lag](%s)\n", LeasesFigure)
	r.figs[LeasesFigure] = heldFigure(lines)
}

// heldRow writes the table's row for n locks acquired in mode, if measured,
// and returns its points of the figure: (n, lag) for p50, p99 and max.
func (r *report) heldRow(n int, mode string) (pts [3][]float64, ok bool) {
	name := heldName(n, mode)
	ms := func(unit string) Spread { return scaleSpread(r.spread(leasesPkg, name, unit), 1e6) }
	if !r.spread(leasesPkg, name, "B/lock").Valid() {
		return pts, false
	}
	fmt.Fprintf(&r.body, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", countAxis(float64(n)), mode,
		fmtSpread(r.spread(leasesPkg, name, "B/lock"), fmtBytes), fmtSpread(r.spread(leasesPkg, name, "stack-B/lock"), fmtBytes),
		fmtBytes(r.spread(leasesPkg, name, "store-B/lock").Median),
		fmtSpread(ms("lag-p50-ms"), fmtNs), fmtSpread(ms("lag-p99-ms"), fmtNs), fmtSpread(ms("steady-lag-p99-ms"), fmtNs),
		fmtSpread(ms("lag-max-ms"), fmtNs), fmtSpread(scaleSpread(r.spread(leasesPkg, name, "cpu-us/renewal"), 1e3), fmtNs),
		fmtSpread(r.spread(leasesPkg, name, "poisoned"), fmtCount))
	for i, unit := range []string{"lag-p50-ms", "lag-p99-ms", "lag-max-ms"} {
		pts[i] = []float64{float64(n), ms(unit).Median}
	}
	return pts, true
}

// heldFigure draws the renewal lag against the leases held, per mode, from
// (n, lag) pairs for p50, p99 and max.
func heldFigure(lines map[string][3][]float64) []byte {
	p := Plot{
		Title: "Renewal lag against leases held by one process (median of runs)",
		X:     Axis{Label: "leases held (log scale)", Log: true, Format: countAxis},
		Y:     Axis{Label: "renewal lag (log scale)", Log: true, Format: durAxis},
		Refs:  []Ref{{Label: "goal: p99 " + fmtNs(lagGoalMs*1e6), Value: lagGoalMs * 1e6}},
	}
	for _, mode := range acquireModes {
		for i, q := range []string{"p50", "p99", "max"} {
			pts := lines[mode][i]
			if len(pts) == 0 {
				continue
			}
			var xs, ys []float64
			for j := 0; j+1 < len(pts); j += 2 {
				xs, ys = append(xs, pts[j]), append(ys, pts[j+1])
			}
			p.Series = append(p.Series, Series{Name: fmt.Sprintf("lag %s, acquire=%s", q, mode), X: xs, Y: ys,
				Markers: true, Dashed: mode == "paced", Color: palette[i]})
		}
	}
	return p.SVG()
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
