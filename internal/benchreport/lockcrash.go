package benchreport

import (
	"fmt"
	"math"
	"time"
)

// Names of the lock takeover benchmarks on natsstore (package lock) and of
// their samples.
const (
	lockCrash           = "BenchmarkLockCrashTakeover/"
	sessionHandover     = "BenchmarkSessionLockHandover"
	lockCrashSample     = "lock-takeover-crash-"
	sessionHandoverName = "lock-handover-session"

	sessionHandoverGoal = 10 * time.Millisecond // graceful handover of a session lock at p99
)

// lockCrashModes are BenchmarkLockCrashTakeover's sub-benchmarks, with what
// each measures.
var lockCrashModes = []struct{ mode, what string }{
	{"lease", "locks with leases of their own"},
	{"session", "locks under a session, contenders under sessions"},
	{"session-lease-contenders", "locks under a session, contenders with leases of their own"},
}

// lockTakeover reports the lock's takeover goals: a killed holder's locks
// taken within TTL + crashSlack at p99 (with leases of their own, and under
// a session: the same goal), and graceful handovers of session locks.
func (r *report) lockTakeover() {
	lease := r.latency(lockCrashSample+"lease", leasesPkg, lockCrash+"lease", "")
	var rows []string
	for _, m := range lockCrashModes {
		name := lockCrash + m.mode
		ttl := r.spread(leasesPkg, name, "ttl-ns").Median
		l := r.latency(lockCrashSample+m.mode, leasesPkg, name, "")
		g := goalRow{figure: "Lock crash takeover, " + m.what + " (4 locks, each awaited in another Locker), kill to taken, p99"}
		if math.IsNaN(ttl) {
			r.goal(g)
			continue
		}
		g.goal = fmt.Sprintf("p99 <= TTL + %s = %s", fmtNs(float64(crashSlack)), fmtNs(ttl+float64(crashSlack)))
		g.baseline = "TTL " + fmtNs(ttl)
		if l.valid() {
			g.measured = fmt.Sprintf("p99 %s, p50 %s, max %s (%s)", fmtNs(l.p99), fmtNs(l.p50), fmtNs(l.max), l.count())
			g.ratio = fmt.Sprintf("p99 %s of the TTL", fmtRatio(l.p99/ttl))
			if m.mode != "lease" && lease.valid() {
				g.baseline += fmt.Sprintf("; locks with leases of their own: p99 %s, p50 %s", fmtNs(lease.p99), fmtNs(lease.p50))
				g.ratio += fmt.Sprintf(", %s of theirs", fmtRatio(l.p99/lease.p99))
			}
			g.status = verdict(l.p99 <= ttl+float64(crashSlack))
			rows = append(rows, fmt.Sprintf("| %s (TTL %s) | %s | %s | %s | %s | %s |", m.what, fmtNs(ttl), l.count(),
				fmtNs(l.p50), fmtNs(l.p90), fmtNs(l.p99), fmtNs(l.max)))
		}
		if late := r.latency("", leasesPkg, name, "late-"); late.valid() {
			g.why = fmt.Sprintf("From the send of the killed holder's last successful renewal of the lease the lock rested "+
				"on (its own, or its session) plus the TTL, the earliest moment a contender may judge it ended: p50 %s / "+
				"p99 %s (medians of the runs).", fmtNs(late.p50), fmtNs(late.p99))
		}
		r.goal(g)
	}

	h := r.latency(sessionHandoverName, leasesPkg, sessionHandover, "")
	g := goalRow{figure: "Lock handover under sessions (4 locks, 2 Lockers), release to acquired, p99",
		goal: "p99 <= " + fmtNs(float64(sessionHandoverGoal))}
	if h.valid() {
		g.measured = fmt.Sprintf("p99 %s, p50 %s (%s)", fmtNs(h.p99), fmtNs(h.p50), h.count())
		g.status = verdict(h.p99 <= float64(sessionHandoverGoal))
		rows = append(rows, fmt.Sprintf("| graceful, under sessions: release to acquired | %s | %s | %s | %s | %s |", h.count(),
			fmtNs(h.p50), fmtNs(h.p90), fmtNs(h.p99), fmtNs(h.max)))
	}
	r.goal(g)
	if len(rows) == 0 {
		return
	}
	b := &r.body
	b.WriteString("\n## Lock takeover\n\n`lock.BenchmarkLockCrashTakeover`: a `lock.Locker` on `natsstore` holds 4 locks, each awaited " +
		"by a contender in a Locker of its own, every Locker with a NATS connection of its own, against an in-process " +
		"nats-server on loopback. At a random moment of its renewal cycle the holder's connection is closed, as a SIGKILL " +
		"closes it (nothing is released, a renewal in flight may land), and each lock is timed from the kill to its " +
		"contender's `Acquire` returning. `lock.BenchmarkSessionLockHandover`: two Lockers with sessions hand 4 locks " +
		"back and forth, each timed from its `Release` call to the other's `Acquire` returning.\n\n")
	b.WriteString("| measure | samples | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|\n")
	for _, row := range rows {
		b.WriteString(row + "\n")
	}
	b.WriteString(r.reproduce(leasesPkg, lockCrash+"session"))
}
