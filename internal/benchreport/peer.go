package benchreport

import (
	"fmt"
	"math"
	"strings"
)

// peerPkg is the module that measures Aster beside etcd (bench/etcd).
const (
	peerPkg   = "bench/etcd"
	peerBench = "BenchmarkPeer/"
)

// peerSystems are the columns of the peer table, in order.
var peerSystems = []struct{ name, title string }{
	{"aster", "Aster, session; NATS default sync (2 min)"},
	{"aster-sync", "Aster, session; NATS sync always"},
	{"etcd", "etcd concurrency (fsync every commit)"},
	{"aster-lease", "Aster, a lease per lock; NATS default sync"},
	{"etcd-session-per-lock", "etcd, a session per lock"},
	{"etcd-nosync", "etcd without fsync (`--unsafe-no-fsync`)"},
}

// lifeGoal: a short-lived Locker's whole life on NATS, at most this many
// times etcd's short-lived session without fsync (p50).
const lifeGoal = 1.0

// peer reports the measurements of bench/etcd: Aster's lock beside etcd's
// concurrency package, interleaved in one run.
func (r *report) peer() {
	type cell func(system string) (string, float64) // text, and the value the ratio compares
	lat := func(measure string) cell {
		return func(sys string) (string, float64) {
			name := peerBench + measure + "/system=" + sys
			p50, p99 := r.spread(peerPkg, name, "p50-ms"), r.spread(peerPkg, name, "p99-ms")
			if !p50.Valid() {
				return "", math.NaN()
			}
			return fmt.Sprintf("%s / %s", fmtNs(p50.Median*msNs), fmtNs(p99.Median*msNs)), p50.Median
		}
	}
	metric := func(measure, unit string, f func(float64) string) cell {
		return func(sys string) (string, float64) {
			s := r.spread(peerPkg, peerBench+measure+"/system="+sys, unit)
			if !s.Valid() {
				return "", math.NaN()
			}
			return f(s.Median), s.Median
		}
	}
	cores := func(sys string) (string, float64) {
		name := peerBench + "held-10000/system=" + sys
		c, s := r.spread(peerPkg, name, "client-cores"), r.spread(peerPkg, name, "server-cores")
		if !c.Valid() {
			return "", math.NaN()
		}
		return fmt.Sprintf("%.4f (%.4f + %.4f)", c.Median+s.Median, c.Median, s.Median), c.Median + s.Median
	}
	rows := []struct {
		what string
		c    cell
	}{
		{"Graceful handover, standby waiting 250 ms: release to acquired, p50 / p99", lat("handover-waiting")},
		{"Graceful handover, standby waiting 1 ms: release to acquired, p50 / p99", lat("handover-fresh")},
		{"Crash takeover, TTL 2 s: crash to acquired, p50 / p99", lat("crash")},
		{"Uncontended Lock + Unlock, p50 / p99", lat("uncontended")},
		{"Uncontended TryLock + Unlock, p50 / p99", lat("uncontended-try")},
		{"A short-lived client's whole life on an open connection (new Locker or session, TryLock, Unlock, Close), " +
			"p50 / p99", lat("life")},
		{"Contended: locks per second, 8 clients on one lock", metric("contended", "locks/s", fmtCount)},
		{"10,000 locks held, TTL 30 s: steady CPU, cores (client + server)", cores},
		{"10,000 locks held: client memory per lock (live heap)", metric("held-10000", "client-B/lock", fmtBytes)},
		{"10,000 locks held: server memory per lock (resident)", metric("held-10000", "server-B/lock", fmtBytes)},
		{"10,000 locks held: time to take one (8 goroutines)", metric("held-10000", "acquire-us/lock",
			func(v float64) string { return fmtNs(v * usNs) })},
	}
	var lines []string
	for _, row := range rows {
		cols := make([]string, 0, len(peerSystems)+1)
		any := false
		for _, sys := range peerSystems {
			text, _ := row.c(sys.name)
			any = any || text != ""
			cols = append(cols, dash(text))
		}
		if !any {
			continue
		}
		_, a := row.c("aster-sync")
		_, e := row.c("etcd")
		cols = append(cols, fmtRatio(a/e))
		lines = append(lines, "| "+row.what+" | "+strings.Join(cols, " | ")+" |")
	}
	if len(lines) == 0 {
		return
	}
	if g, ok := r.peerLife(); ok {
		r.goal(g)
	}
	b := &r.body
	b.WriteString("\n## Beside etcd\n\n`bench/etcd` (a module of its own) runs every measurement on Aster's lock and on etcd's " +
		"`concurrency.Mutex` (etcd v3.7.3, embedded, single member), one after the other in one run, on this machine and " +
		"over loopback. Each server runs in a process of its own, so that the client's and the server's CPU and memory are " +
		"told apart: nats-server with JetStream's default `sync_interval` (files flushed every 2 minutes: a machine that " +
		"fails can lose acknowledged writes), nats-server with `sync_interval: always` (every write flushed before it is " +
		"acknowledged), and etcd with its default, an fsync for every commit (and, for the short-lived client's life, " +
		"without fsync). The fair comparison is Aster on NATS with " +
		"sync always against etcd: the last column is their ratio (of the medians; below 1, Aster is faster or cheaper). " +
		"Aster's lock runs under a session (`lock.Config.Session`), as etcd's Mutex holds its key under a session; the " +
		"fourth column is Aster's default, a lease and a watchdog per lock. Every client has a connection of its own.\n\n")
	b.WriteString("| measurement |")
	sep := "|---|"
	for _, sys := range peerSystems {
		b.WriteString(" " + sys.title + " |")
		sep += "---|"
	}
	b.WriteString(" Aster sync always / etcd |\n" + sep + "---|\n")
	b.WriteString(strings.Join(lines, "\n") + "\n")
}

// peerLife is the goal row of a short-lived lock client's whole life:
// Aster's Locker of the default Config (a lease per lock) on NATS against
// etcd's session without fsync, p50, in the same run.
func (r *report) peerLife() (goalRow, bool) {
	g := goalRow{figure: "A short-lived Locker's whole life on NATS (lock.New, TryAcquire, Release, Close) against etcd " +
		"without fsync (NewSession, TryLock, Unlock, Close), p50", goal: fmt.Sprintf("<= %.1fx", lifeGoal)}
	name := func(sys string) string { return peerBench + "life/system=" + sys }
	a, e := r.spread(peerPkg, name("aster-lease"), "p50-ms"), r.spread(peerPkg, name("etcd-nosync"), "p50-ms")
	if !a.Valid() || !e.Valid() {
		return goalRow{}, false
	}
	p99 := func(sys string) string {
		return fmtNs(r.spread(peerPkg, name(sys), "p99-ms").Median * msNs)
	}
	g.measured = fmt.Sprintf("p50 %s, p99 %s", fmtSpread(scaleSpread(a, msNs), fmtNs), p99("aster-lease"))
	g.baseline = fmt.Sprintf("etcd without fsync: p50 %s, p99 %s", fmtSpread(scaleSpread(e, msNs), fmtNs), p99("etcd-nosync"))
	ratio := Summarize(Ratios(r.values(peerPkg, name("aster-lease"), "p50-ms"), r.values(peerPkg, name("etcd-nosync"), "p50-ms")))
	g.ratio = fmtSpread(ratio, fmtRatio)
	g.status = verdict(ratio.Median <= lifeGoal)
	g.why = "A Locker starts its actor system only when a watchdog is due: the life is the two store writes, " +
		"and lock.New and Close (BenchmarkLockerLife on the in-memory store)"
	return g, true
}
