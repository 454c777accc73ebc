package benchreport

import (
	"fmt"
	"math"
	"strings"
)

// Names of the lock benchmarks on natsstore (package lock).
const (
	acquireRelease = "BenchmarkAcquireRelease/"
	newLocker      = "BenchmarkNew"
	heldNATS       = "BenchmarkHeldLocksNATS/locks="
	lockHandover   = "BenchmarkLockHandover/candidates="
	lockerLife     = "BenchmarkLockerLife/own="

	acquireGoal       = 1.1    // lock/raw2-p50, at most
	newGoalNs         = 100e3  // lock.New, at most
	sessionCPUGoal    = 0.2    // session/lease CPU per lock at 10k, at most
	sessionCoresGoal  = 0.05   // cores with 100k locks under a session, at most
	handover3GoalMs   = 5.0    // p99 with 3 candidates, at most
	handover100GoalMs = 10.0   // p99 with 100 candidates in 4 Lockers, at most
	msNs              = 1e6    // nanoseconds per millisecond
	usNs              = 1e3    // nanoseconds per microsecond
	coreFmtDigits     = "%.4f" // cores
)

func heldNATSName(n int, mode string) string { return fmt.Sprintf("%s%d/mode=%s", heldNATS, n, mode) }

func fmtCores(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf(coreFmtDigits+" cores", v)
}

// locks reports the lock's goals on natsstore: an uncontended acquisition
// against the raw writes it is made of, lock.New, the steady CPU of many
// held locks (with leases of their own, and under a session), and graceful
// handovers between many candidates.
func (r *report) locks() {
	// Uncontended Acquire + Release against two raw KV writes.
	for _, mode := range []string{"lease", "session", "try"} {
		name := acquireRelease + mode
		ratio := r.spread(leasesPkg, name, "lock/raw2-p50")
		what := map[string]string{
			"lease":   "Acquire + Release, a lock with a lease of its own",
			"session": "Acquire + Release, a lock under the session",
			"try":     "TryAcquire + Release, a lock with a lease of its own",
		}[mode]
		prof := "lock-acquire-" + mode + ".cpu"
		if mode == "try" {
			prof = "lock-acquire-lease.cpu"
		}
		g := goalRow{figure: "Uncontended " + what + ", against two raw KV writes (p50)",
			goal: fmt.Sprintf("<= %.1fx", acquireGoal), profiles: []string{prof}}
		if ratio.Valid() {
			g.measured = "mean " + fmtSpread(r.spread(leasesPkg, name, "ns/op"), fmtNs)
			g.baseline = "two raw writes, mean " + fmtSpread(r.spread(leasesPkg, name, "raw2-ns/op"), fmtNs)
			g.ratio = fmtSpread(ratio, fmtRatio) + " (of means: " + fmtSpread(r.spread(leasesPkg, name, "lock/raw2"), fmtRatio) + ")"
			g.status = verdict(ratio.Median <= acquireGoal)
			g.why = "The lock's own work on top of the store's two writes (a put and a delete marker): the Guard, " +
				"its Hold, a fresh term (crypto/rand), the metrics, the local queue, about 4 µs of CPU time in all " +
				"(Acquire + Release on the in-memory store), and the store's own share of each write"
			if a := r.spread(storePkg, "BenchmarkStoreVsRawKV/acquire", "store/raw-p50"); a.Valid() {
				rel := r.spread(storePkg, "BenchmarkStoreVsRawKV/release", "store/raw-p50")
				g.why += fmt.Sprintf(" (acquire %s and release %s of the raw write in this run)", fmtRatio(a.Median),
					fmtRatio(rel.Median))
			}
			if out := r.spread(leasesPkg, name, "outside-ns/op"); out.Valid() {
				g.why += fmt.Sprintf("; of the lock's mean, %s was spent outside the store's calls", fmtSpread(out, fmtNs))
			}
			g.why += ", on a machine whose two cores the server shares. The profile shows where the client's time goes."
		}
		r.goal(g)
	}

	// lock.New.
	if s := r.spread(leasesPkg, newLocker, "ns/op"); s.Valid() {
		first := r.spread(leasesPkg, newLocker, "first-lock-us")
		r.goal(goalRow{figure: "lock.New", measured: fmtSpread(s, fmtNs),
			baseline: "New to its first lock taken (on the in-memory store): " +
				fmtSpread(scaleSpread(first, usNs), fmtNs),
			goal: "<= " + fmtNs(newGoalNs), status: verdict(s.Median <= newGoalNs)})
	}
	r.goal(r.lockerLife())

	// Steady CPU of held locks, client and server together.
	lease10, sess10 := heldNATSName(10_000, "lease"), heldNATSName(10_000, "session")
	lc, sc := r.spread(leasesPkg, lease10, "cores"), r.spread(leasesPkg, sess10, "cores")
	g := goalRow{figure: "10k locks held on NATS: steady CPU, client and server, under a session against a lease per lock",
		goal: fmt.Sprintf("<= %.1fx", sessionCPUGoal), profiles: []string{"lock-held-nats-session.cpu"}}
	if lc.Valid() && sc.Valid() {
		g.measured, g.baseline = fmtSpread(sc, fmtCores), "a lease per lock: "+fmtSpread(lc, fmtCores)
		ratio := Summarize(Ratios(r.values(leasesPkg, sess10, "cores"), r.values(leasesPkg, lease10, "cores")))
		g.ratio = fmtSpread(ratio, fmtRatio)
		g.status = verdict(ratio.Median <= sessionCPUGoal)
	}
	r.goal(g)
	s100 := r.spread(leasesPkg, heldNATSName(100_000, "session"), "cores")
	g = goalRow{figure: "100k locks held under a session on NATS: steady CPU, client and server",
		goal: "<= " + fmtCores(sessionCoresGoal), profiles: []string{"lock-held-nats-session.cpu"}}
	if s100.Valid() {
		g.measured, g.status = fmtSpread(s100, fmtCores), verdict(s100.Median <= sessionCoresGoal)
	}
	r.goal(g)
	if cpu := r.spread(leasesPkg, lease10, "cpu-us/renewal"); cpu.Valid() {
		r.goal(goalRow{figure: "10k locks held on NATS, a lease per lock: CPU per renewal, client and server",
			measured: fmtSpread(scaleSpread(cpu, usNs), fmtNs), baseline: "renewals: " +
				fmtSpread(r.spread(leasesPkg, lease10, "renewals"), fmtCount) + " a run",
			goal: "reported (no goal)", status: info})
	}

	// Graceful handover between candidates.
	for _, h := range []struct {
		name, figure string
		goalMs       float64
	}{
		{"3", "Lock handover, 3 candidates in 3 Lockers, release to acquired, p99", handover3GoalMs},
		{"100", "Lock handover, 100 candidates in 4 Lockers, release to acquired, p99", handover100GoalMs},
		{"100/session", "Lock handover, 100 candidates in 4 Lockers under sessions, release to acquired, p99", handover100GoalMs},
	} {
		name := lockHandover + h.name
		p99 := r.spread(leasesPkg, name, "p99-ms")
		g := goalRow{figure: h.figure, goal: "p99 <= " + fmtNs(h.goalMs*msNs), profiles: []string{"lock-handover-100.cpu"}}
		if p99.Valid() {
			g.measured = fmtSpread(scaleSpread(p99, msNs), fmtNs)
			g.baseline = "p50 " + fmtSpread(scaleSpread(r.spread(leasesPkg, name, "p50-ms"), msNs), fmtNs)
			g.status = verdict(p99.Median <= h.goalMs)
		}
		r.goal(g)
	}
	r.lockTakeover()
	r.locksSection()
}

// locksSection describes the lock benchmarks on natsstore.
func (r *report) locksSection() {
	var rows []string
	for _, n := range []struct {
		locks int
		mode  string
	}{{10_000, "lease"}, {10_000, "session"}, {100_000, "session"}} {
		name := heldNATSName(n.locks, n.mode)
		cores := r.spread(leasesPkg, name, "cores")
		if !cores.Valid() {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s |", countAxis(float64(n.locks)), n.mode,
			fmtSpread(cores, fmtCores), fmtSpread(r.spread(leasesPkg, name, "cpu-ns/lock-s"), fmtNs),
			fmtSpread(r.spread(leasesPkg, name, "renewals"), fmtCount),
			fmtSpread(r.spread(leasesPkg, name, "B/lock"), fmtBytes),
			fmtSpread(scaleSpread(r.spread(leasesPkg, name, "acquire-us/lock"), usNs), fmtNs)))
	}
	if len(rows) == 0 {
		return
	}
	b := &r.body
	b.WriteString("\n## Locks on NATS\n\n`lock.BenchmarkHeldLocksNATS` holds N locks of one `lock.Locker` on `natsstore` against an " +
		"in-process nats-server, at the default TTL (30 s, renewed every 10 s), and measures the CPU time of the whole " +
		"process, client and server together, over 1.5 renew periods: `lease` gives every lock a lease and a watchdog of its " +
		"own, `session` holds the locks under the Locker's session (one lease, one watchdog, one renewal per period). " +
		"Memory is the process's live heap per lock after GC, the server's included.\n\n")
	b.WriteString("| locks | mode | steady CPU | CPU per lock and second | renewals seen | memory per lock | acquire per lock (8 goroutines) |\n")
	b.WriteString("|---:|---|---|---|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
}

// lockerLife is a short-lived Locker's whole life (New, one lock taken and
// released, Close) with an actor system of its own, beside the same with
// one System shared by every Locker, in the same run: what starting the
// actor system costs.
func (r *report) lockerLife() goalRow {
	g := goalRow{figure: "A short-lived Locker's whole life (New, TryAcquire, Release, Close; in-memory store), " +
		"its own actor system against a shared one", goal: "reported (no goal)"}
	own, shared := r.spread(leasesPkg, lockerLife+"true", "ns/op"), r.spread(leasesPkg, lockerLife+"false", "ns/op")
	if !own.Valid() {
		return g
	}
	g.measured = fmtSpread(own, fmtNs)
	g.baseline = "one System given to every Locker (Config.System): " + fmtSpread(shared, fmtNs)
	g.ratio = fmtRatio(own.Median / shared.Median)
	g.status = info
	return g
}
