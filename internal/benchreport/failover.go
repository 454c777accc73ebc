package benchreport

import (
	"fmt"
	"math"
	"time"
)

// Names of the failover benchmarks (package actors) and their samples.
const (
	failoverPkg   = "actors"
	handoverWatch = "BenchmarkHandover/watch"
	handoverPoll  = "BenchmarkHandover/poll"
	crashTakeover = "BenchmarkCrashTakeover"

	handoverGoal = 10 * time.Millisecond  // graceful handover at p99
	crashSlack   = 250 * time.Millisecond // crash takeover within TTL + this at p99
)

func (r *report) failover() {
	watch := r.latency("handover-watch", failoverPkg, handoverWatch, "")
	event := r.latency("handover-watch-event", failoverPkg, handoverWatch, "event-")
	raw := r.latency("handover-raw-watch", failoverPkg, handoverWatch, "raw-")
	poll := r.latency("handover-poll", failoverPkg, handoverPoll, "")
	crash := r.latency("takeover-crash", failoverPkg, crashTakeover, "")
	late := r.latency("takeover-crash-late", failoverPkg, crashTakeover, "late-")
	retry := r.spread(failoverPkg, handoverPoll, "retry-ns").Median
	ttl := r.spread(failoverPkg, crashTakeover, "ttl-ns").Median
	renew := r.spread(failoverPkg, crashTakeover, "renew-ns").Median

	// Graceful handover.
	g := goalRow{figure: "Graceful handover through the watch, release to new owner's workload running, p99",
		goal: "p99 <= " + fmtNs(float64(handoverGoal)), profiles: []string{"actors-handover.cpu"}}
	if watch.valid() {
		g.measured = fmt.Sprintf("p99 %s, p50 %s (%s)", fmtNs(watch.p99), fmtNs(watch.p50), watch.count())
		g.status = verdict(watch.p99 <= float64(handoverGoal))
	}
	if poll.valid() {
		g.baseline = fmt.Sprintf("polling standby (every %s): p99 %s, p50 %s (%s)", fmtNs(retry), fmtNs(poll.p99), fmtNs(poll.p50), poll.count())
	}
	if watch.valid() && poll.valid() {
		g.ratio = fmt.Sprintf("p99 %s, p50 %s", fmtRatio(watch.p99/poll.p99), fmtRatio(watch.p50/poll.p50))
	}
	if event.valid() && raw.valid() && watch.valid() {
		g.why = fmt.Sprintf("Where the time goes, from the same Release calls: a plain nats.go KV watch of the key, on a "+
			"connection of its own, saw the release after p50 %s / p99 %s (max %s): no watcher can know sooner, so "+
			"that much of the tail is the loopback round trip, the server and the scheduling of this shared "+
			"machine. The standby's store watch (natsstore) delivered it after p50 %s / p99 %s; the new owner's "+
			"workload was running after p50 %s / p99 %s. The store's watch adds p50 %s / p99 %s over the plain "+
			"watch, and acquiring and starting the workload after the event adds p50 %s / p99 %s.",
			fmtNs(raw.p50), fmtNs(raw.p99), fmtNs(raw.max), fmtNs(event.p50), fmtNs(event.p99), fmtNs(watch.p50), fmtNs(watch.p99),
			fmtNs(event.p50-raw.p50), fmtNs(event.p99-raw.p99), fmtNs(watch.p50-event.p50), fmtNs(watch.p99-event.p99))
	}
	r.goal(g)

	// Crash takeover.
	c := goalRow{figure: "Crash takeover, crash to new owner's workload running, p99", profiles: []string{"actors-crash.cpu"}}
	if !math.IsNaN(ttl) {
		c.goal = fmt.Sprintf("p99 <= TTL + %s = %s", fmtNs(float64(crashSlack)), fmtNs(ttl+float64(crashSlack)))
		c.baseline = "TTL " + fmtNs(ttl)
	}
	if crash.valid() && !math.IsNaN(ttl) {
		c.measured = fmt.Sprintf("p99 %s, p50 %s (%s)", fmtNs(crash.p99), fmtNs(crash.p50), crash.count())
		c.ratio = fmt.Sprintf("p99 %s of the TTL", fmtRatio(crash.p99/ttl))
		c.status = verdict(crash.p99 <= ttl+float64(crashSlack))
	}
	if late.valid() {
		c.why = fmt.Sprintf("Measured from the send of the dead owner's last successful write plus the TTL (the earliest "+
			"moment a standby may judge the lease expired: it counts the TTL from when it saw that write): the new "+
			"owner's workload was running p50 %s / p99 %s after it (max %s). A crash comes at a random moment of the "+
			"renew period (%s here), so from the crash the takeover takes the TTL less the time since the last "+
			"renewal, plus that.", fmtNs(late.p50), fmtNs(late.p99), fmtNs(late.max), fmtNs(renew))
	}
	r.goal(c)

	b := &r.body
	b.WriteString("\n## Failover\n\n")
	b.WriteString("`actors.BenchmarkHandover` and `actors.BenchmarkCrashTakeover`: `LeaseSupervisor`s on `natsstore`, each\n" +
		"with a NATS connection of its own, against an in-process nats-server on loopback. A graceful handover is\n" +
		"timed from the leader's `Release` call (its workload already stopped) to the standby's workload running,\n" +
		"with the standby woken by the store's watch, and, as the baseline, by polling only (the same store with its\n" +
		"`lease.Watcher` capability hidden: the seed's standby). A crash closes the leader's connection at a random\n" +
		"moment of its renewal cycle, so that its lease is neither renewed nor released, and is timed to the\n" +
		"standby's workload running.\n\n")
	b.WriteString("| measure | samples | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|\n")
	row := func(name string, l latency) {
		if !l.valid() {
			fmt.Fprintf(b, "| %s | not measured | | | | |\n", name)
			return
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", name, l.count(), fmtNs(l.p50), fmtNs(l.p90), fmtNs(l.p99), fmtNs(l.max))
	}
	row("graceful, watch: release to workload running", watch)
	row("graceful, watch: release to the standby's store watch event", event)
	row("graceful, watch: release to a plain KV watch event", raw)
	row(fmt.Sprintf("graceful, polling every %s: release to workload running", fmtNs(retry)), poll)
	row(fmt.Sprintf("crash (TTL %s): crash to workload running", fmtNs(ttl)), crash)
	row("crash: last write + TTL to workload running", late)
	fmt.Fprintf(b, "\n![Handover latency distribution](%s)\n", HandoverFigure)

	p := Plot{
		Title: "Handover latency (cumulative distribution)",
		X:     Axis{Label: "latency (log scale)", Log: true, Format: durAxis},
		Y:     Axis{Label: "fraction of handovers at or below", Min: 0, Max: 1},
		Refs:  []Ref{{Label: "goal: graceful p99 " + fmtNs(float64(handoverGoal)), Value: float64(handoverGoal), Vertical: true}},
	}
	if !math.IsNaN(ttl) {
		p.Refs = append(p.Refs, Ref{Label: "goal: crash p99 TTL + " + fmtNs(float64(crashSlack)), Value: ttl + float64(crashSlack), Vertical: true})
	}
	for _, s := range []struct{ name, sample string }{
		{"graceful, plain KV watch event", "handover-raw-watch"},
		{"graceful, store watch event", "handover-watch-event"},
		{"graceful, watch: workload running", "handover-watch"},
		{fmt.Sprintf("graceful, polling (%s): workload running", fmtNs(retry)), "handover-poll"},
		{"crash: workload running", "takeover-crash"},
	} {
		if xs := r.in.Samples[s.sample]; len(xs) > 0 {
			x, y := CDF(xs)
			p.Series = append(p.Series, Series{Name: fmt.Sprintf("%s (n=%d)", s.name, len(xs)), X: x, Y: y, Step: true})
		}
	}
	r.figs[HandoverFigure] = p.SVG()
}
