package scenario

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/chaos/check"
	"github.com/asterforge/aster/chaos/harness"
	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/chaos/report"
	"github.com/asterforge/aster/lease"
)

// The cluster scenarios: a 3-node JetStream cluster (chaos-nats processes,
// every route through a proxy), a bucket with three replicas, and three
// holders connected to every node, with natsstore's default isolation
// timeout (2 s, a sixth of the TTL in effect below 12 s). Each fault is measured at TTL 3 s and 10 s with the lease
// default for the renew interval (TTL/3); the faults that cost the stream
// its leader (its kill, the kill of the leading holder's server, a rolling
// restart) also at TTL 15 s with a renew interval of 2 s, the configuration
// docs/tuning.md recommends for riding out a stream leader's election. Each
// run measures the stream's own unavailability (the longest gap between
// successful writes of a probe per node, on a node the fault spared) and
// the gap it left in the leader's fenced writes.

// clusterConfig is a lease configuration of the failover table: a TTL and
// a renew interval (0: the lease default, TTL/3).
type clusterConfig struct {
	ttl, renew time.Duration
}

// String names the configuration in a scenario's name: ttl10s, or
// ttl15s-renew2s.
func (c clusterConfig) String() string {
	if c.renew > 0 {
		return fmt.Sprintf("ttl%v-renew%v", c.ttl, c.renew)
	}
	return fmt.Sprintf("ttl%v", c.ttl)
}

// renewPeriod is the time between two renewals of the configuration.
func (c clusterConfig) renewPeriod() time.Duration {
	return lease.Config{TTL: c.ttl, RenewInterval: c.renew}.EffectiveRenewInterval()
}

// clusterConfigs are the configurations every fault is measured at.
var clusterConfigs = []clusterConfig{{ttl: 3 * time.Second}, {ttl: 10 * time.Second}}

// ridingOut is docs/tuning.md's configuration for riding out a 9 s
// election: the renew deadline (TTL - SafetyMargin - StopTimeout = 12 s)
// outlasts a renew period, the election and the 0.5 s natsstore takes to
// send a dropped renewal again (2 + 9 + 0.5 s). Faults with ridesOut set
// are measured at it too.
var ridingOut = clusterConfig{ttl: 15 * time.Second, renew: 2 * time.Second}

// configs returns the configurations f is measured at.
func (f clusterCase) configs() []clusterConfig {
	if f.ridesOut {
		return append(slices.Clone(clusterConfigs), ridingOut)
	}
	return clusterConfigs
}

// clusterName is the scenario name of fault f at configuration c.
func clusterName(f clusterCase, c clusterConfig) string {
	return fmt.Sprintf("cluster-%s-%v", f.name, c)
}

// probe writes to the bucket through one node every probeEvery and keeps
// the reference times of the writes that succeeded.
type probe struct {
	node *harness.NATS
	nc   *nats.Conn
	mu   sync.Mutex
	oks  []int64
}

const probeEvery = 20 * time.Millisecond

// probes writes through every node of the cluster until stop is closed.
type probes struct {
	all  []*probe
	stop chan struct{}
	wg   sync.WaitGroup
}

func (e *env) startProbes() *probes {
	e.t.Helper()
	ps := &probes{stop: make(chan struct{})}
	for _, n := range e.cluster.Nodes {
		nc, err := nats.Connect(n.URL(), nats.Name("probe-"+n.Name()), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1),
			nats.ReconnectWait(20*time.Millisecond), nats.Timeout(time.Second))
		require.NoError(e.t, err)
		p := &probe{node: n, nc: nc}
		ps.all = append(ps.all, p)
		js, err := jetstream.New(nc)
		require.NoError(e.t, err)
		ps.wg.Go(func() { p.run(js, bucket, ps.stop) })
	}
	return ps
}

func (p *probe) run(js jetstream.JetStream, bucket string, stop <-chan struct{}) {
	var kv jetstream.KeyValue
	key := "chaos.probe." + p.node.Name()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var err error
		if kv == nil {
			kv, err = js.KeyValue(ctx, bucket)
		}
		if err == nil {
			_, err = kv.Put(ctx, key, []byte("probe"))
		}
		cancel()
		if err == nil {
			p.mu.Lock()
			p.oks = append(p.oks, record.Now())
			p.mu.Unlock()
		}
	}
}

func (ps *probes) Stop() {
	close(ps.stop)
	ps.wg.Wait()
	for _, p := range ps.all {
		p.nc.Close()
	}
}

// streamGap is the stream's unavailability during r: for each of its
// steps, the shortest, over the probes whose node the step spared, of
// their longest gap between successful writes; the longest of those. It
// returns the gap's ends.
func (ps *probes) streamGap(r clusterRun) (from, to int64) {
	for _, st := range r.steps {
		if f, t := ps.stepGap(st); t-f > to-from {
			from, to = f, t
		}
	}
	return from, to
}

func (ps *probes) stepGap(st clusterStep) (from, to int64) {
	best := false
	for _, p := range ps.all {
		if p.node.Name() == st.hit {
			continue
		}
		p.mu.Lock()
		f, t := gapAround(p.oks, st.from, st.to)
		p.mu.Unlock()
		if !best || t-f < to-from {
			best, from, to = true, f, t
		}
	}
	return from, to
}

// gapAround returns the ends of the longest time between consecutive times
// of ts (sorted) in [from, to], counting from the last time at or before
// from; a silence that lasts until to counts up to to.
func gapAround(ts []int64, from, to int64) (int64, int64) {
	i, _ := slices.BinarySearch(ts, from+1)
	prev := from
	if i > 0 {
		prev = ts[i-1]
	}
	start, end := prev, prev
	for ; i < len(ts) && ts[i] <= to; i++ {
		if ts[i]-prev > end-start {
			start, end = prev, ts[i]
		}
		prev = ts[i]
	}
	if to-prev > end-start {
		start, end = prev, to
	}
	return start, end
}

// span is the length of the interval from..to.
func span(from, to int64) time.Duration { return time.Duration(to - from) }

// explain describes handover ho, which run r saw, from the records, in
// times from the fault: the old tenure's last renewal that succeeded
// before it, its renewals and release from then to the handover, its
// validity and renew deadline (stopTimeout before it), the stream's
// longest gap (stream), and the new tenure's acquire.
func explain(h record.History, ho check.Handover, r clusterRun, stream [2]int64, stopTimeout time.Duration) string {
	rel := func(t int64) string {
		if t == record.Never || t == 0 {
			return "never"
		}
		return fmt.Sprintf("%+d ms", time.Duration(t-r.from).Milliseconds())
	}
	var ops []record.Op
	for _, op := range h.Ops {
		if op.Proc == ho.From.Proc && op.Lease == ho.From.Lease && op.Token == ho.From.Token &&
			(op.Type == record.OpRenew || op.Type == record.OpRelease) {
			ops = append(ops, op)
		}
	}
	slices.SortFunc(ops, func(a, b record.Op) int { return cmp.Compare(a.Call, b.Call) })
	lastOK := int64(0)
	var around []string
	for _, op := range ops {
		if op.Type == record.OpRenew && op.Result == record.ResultOK && op.Return < r.from {
			lastOK = op.Call
		}
		if op.Return >= r.from && op.Call <= ho.To.Acquired {
			s := fmt.Sprintf("%s call %s return %s %s", op.Type, rel(op.Call), rel(op.Return), op.Result)
			if op.Err != "" {
				err := op.Err
				if len(err) > 100 {
					err = err[:100] + "..."
				}
				s += " (" + err + ")"
			}
			around = append(around, s)
		}
	}
	if len(around) == 0 {
		around = []string{"none"}
	}
	return fmt.Sprintf("handover %s (token %d) to %s (token %d), cause %s; from the fault: last renewal that succeeded "+
		"called %s; then %s; validity until %s, renew deadline %s, workload stopped %s; stream unavailable from %s "+
		"to %s; new tenure acquired %s, workload started %s",
		ho.From.Proc, ho.From.Token, ho.To.Proc, ho.To.Token, ho.Cause, rel(lastOK), strings.Join(around, "; "),
		rel(ho.From.ValidUntil), rel(ho.From.ValidUntil-int64(stopTimeout)), rel(ho.From.WorkStop), rel(stream[0]),
		rel(stream[1]), rel(ho.To.Acquired), rel(ho.To.WorkStart))
}

// streamLeader returns the name of the node that leads the bucket's stream,
// "" while none does.
func (e *env) streamLeader() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := e.jetStream().Stream(ctx, "KV_"+bucket)
	if err != nil || s.CachedInfo().Cluster == nil {
		return ""
	}
	return s.CachedInfo().Cluster.Leader
}

// awaitStreamLeader waits for the stream to have a leader.
func (e *env) awaitStreamLeader() string {
	e.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if l := e.streamLeader(); l != "" {
			return l
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: the stream has no leader after %v", e.name, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nodeOf returns the node that h's connection uses, from the nodes'
// monitoring (connz), or nil.
func (e *env) nodeOf(h *holder) *harness.NATS {
	for _, n := range e.cluster.Nodes {
		if n.Proc().Exited() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		body, _, err := n.Get(ctx, "/connz?limit=1024")
		cancel()
		if err != nil {
			continue
		}
		var cz struct {
			Connections []struct {
				Name string `json:"name"`
			} `json:"connections"`
		}
		if json.Unmarshal(body, &cz) == nil && slices.ContainsFunc(cz.Connections, func(c struct {
			Name string `json:"name"`
		}) bool {
			return c.Name == h.name
		}) {
			return n
		}
	}
	return nil
}

// awaitWrite waits for an accepted write of the lease after since.
func (e *env) awaitWrite(since int64) {
	e.t.Helper()
	deadline := time.Now().Add(2 * limit)
	for {
		if w, ok := e.fence.Last(e.lease); ok && w.At > since {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: no write within %v", e.name, 2*limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// clusterRun is one fault of a cluster scenario: when it struck, and when
// the cluster had recovered; in steps, each hitting one node (a rolling
// restart has one per node).
type clusterRun struct {
	from, to int64
	steps    []clusterStep
	resign   int64 // when the leading holder was told to resign; 0 if it was not
}

// clusterStep is a part of a run that hit one node ("" for none).
type clusterStep struct {
	from, to int64
	hit      string
}

// single is a run of one step.
func single(from, to int64, hit string) clusterRun {
	return clusterRun{from: from, to: to, steps: []clusterStep{{from, to, hit}}}
}

// clusterFault strikes once and returns the run, with the cluster healthy
// again and its nodes all running.
type clusterFault func(e *env) clusterRun

// restartNode restarts node n and waits until the cluster is healthy.
func (e *env) restartNode(n *harness.NATS) {
	e.t.Helper()
	require.NoError(e.t, n.Start())
	e.mark(record.MarkNodeStart, "", n.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 2*limit)
	defer cancel()
	require.NoError(e.t, e.cluster.WaitHealthy(ctx, 2*limit))
}

// killNode kills n, waits for the stream and the leader's writes to resume,
// and restarts it.
func (e *env) killNode(n *harness.NATS, what string) clusterRun {
	e.t.Helper()
	from := record.Now()
	e.mark(record.MarkNodeKill, "", n.Name()+": "+what)
	require.NoError(e.t, n.Kill())
	e.awaitStreamLeader()
	e.awaitWrite(record.Now())
	time.Sleep(time.Second)
	e.restartNode(n)
	time.Sleep(time.Second)
	return single(from, record.Now(), n.Name())
}

// clusterCase is a fault of the cluster scenarios; with ridesOut, it is
// measured at ridingOut too.
type clusterCase struct {
	name, desc string
	ridesOut   bool
	fault      clusterFault
}

var clusterFaults = []clusterCase{
	{"stream-leader-kill", "SIGKILL of the node that leads the bucket's stream, restarted once the stream is back", true,
		func(e *env) clusterRun { return e.killNode(e.cluster.Node(e.awaitStreamLeader()), "stream leader") }},
	{"leader-server-kill", "SIGKILL of the node the leading holder is connected to, restarted once the stream is back", true,
		func(e *env) clusterRun {
			h, _ := e.current()
			n := e.nodeOf(h)
			require.NotNil(e.t, n, "the node of %s", h.name)
			return e.killNode(n, "the leader's server")
		}},
	{"rolling-restart", "every node stopped (SIGTERM) and restarted in turn, each once the cluster is healthy", true,
		func(e *env) clusterRun {
			r := clusterRun{from: record.Now()}
			for _, n := range e.cluster.Nodes {
				st := clusterStep{from: record.Now(), hit: n.Name()}
				e.mark(record.MarkNodeStop, "", n.Name())
				require.NoError(e.t, n.Stop())
				e.restartNode(n)
				st.to = record.Now()
				r.steps = append(r.steps, st)
			}
			e.awaitWrite(record.Now())
			time.Sleep(time.Second)
			r.to = record.Now()
			return r
		}},
	{"stream-leader-partition", "the node that leads the stream cut off from the other nodes for 8 s (its clients stay connected)",
		false, func(e *env) clusterRun {
			l := e.awaitStreamLeader()
			k := slices.IndexFunc(e.cluster.Nodes, func(n *harness.NATS) bool { return n.Name() == l })
			from := record.Now()
			e.mark(record.MarkPartition, "", l)
			require.NoError(e.t, e.cluster.Isolate(k))
			time.Sleep(8 * time.Second)
			require.NoError(e.t, e.cluster.Heal())
			e.mark(record.MarkPartHeal, "", l)
			ctx, cancel := context.WithTimeout(context.Background(), 2*limit)
			defer cancel()
			require.NoError(e.t, e.cluster.WaitHealthy(ctx, 2*limit))
			e.awaitWrite(record.Now())
			time.Sleep(time.Second)
			return single(from, record.Now(), l)
		}},
	{"graceful-after-failover", "SIGKILL of the stream leader's node; 1 s after the stream is back, the leading holder resigns",
		false, func(e *env) clusterRun {
			n := e.cluster.Node(e.awaitStreamLeader())
			from := record.Now()
			e.mark(record.MarkNodeKill, "", n.Name()+": stream leader")
			require.NoError(e.t, n.Kill())
			e.awaitStreamLeader()
			e.awaitWrite(record.Now())
			time.Sleep(time.Second)
			h, token := e.current()
			resign := record.Now()
			e.resign(h)
			e.leader(token)
			time.Sleep(time.Second)
			e.restartNode(n)
			time.Sleep(time.Second)
			r := single(from, record.Now(), n.Name())
			r.resign = resign
			return r
		}},
}

func TestCluster(t *testing.T) {
	for _, f := range clusterFaults {
		for _, c := range f.configs() {
			name := clusterName(f, c)
			t.Run(name, func(t *testing.T) {
				short := f.name == "stream-leader-kill" && c == clusterConfigs[0]
				if !short {
					fullOnly(t)
				}
				testCluster(t, name, f.name, f.desc, c, rounds(1, 3), f.fault)
			})
		}
	}
}

func testCluster(t *testing.T, name, fault, desc string, c clusterConfig, n int, strike clusterFault) {
	e := newClusterEnv(t, name)
	ttl := c.ttl
	e.ttl, e.renew = ttl, c.renew // 0: the lease default, TTL/3
	e.extra = []string{"-replicas", "3", "-isolation", "2s", "-max-ttl", ttl.String()}
	e.startN(candidates)
	e.current()
	ps := e.startProbes()
	time.Sleep(time.Second)
	var runs []clusterRun
	for range n {
		e.current()
		time.Sleep(jitter(c.renewPeriod())) // anywhere in the renew period
		runs = append(runs, strike(e))
	}
	ps.Stop()

	h := e.history()
	res := check.Check(h)
	var accepted []int64
	for _, w := range h.Writes {
		if w.Accepted && w.Lease == e.lease {
			accepted = append(accepted, w.At)
		}
	}
	slices.Sort(accepted)
	// graceful: the handovers a resign began; released: those of releases
	// made during the outage (a holder past its renew deadline steps down).
	var streamGaps, workGaps, beyond, graceful, released []time.Duration
	handovers := 0
	for i, r := range runs {
		sFrom, sTo := ps.streamGap(r)
		s, w := span(sFrom, sTo), span(gapAround(accepted, r.from, r.to))
		streamGaps, workGaps, beyond = append(streamGaps, s), append(workGaps, w), append(beyond, w-s)
		var hos []check.Handover
		for _, ho := range res.Handovers {
			if ho.To.Acquired >= r.from && ho.To.Acquired <= r.to {
				hos = append(hos, ho)
				switch {
				case ho.Cause != "release":
				case r.resign == 0 || resigned(runs[i:i+1], ho):
					graceful = append(graceful, ho.Latency)
				default:
					released = append(released, ho.Latency)
				}
			}
		}
		handovers += len(hos)
		t.Logf("%s: run %d: stream unavailable %s, workload gap %s, %d handovers", name, i+1, fmtMs(s), fmtMs(w), len(hos))
		for _, ho := range hos {
			t.Logf("%s: run %d: %s", name, i+1, explain(h, ho, r, [2]int64{sFrom, sTo}, ttl/10))
		}
	}
	notes := ""
	if len(graceful) > 0 {
		g := check.Summarize(graceful)
		notes = fmt.Sprintf("graceful handover %s p50, %s max", fmtMs(g.P50), fmtMs(g.Max))
	}
	if len(released) > 0 {
		g := check.Summarize(released)
		notes = strings.TrimPrefix(fmt.Sprintf("%s; %d handover(s) after releases made during the outage, %s max",
			notes, len(released), fmtMs(g.Max)), "; ")
	}
	addFailover(report.Failover{Fault: fault, TTL: ttl, Renew: c.renew, Runs: n, Stream: check.Summarize(streamGaps),
		Work: check.Summarize(workGaps), Beyond: check.Summarize(beyond), Handovers: handovers, Notes: notes})
	causes := []string{string(record.MarkNodeKill), string(record.MarkNodeStop), string(record.MarkPartition)}
	if fault == "graceful-after-failover" {
		// The row times the resigns; releases made during the outage are
		// in the notes.
		causes = []string{"release"}
		e.counts = func(ho check.Handover) bool { return ho.Cause != "release" || resigned(runs, ho) }
	}
	config := fmt.Sprintf("TTL %v", ttl)
	if c.renew > 0 {
		config += fmt.Sprintf(", renew interval %v", c.renew)
	}
	e.finish(fmt.Sprintf("3-node cluster, %s: %s", config, desc), n,
		fmt.Sprintf("stream unavailable %s, workload gap %s (max over runs)", fmtMs(check.Summarize(streamGaps).Max),
			fmtMs(check.Summarize(workGaps).Max)), causes...)
}

// resigned reports whether ho began with a release made after one of runs
// told the leading holder to resign.
func resigned(runs []clusterRun, ho check.Handover) bool {
	return slices.ContainsFunc(runs, func(r clusterRun) bool {
		return r.resign != 0 && ho.From.ReleaseCall >= r.resign && ho.From.ReleaseCall <= r.to
	})
}

func fmtMs(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

func TestGapAround(t *testing.T) {
	ts := []int64{10, 20, 50, 55, 100}
	for _, tc := range []struct {
		from, to, start, end int64
	}{
		{15, 60, 20, 50},    // counted from the last time before from
		{0, 120, 55, 100},   // the longest of the gaps
		{60, 200, 100, 200}, // a silence up to to
		{0, 5, 0, 5},        // nothing before from
	} {
		start, end := gapAround(ts, tc.from, tc.to)
		require.Equal(t, [2]int64{tc.start, tc.end}, [2]int64{start, end}, "gapAround(%d, %d)", tc.from, tc.to)
	}
}

func TestExplain(t *testing.T) {
	const s = int64(time.Second)
	from := check.Tenure{Lease: "l", Proc: "h1", Token: 1, ValidUntil: 113 * s / 10, WorkStop: 99 * s / 10}
	to := check.Tenure{Lease: "l", Proc: "h2", Token: 2, Acquired: 14 * s, WorkStart: 14*s + s/100}
	h := record.History{Ops: []record.Op{
		{Proc: "h1", Lease: "l", Type: record.OpRenew, Token: 1, Call: -s, Return: -s + s/100, Result: record.ResultOK},
		{Proc: "h1", Lease: "l", Type: record.OpRenew, Token: 1, Call: s, Return: 6 * s, Result: record.ResultUnknown,
			Err: "timeout"},
		{Proc: "h1", Lease: "l", Type: record.OpRenew, Token: 2, Call: 2 * s, Return: 3 * s, Result: record.ResultOK},
		{Proc: "h2", Lease: "l", Type: record.OpAcquire, Token: 0, Call: 13 * s, Return: 14 * s, Result: record.ResultOK},
	}}
	got := explain(h, check.Handover{Lease: "l", From: from, To: to, Cause: "expiry"}, single(0, 20*s, "n1"),
		[2]int64{s / 2, 7 * s}, 1500*time.Millisecond)
	require.Equal(t, "handover h1 (token 1) to h2 (token 2), cause expiry; from the fault: last renewal that succeeded "+
		"called -1000 ms; then renew call +1000 ms return +6000 ms unknown (timeout); validity until +11300 ms, renew "+
		"deadline +9800 ms, workload stopped +9900 ms; stream unavailable from +500 ms to +7000 ms; new tenure acquired "+
		"+14000 ms, workload started +14010 ms", got)
}
