package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/chaos/check"
	"github.com/asterforge/aster/chaos/harness"
	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/chaos/report"
	"github.com/asterforge/aster/chaos/resource"
	"github.com/asterforge/aster/natsstore"
)

// Timing of every process scenario. NATS per-message TTLs are whole
// seconds, so 1 s is the shortest TTL natsstore accepts.
const (
	ttl     = time.Second
	renew   = 250 * time.Millisecond
	limit   = 20 * time.Second // the longest any wait for a leader may take
	bucket  = natsstore.DefaultBucket
	linTime = 2 * time.Minute // porcupine's budget per scenario
)

// env is one scenario's world: a nats-server process (or a cluster of
// them), a fenced resource, holder processes each behind a proxy of its
// own, and what was injected.
type env struct {
	t       *testing.T
	name    string
	lease   string
	dir     string
	nats    *harness.NATS
	cluster *harness.Cluster // nil for a single server
	proxies *harness.Proxies
	fence   *resource.Server
	// ttl and renew are the holders' (the package's ttl and renew unless a
	// scenario sets others).
	ttl, renew time.Duration
	// direct connects holders to nats-server without a proxy, for
	// scenarios that inject no network fault: toxiproxy runs in this
	// (race-instrumented) process and would add its own latency.
	direct bool
	// extra flags for every holder of the scenario (such as -mode lock).
	extra []string
	// counts selects the handovers the row counts and times (nil: all);
	// the others are checked all the same.
	counts func(check.Handover) bool

	mu      sync.Mutex
	seq     int
	holders map[string]*holder
	marks   []record.Mark
	opOps   []record.Op // the operator's tampering
	epoch   int         // rollbacks so far: holders started after one get its epoch
	reqs    []record.Request
	nc      *nats.Conn
	js      jetstream.JetStream
	kv      jetstream.KeyValue
}

type holder struct {
	name  string
	proc  *harness.Proc
	proxy *harness.Proxy
	log   string
	epoch int // the store's epoch when it started (see record.Op.Epoch)
}

func newEnv(t *testing.T, name string) *env {
	t.Helper()
	e := &env{t: t, name: name, lease: "chaos." + name, dir: t.TempDir(), proxies: harness.NewProxies(),
		holders: map[string]*holder{}, ttl: ttl, renew: renew}
	var err error
	e.nats, err = harness.StartNATS(t, bins["chaos-nats"], e.dir)
	require.NoError(t, err)
	e.startFence()
	return e
}

// newClusterEnv is newEnv with a 3-node JetStream cluster, whose routes go
// through proxies; holders connect to every node, without proxies.
func newClusterEnv(t *testing.T, name string) *env {
	t.Helper()
	e := &env{t: t, name: name, lease: "chaos." + name, dir: t.TempDir(), proxies: harness.NewProxies(),
		holders: map[string]*holder{}, ttl: ttl, renew: renew, direct: true}
	var err error
	e.cluster, err = harness.StartCluster(t, bins["chaos-nats"], e.dir, 3, e.proxies)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*limit)
	defer cancel()
	require.NoError(t, e.cluster.WaitHealthy(ctx, 2*limit))
	e.startFence()
	return e
}

func (e *env) startFence() {
	var err error
	e.fence, err = resource.Start()
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = e.fence.Close() })
}

// natsURL is what clients connect to: the server, or every node.
func (e *env) natsURL() string {
	if e.cluster != nil {
		return e.cluster.URL()
	}
	return e.nats.URL()
}

// start starts a holder process with extra flags and waits until it runs.
func (e *env) start(extra ...string) *holder {
	e.t.Helper()
	h := e.launch(extra...)
	require.NoError(e.t, h.proc.AwaitOutput("ready\n", 1, limit))
	e.mu.Lock()
	e.holders[h.name] = h
	e.mu.Unlock()
	return h
}

// launch starts a holder process, without waiting for it to be ready.
func (e *env) launch(extra ...string) *holder {
	e.t.Helper()
	e.mu.Lock()
	e.seq++
	name := fmt.Sprintf("h%d", e.seq)
	e.mu.Unlock()
	h := &holder{name: name, log: filepath.Join(e.dir, name+".log"), epoch: e.epoch}
	url := e.natsURL()
	if !e.direct {
		var err error
		h.proxy, err = e.proxies.Proxy(e.t, name, e.nats.Addr())
		require.NoError(e.t, err)
		url = h.proxy.URL()
	}
	args := append([]string{"-nats", url, "-fence", e.fence.URL(), "-lease", e.lease, "-proc", name,
		"-log", h.log, "-ttl", e.ttl.String(), "-renew", e.renew.String(), "-bucket", bucket}, append(e.extra, extra...)...)
	var err error
	h.proc, err = harness.Start(e.t, e.dir, name, bins["chaos-holder"], args...)
	require.NoError(e.t, err)
	return h
}

func (e *env) startN(n int, extra ...string) {
	for range n {
		e.start(extra...)
	}
}

// mark records an injected fault now.
func (e *env) mark(kind record.MarkKind, proc, detail string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.marks = append(e.marks, record.Mark{Kind: kind, Proc: proc, Lease: e.lease, At: record.Now(), Detail: detail})
}

// leader waits for an accepted write with a token above after, and returns
// the holder that made the latest accepted write and its token.
func (e *env) leader(after uint64) (*holder, uint64) {
	e.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if w, ok := e.fence.Last(e.lease); ok && w.Token > after {
			e.mu.Lock()
			h := e.holders[w.Proc]
			e.mu.Unlock()
			return h, w.Token
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: no new leader (token > %d) within %v", e.name, after, limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// current returns the holder that wrote last, waiting for a write made
// after now.
func (e *env) current() (*holder, uint64) {
	e.t.Helper()
	since := record.Now()
	deadline := time.Now().Add(limit)
	for {
		if w, ok := e.fence.Last(e.lease); ok && w.At > since {
			e.mu.Lock()
			h := e.holders[w.Proc]
			e.mu.Unlock()
			return h, w.Token
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: no leader wrote within %v", e.name, limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// kill kills h with SIGKILL.
func (e *env) kill(h *holder, detail string) {
	e.mark(record.MarkKill, h.name, detail)
	require.NoError(e.t, h.proc.Kill())
}

// pause stops h with SIGSTOP for d, then continues it.
func (e *env) pause(h *holder, d time.Duration) {
	e.mark(record.MarkStop, h.name, d.String())
	require.NoError(e.t, h.proc.Pause())
	time.Sleep(d)
	e.mark(record.MarkCont, h.name, "")
	require.NoError(e.t, h.proc.Resume())
}

// netFault applies fault to h's proxy for d, then heals it.
func (e *env) netFault(h *holder, what string, d time.Duration, fault func(*harness.Proxy) error) {
	e.mark(record.MarkNetFault, h.name, what)
	require.NoError(e.t, fault(h.proxy))
	time.Sleep(d)
	require.NoError(e.t, h.proxy.Heal())
	e.mark(record.MarkNetHeal, h.name, what)
}

// jetStream returns the operator's JetStream client, connected around the
// proxies, as an operator's `nats` command would be.
func (e *env) jetStream() jetstream.JetStream {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.js != nil {
		return e.js
	}
	nc, err := nats.Connect(e.natsURL(), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond), nats.Timeout(time.Second))
	require.NoError(e.t, err)
	e.t.Cleanup(nc.Close)
	e.nc = nc
	e.js, err = jetstream.New(nc)
	require.NoError(e.t, err)
	return e.js
}

// operator returns a KV client of the leases bucket that bypasses the
// proxies, as an operator's `nats kv` would.
func (e *env) operator() jetstream.KeyValue {
	e.t.Helper()
	js := e.jetStream()
	if e.kv != nil {
		return e.kv
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var err error
	e.kv, err = js.KeyValue(ctx, bucket)
	require.NoError(e.t, err)
	return e.kv
}

// operate makes an operator's change of type typ with do, and records it
// with a mark of kind.
func (e *env) operate(typ record.OpType, kind record.MarkKind, do func(ctx context.Context) error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	op := record.Op{Proc: "operator", Lease: e.lease, Type: typ, Call: record.Now()}
	e.mark(kind, "", string(typ))
	err := do(ctx)
	op.Return, op.Result = record.Now(), record.ResultOK
	if err != nil {
		op.Result, op.Err = record.ResultUnknown, err.Error()
	}
	e.mu.Lock()
	e.opOps = append(e.opOps, op)
	e.mu.Unlock()
	require.NoError(e.t, err, "%s", typ)
}

// tamper changes the lease key by hand and records it.
func (e *env) tamper(typ record.OpType) {
	e.t.Helper()
	kv := e.operator()
	e.operate(typ, record.MarkTamper, func(ctx context.Context) error {
		switch typ {
		case record.OpDelete:
			return kv.Delete(ctx, e.lease)
		case record.OpPurge:
			return kv.Purge(ctx, e.lease)
		case record.OpGarbage:
			_, err := kv.Put(ctx, e.lease, []byte("this is not a lease"))
			return err
		}
		return fmt.Errorf("not a key tampering: %s", typ)
	})
}

// jitter returns a random duration in [0, d).
func jitter(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d))) }

// finish stops the holders gracefully, checks everything recorded, and
// adds the scenario's row to the report. causes selects the handovers
// whose latency the row reports.
func (e *env) finish(desc string, runs int, notes string, causes ...string) report.Row {
	e.t.Helper()
	e.mu.Lock()
	hs := make([]*holder, 0, len(e.holders))
	for _, h := range e.holders {
		hs = append(hs, h)
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() {
			if err := h.proc.Terminate(limit); err != nil && !h.proc.Exited() {
				e.t.Errorf("%s: %v", h.name, err)
			}
		})
	}
	wg.Wait()

	h := e.history()
	if e.cluster != nil {
		notes = strings.TrimPrefix(notes+"; store events: "+e.storeEvents(hs), "; ")
	}
	row := judgeSome(e.t, e.name, h, h.Ops, e.requests(), e.counts, desc, runs, notes, causes...)
	addRow(row)
	return row
}

// storeEvents counts the natsstore events the holders hs reported, by type.
func (e *env) storeEvents(hs []*holder) string {
	counts := map[string]int{}
	for _, h := range hs {
		for _, line := range strings.Split(h.proc.Output(), "\n") {
			if rest, ok := strings.CutPrefix(line, "store event: natsstore."); ok {
				if typ, _, ok := strings.Cut(rest, ":"); ok {
					counts[typ]++
				}
			}
		}
	}
	if len(counts) == 0 {
		return "none"
	}
	var parts []string
	for _, typ := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", typ, counts[typ]))
	}
	return strings.Join(parts, ", ")
}

// history reads everything recorded so far: the holders' logs, the
// operator's changes, the fence's writes and the marks. Each holder's
// operations carry the store's epoch it started in.
func (e *env) history() record.History {
	e.t.Helper()
	h, err := record.ReadLogs(e.dir)
	require.NoError(e.t, err)
	e.mu.Lock()
	epochs := map[string]int{}
	for _, hd := range e.holders {
		epochs[hd.name] = hd.epoch
	}
	h.Ops = append(h.Ops, e.opOps...)
	h.Marks = append(h.Marks, e.marks...)
	e.mu.Unlock()
	for i := range h.Ops {
		h.Ops[i].Epoch = epochs[h.Ops[i].Proc]
	}
	h.Writes = e.fence.Writes()
	sort.SliceStable(h.Marks, func(i, j int) bool { return h.Marks[i].At < h.Marks[j].At })
	return h
}

// requests returns the singleton requests made so far.
func (e *env) requests() []record.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.reqs)
}

// judge checks h (and linOps, the store operations on the store's clock,
// for porcupine, and reqs, a singleton's requests, if any) and returns the
// row; every violation fails the test.
func judge(t *testing.T, name string, h record.History, linOps []record.Op, reqs []record.Request, desc string,
	runs int, notes string, causes ...string) report.Row {
	t.Helper()
	return judgeSome(t, name, h, linOps, reqs, nil, desc, runs, notes, causes...)
}

// judgeSome is judge, counting and timing only the handovers counts
// selects (nil: all of them); every violation counts.
func judgeSome(t *testing.T, name string, h record.History, linOps []record.Op, reqs []record.Request,
	counts func(check.Handover) bool, desc string, runs int, notes string, causes ...string) report.Row {
	t.Helper()
	res := check.Check(h)
	if counts != nil {
		res.Handovers = slices.DeleteFunc(res.Handovers, func(ho check.Handover) bool { return !counts(ho) })
	}
	if len(reqs) > 0 || len(h.IDOps) > 0 {
		rr := check.Requests(h, reqs)
		res.Violations = append(res.Violations, rr.Violations...)
		notes = strings.TrimPrefix(notes+"; "+fmt.Sprintf("%d requests: %d answered, %d failed at their deadline; "+
			"%d applied", rr.Sent, rr.Answered, rr.Failed, rr.Applied), "; ")
		if rr.Window > 0 {
			notes += fmt.Sprintf(", %d sent again in Dedupe's window (applied, not yet recorded) and found applied by the "+
				"resource, which records the ID with the effect", rr.Window)
		}
	}
	lin, info := check.Linearizable(linOps, linTime)
	row := report.Row{
		Scenario: name, Description: desc, Runs: runs, Handovers: len(res.Handovers),
		Violations: len(res.Violations), Takeover: check.Summarize(check.Latencies(res.Handovers, causes...)),
		Cause: strings.Join(causes, ", "), Linearizable: linVerdict(lin), LateStops: res.LateStops,
		Stubborn: res.Stubborn, Notes: notes,
	}
	if split := splitReleases(res.Handovers); split != "" {
		row.Notes = strings.TrimPrefix(row.Notes+"; "+split, "; ")
	}
	if lin == porcupine.Illegal || len(res.Violations) > 0 {
		if b, err := json.MarshalIndent(h, "", " "); err == nil {
			path := filepath.Join(os.TempDir(), "chaos-"+name+"-history.json")
			if os.WriteFile(path, b, 0o644) == nil {
				t.Logf("%s: history in %s", name, path)
			}
		}
	}
	if lin == porcupine.Illegal {
		row.Violations++
		path := filepath.Join(os.TempDir(), "chaos-"+name+"-linearizability.html")
		if err := porcupine.VisualizePath(check.Model.ToModel(), info, path); err == nil {
			t.Errorf("%s: the store history is not linearizable; see %s", name, path)
		} else {
			t.Errorf("%s: the store history is not linearizable (%v)", name, err)
		}
	}
	for i, v := range res.Violations {
		if i == 20 {
			t.Errorf("... and %d more", len(res.Violations)-i)
			break
		}
		t.Errorf("%s: %v", name, v)
	}
	t.Logf("%s: %d runs, %d handovers, %d violations, takeover %+v, linearizable %s, %d ops, %d writes; %s",
		name, row.Runs, row.Handovers, row.Violations, row.Takeover, row.Linearizable, len(h.Ops), len(h.Writes), row.Notes)
	return row
}

// splitReleases says where the time of graceful handovers goes: from the
// release call to the new owner's acquire returning, and from there to its
// workload's start.
func splitReleases(hs []check.Handover) string {
	var toAcq, toWork []time.Duration
	for _, h := range hs {
		if h.Cause == "release" && h.To.WorkStart != 0 {
			toAcq = append(toAcq, time.Duration(h.To.Acquired-h.From.ReleaseCall))
			toWork = append(toWork, time.Duration(h.To.WorkStart-h.To.Acquired))
		}
	}
	if len(toAcq) == 0 {
		return ""
	}
	a, w := check.Summarize(toAcq), check.Summarize(toWork)
	return fmt.Sprintf("release call to acquired p50/p99 %.1f/%.1f ms, acquired to workload start %.1f/%.1f ms",
		msf(a.P50), msf(a.P99), msf(w.P50), msf(w.P99))
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func linVerdict(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "ok"
	case porcupine.Illegal:
		return "**illegal**"
	}
	return "unknown (timed out)"
}

// rounds picks the number of rounds for the short or the full suite.
func rounds(short, long int) int {
	if *full {
		return long
	}
	return short
}

// fullOnly skips t outside the full suite.
func fullOnly(t *testing.T) {
	if !*full {
		t.Skip("part of the full suite only (-chaos.full, make chaos)")
	}
}
