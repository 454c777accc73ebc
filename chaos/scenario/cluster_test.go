package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
)

// The cluster scenarios: a 3-node JetStream cluster (chaos-nats processes,
// every route through a proxy), a bucket with three replicas, and three
// holders connected to every node, with the lease defaults for the renew
// interval (TTL/3) and natsstore's default isolation timeout (2 s). Each
// fault is measured at TTL 3 s and 10 s: the stream's own unavailability
// (the longest gap between successful writes of a probe per node, on a node
// the fault spared) and the gap it left in the leader's fenced writes.

// clusterTTLs are the TTLs of the failover table.
var clusterTTLs = []time.Duration{3 * time.Second, 10 * time.Second}

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
// their longest gap between successful writes; the longest of those.
func (ps *probes) streamGap(r clusterRun) time.Duration {
	var longest time.Duration
	for _, st := range r.steps {
		longest = max(longest, ps.stepGap(st))
	}
	return longest
}

func (ps *probes) stepGap(st clusterStep) time.Duration {
	best := time.Duration(-1)
	for _, p := range ps.all {
		if p.node.Name() == st.hit {
			continue
		}
		p.mu.Lock()
		g := gapAround(p.oks, st.from, st.to)
		p.mu.Unlock()
		if best < 0 || g < best {
			best = g
		}
	}
	return best
}

// gapAround returns the longest time between consecutive times of ts
// (sorted) in [from, to], counting from the last time at or before from;
// a silence that lasts until to counts up to to.
func gapAround(ts []int64, from, to int64) time.Duration {
	i, _ := slices.BinarySearch(ts, from+1)
	prev := from
	if i > 0 {
		prev = ts[i-1]
	}
	var longest int64
	for ; i < len(ts) && ts[i] <= to; i++ {
		longest = max(longest, ts[i]-prev)
		prev = ts[i]
	}
	longest = max(longest, to-prev)
	return time.Duration(longest)
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

// clusterCase is a fault of the cluster scenarios.
type clusterCase struct {
	name, desc string
	fault      clusterFault
}

var clusterFaults = []clusterCase{
	{"stream-leader-kill", "SIGKILL of the node that leads the bucket's stream, restarted once the stream is back",
		func(e *env) clusterRun { return e.killNode(e.cluster.Node(e.awaitStreamLeader()), "stream leader") }},
	{"leader-server-kill", "SIGKILL of the node the leading holder is connected to, restarted once the stream is back",
		func(e *env) clusterRun {
			h, _ := e.current()
			n := e.nodeOf(h)
			require.NotNil(e.t, n, "the node of %s", h.name)
			return e.killNode(n, "the leader's server")
		}},
	{"rolling-restart", "every node stopped (SIGTERM) and restarted in turn, each once the cluster is healthy",
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
		func(e *env) clusterRun {
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
		func(e *env) clusterRun {
			n := e.cluster.Node(e.awaitStreamLeader())
			from := record.Now()
			e.mark(record.MarkNodeKill, "", n.Name()+": stream leader")
			require.NoError(e.t, n.Kill())
			e.awaitStreamLeader()
			e.awaitWrite(record.Now())
			time.Sleep(time.Second)
			h, token := e.current()
			e.resign(h)
			e.leader(token)
			time.Sleep(time.Second)
			e.restartNode(n)
			time.Sleep(time.Second)
			return single(from, record.Now(), n.Name())
		}},
}

func TestCluster(t *testing.T) {
	for _, f := range clusterFaults {
		for _, ttl := range clusterTTLs {
			name := fmt.Sprintf("cluster-%s-ttl%v", f.name, ttl)
			t.Run(name, func(t *testing.T) {
				short := f.name == "stream-leader-kill" && ttl == clusterTTLs[0]
				if !short {
					fullOnly(t)
				}
				testCluster(t, name, f.name, f.desc, ttl, rounds(1, 3), f.fault)
			})
		}
	}
}

func testCluster(t *testing.T, name, fault, desc string, ttl time.Duration, n int, strike clusterFault) {
	e := newClusterEnv(t, name)
	e.ttl, e.renew = ttl, 0 // the lease default: TTL/3
	e.extra = []string{"-replicas", "3", "-isolation", "2s", "-max-ttl", ttl.String()}
	e.startN(candidates)
	e.current()
	ps := e.startProbes()
	time.Sleep(time.Second)
	var runs []clusterRun
	for range n {
		e.current()
		time.Sleep(jitter(ttl / 3))
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
	var streamGaps, workGaps, beyond, graceful []time.Duration
	handovers := 0
	for _, r := range runs {
		s, w := ps.streamGap(r), gapAround(accepted, r.from, r.to)
		streamGaps, workGaps, beyond = append(streamGaps, s), append(workGaps, w), append(beyond, w-s)
		for _, ho := range res.Handovers {
			if ho.To.Acquired >= r.from && ho.To.Acquired <= r.to {
				handovers++
				if ho.Cause == "release" {
					graceful = append(graceful, ho.Latency)
				}
			}
		}
	}
	notes := ""
	if len(graceful) > 0 {
		g := check.Summarize(graceful)
		notes = fmt.Sprintf("graceful handover %s p50, %s max", fmtMs(g.P50), fmtMs(g.Max))
	}
	addFailover(report.Failover{Fault: fault, TTL: ttl, Runs: n, Stream: check.Summarize(streamGaps),
		Work: check.Summarize(workGaps), Beyond: check.Summarize(beyond), Handovers: handovers, Notes: notes})
	causes := []string{string(record.MarkNodeKill), string(record.MarkNodeStop), string(record.MarkPartition)}
	if fault == "graceful-after-failover" {
		causes = []string{"release"}
	}
	e.finish(fmt.Sprintf("3-node cluster, TTL %v: %s", ttl, desc), n,
		fmt.Sprintf("stream unavailable %s, workload gap %s (max over runs)", fmtMs(check.Summarize(streamGaps).Max),
			fmtMs(check.Summarize(workGaps).Max)), causes...)
}

func fmtMs(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
