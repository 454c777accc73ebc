package actors_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// The failover benchmarks run LeaseSupervisors on natsstore against an
// in-process nats-server on loopback, each instance with its own
// connection as it would in a fleet. One op is one handover; the
// latencies are reported as p50-ns, p90-ns, p99-ns and max-ns metrics of
// the run, and, when ASTER_BENCH_SAMPLES names a directory, appended there
// one per line (nanoseconds) for the report's distribution plot. Run them
// with -benchtime=Nx: the samples of every run with more than one op are
// kept.

// benchPollInterval is the standby retry interval of the failover
// benchmarks. The default is 5 s; a polling standby's handover
// takes up to 5/4 of it, so the baseline scales with it.
const benchPollInterval = 500 * time.Millisecond

// benchLeaseSeq makes every run's lease ID unique.
var benchLeaseSeq atomic.Int64

// BenchmarkHandover measures graceful handovers: from the moment the
// leader calls Release (after stopping its workload) to the moment the
// standby's workload starts. "watch": the standby is woken by the store's
// watch (natsstore implements lease.Watcher). "poll": the same store with
// the Watcher capability hidden, so the standby finds the lease free on
// its next poll, every StandbyRetryInterval (500 ms, jittered), as a
// standby without a watch does. The release happens at a random phase of the standby's poll
// cycle.
//
// To show where the time goes, "watch" also reports when the release
// reached the standby's store watch (event-p50-ns, event-p99-ns), and when
// a plain nats.go KV watch of the key, on a connection of its own, saw it
// (raw-p50-ns, raw-p99-ns), all from the same Release call.
func BenchmarkHandover(b *testing.B) {
	srv := natstest.Start(b)
	for _, v := range []struct {
		name  string
		watch bool
		phase time.Duration // the release happens at a random moment within this after the standby is ready
	}{
		{"watch", true, 10 * time.Millisecond},
		{"poll", false, benchPollInterval},
	} {
		b.Run(v.name, func(b *testing.B) {
			f := newFailoverRig(b, srv.ClientURL(), lease.Config{
				TTL: 10 * time.Second, StandbyRetryInterval: benchPollInterval,
			}, v.watch)
			leader := f.start(b)
			leader.waitLeading(b)
			raw := watchRaw(b, srv.ClientURL(), f.lease.LeaseID)
			samples := make([]time.Duration, 0, b.N)
			var events, raws []time.Duration
			b.ResetTimer()
			for range b.N {
				standby := f.start(b)
				standby.waitStandby(b)
				time.Sleep(rand.N(v.phase))
				raw.reset()
				leader.stop(b)
				started := standby.waitLeading(b)
				released := leader.releasedAt(b)
				samples = append(samples, started.Sub(released))
				if v.watch {
					if at, ok := standby.freeAt(); ok {
						events = append(events, at.Sub(released))
					}
				}
				if at, ok := raw.freeAt(); ok {
					raws = append(raws, at.Sub(released))
				}
				leader = standby
			}
			b.StopTimer()
			leader.stop(b)
			raw.stop(b)
			reportLatencies(b, "handover-"+v.name, samples)
			b.ReportMetric(float64(benchPollInterval), "retry-ns")
			if v.watch {
				reportPercentiles(b, "event-", events)
				reportPercentiles(b, "raw-", raws)
				b.ReportMetric(float64(b.N-len(raws)), "raw-missed")
				writeSamples(b, "handover-watch-event", events)
				writeSamples(b, "handover-raw-watch", raws)
			}
		})
	}
}

// BenchmarkCrashTakeover measures takeover after the leader dies: its
// connection is closed at a random moment of its renewal cycle (a renewal
// in flight may still land, as after a SIGKILL), so its lease is neither
// renewed nor released. The standby, which counts the TTL from when its
// watch delivered the leader's last write, takes over then (the server
// would remove the key only a grace later). Latency from the crash (goal:
// within TTL + 250 ms at p99) is p50-ns/p99-ns; from the send of the dead
// leader's last successful write plus the TTL (how late after the earliest
// possible takeover it happened) is late-p50-ns/late-p99-ns. TTL 1 s (the
// smallest natsstore accepts), renewal every 500 ms (the default for it).
func BenchmarkCrashTakeover(b *testing.B) {
	srv := natstest.Start(b)
	cfg := lease.Config{TTL: time.Second, StandbyRetryInterval: 5 * time.Second}
	f := newFailoverRig(b, srv.ClientURL(), cfg, true)
	period := lease.RenewPeriod(cfg.EffectiveRenewInterval(), cfg.EffectiveTTL())
	leader := f.start(b)
	leader.waitLeading(b)
	samples := make([]time.Duration, 0, b.N)
	var late []time.Duration
	b.ResetTimer()
	for range b.N {
		standby := f.start(b)
		standby.waitStandby(b)
		time.Sleep(rand.N(period))
		crashed := leader.crash(b)
		started := standby.waitLeading(b)
		expires := leader.lastWrite().Add(cfg.TTL)
		samples = append(samples, started.Sub(crashed))
		late = append(late, started.Sub(expires))
		leader = standby
	}
	b.StopTimer()
	leader.stop(b)
	reportLatencies(b, "takeover-crash", samples)
	reportPercentiles(b, "late-", late)
	writeSamples(b, "takeover-crash-late", late)
	b.ReportMetric(float64(cfg.TTL), "ttl-ns")
	b.ReportMetric(float64(period), "renew-ns")
}

// failoverRig starts LeaseSupervisor instances competing for one lease.
type failoverRig struct {
	url   string
	lease lease.Config
	watch bool
}

func newFailoverRig(b *testing.B, url string, cfg lease.Config, watch bool) *failoverRig {
	cfg.LeaseID = fmt.Sprintf("bench.failover.%d", benchLeaseSeq.Add(1))
	return &failoverRig{url: url, lease: cfg, watch: watch}
}

// benchInstance is one LeaseSupervisor with a store (and connection) of
// its own.
type benchInstance struct {
	store   *natsstore.Store
	cancel  context.CancelFunc
	done    chan error
	standby chan struct{}
	started chan time.Time
	release chan time.Time
	free    chan time.Time // the first EventFree of the instance's watch

	mu   sync.Mutex
	sent time.Time // send time of the last successful acquire or renew
}

func (f *failoverRig) start(b *testing.B) *benchInstance {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{f.url}, ReconnectWait: 20 * time.Millisecond},
		natsstore.Config{Bucket: "bench_failover"})
	if err != nil {
		b.Fatal(err)
	}
	in := &benchInstance{
		store: st, done: make(chan error, 1), standby: make(chan struct{}, 1),
		started: make(chan time.Time, 1), release: make(chan time.Time, 1), free: make(chan time.Time, 1),
	}
	var store lease.Store = &timedStore{Store: st, in: in}
	if f.watch {
		store = timedWatchStore{timedStore: store.(*timedStore), Watcher: st}
	}
	cfg := f.lease
	cfg.OwnerID = lease.NewOwnerID()
	sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
		Lease: cfg,
		Store: store,
		Workload: actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			signal(in.started, time.Now())
			<-ctx.Done()
			return nil
		}),
		OnEvent: func(ev actors.Event) {
			if _, ok := ev.(actors.Standby); ok {
				signal(in.standby, struct{}{})
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	in.cancel = stop
	go func() { in.done <- sup.Run(runCtx) }()
	return in
}

func signal[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

const benchWait = 30 * time.Second

func (in *benchInstance) waitStandby(b *testing.B) {
	b.Helper()
	select {
	case <-in.standby:
	case <-time.After(benchWait):
		b.Fatal("no standby within", benchWait)
	}
}

func (in *benchInstance) waitLeading(b *testing.B) time.Time {
	b.Helper()
	select {
	case at := <-in.started:
		return at
	case <-time.After(benchWait):
		b.Fatal("no workload start within", benchWait)
		return time.Time{}
	}
}

func (in *benchInstance) releasedAt(b *testing.B) time.Time {
	b.Helper()
	return receive(b, in.release, "release")
}

// freeAt returns when the instance's watch reported the lease free, if it
// did within a second: the diagnostic timings never fail a benchmark.
func (in *benchInstance) freeAt() (time.Time, bool) { return receiveWithin(in.free, time.Second) }

func receiveWithin(ch <-chan time.Time, d time.Duration) (time.Time, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case at := <-ch:
		return at, true
	case <-t.C:
		return time.Time{}, false
	}
}

func receive(b *testing.B, ch <-chan time.Time, what string) time.Time {
	b.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(benchWait):
		b.Fatal("no", what, "within", benchWait)
		return time.Time{}
	}
}

// stop shuts the instance down gracefully and waits for Run to return.
func (in *benchInstance) stop(b *testing.B) {
	b.Helper()
	in.cancel()
	select {
	case err := <-in.done:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(benchWait):
		b.Fatal("Run did not return within", benchWait)
	}
	if err := in.store.Close(); err != nil {
		b.Fatal(err)
	}
}

// crash closes the instance's connection, so that it can neither renew
// nor release, then stops what is left of it, and returns the moment of
// the crash.
func (in *benchInstance) crash(b *testing.B) time.Time {
	b.Helper()
	at := time.Now()
	_ = in.store.Close()
	in.cancel()
	select {
	case <-in.done: // an error is expected: the store is closed
	case <-time.After(benchWait):
		b.Fatal("Run did not return within", benchWait)
	}
	return at
}

func (in *benchInstance) lastWrite() time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sent
}

// timedStore records when its instance calls Release and when its last
// successful write was sent. It hides the Watcher capability.
type timedStore struct {
	lease.Store
	in *benchInstance
}

func (s *timedStore) Acquire(ctx context.Context, c lease.Claim) (lease.Acquisition, error) {
	sent := time.Now()
	a, err := s.Store.Acquire(ctx, c)
	if err == nil && a.Acquired {
		s.wrote(sent)
	}
	return a, err
}

func (s *timedStore) Renew(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	sent := time.Now()
	l, err := s.Store.Renew(ctx, l)
	if err == nil {
		s.wrote(sent)
	}
	return l, err
}

func (s *timedStore) Release(ctx context.Context, l lease.Lease) error {
	signal(s.in.release, time.Now())
	return s.Store.Release(ctx, l)
}

func (s *timedStore) wrote(sent time.Time) {
	s.in.mu.Lock()
	s.in.sent = sent
	s.in.mu.Unlock()
}

// timedWatchStore is a timedStore that keeps the Watcher capability, and
// records when its watch first reports the lease free.
type timedWatchStore struct {
	*timedStore
	lease.Watcher
}

func (s timedWatchStore) Watch(ctx context.Context, leaseID string) (<-chan lease.Event, error) {
	ch, err := s.Watcher.Watch(ctx, leaseID)
	if err != nil {
		return nil, err
	}
	out := make(chan lease.Event, 1)
	go func() {
		defer close(out)
		for ev := range ch {
			if ev.Kind == lease.EventFree {
				signal(s.in.free, time.Now())
			}
			out <- ev // the supervisor drains its watch until it closes
		}
	}()
	return out, nil
}

// rawWatch is a plain nats.go KV watch of one key on a connection of its
// own: the floor of what any watch can do.
type rawWatch struct {
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan struct{}
	free   chan time.Time // when a delete or expiry marker arrived
}

func watchRaw(b *testing.B, url, key string) *rawWatch {
	b.Helper()
	nc, err := nats.Connect(url, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // quiet
	if err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	kv, err := js.KeyValue(ctx, "bench_failover")
	if err != nil {
		b.Fatal(err)
	}
	w, err := kv.Watch(ctx, key, jetstream.UpdatesOnly()) // lives until cancel
	if err != nil {
		b.Fatal(err)
	}
	r := &rawWatch{nc: nc, cancel: cancel, done: make(chan struct{}), free: make(chan time.Time, 1)}
	go func() {
		defer close(r.done)
		for e := range w.Updates() {
			if e != nil && e.Operation() != jetstream.KeyValuePut {
				signal(r.free, time.Now())
			}
		}
	}()
	return r
}

// reset forgets a marker seen earlier.
func (r *rawWatch) reset() {
	select {
	case <-r.free:
	default:
	}
}

// freeAt returns when the watch saw a delete or expiry marker, if it did
// within a second. An ordered consumer that nats.go finds inactive (missed
// heartbeats on a loaded machine) is reset and can miss a marker: such
// rounds are counted (raw-missed), not timed.
func (r *rawWatch) freeAt() (time.Time, bool) { return receiveWithin(r.free, time.Second) }

func (r *rawWatch) stop(b *testing.B) {
	b.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(benchWait):
		b.Fatal("raw watch did not stop")
	}
	r.nc.Close()
}

// percentile returns the q-quantile of ds by the nearest-rank method.
func percentile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(q*float64(len(s)) + 0.999999)
	return s[min(max(rank, 1), len(s))-1]
}

// reportLatencies reports the percentiles of samples and writes them for
// the report (see writeSamples).
func reportLatencies(b *testing.B, name string, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	b.ReportMetric(float64(percentile(samples, 0.50)), "p50-ns")
	b.ReportMetric(float64(percentile(samples, 0.90)), "p90-ns")
	b.ReportMetric(float64(percentile(samples, 0.99)), "p99-ns")
	b.ReportMetric(float64(slices.Max(samples)), "max-ns")
	writeSamples(b, name, samples)
}

// reportPercentiles reports the p50 and p99 of samples as prefix+"p50-ns"
// and prefix+"p99-ns".
func reportPercentiles(b *testing.B, prefix string, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	b.ReportMetric(float64(percentile(samples, 0.50)), prefix+"p50-ns")
	b.ReportMetric(float64(percentile(samples, 0.99)), prefix+"p99-ns")
}

// writeSamples appends samples, in nanoseconds, one per line, to
// $ASTER_BENCH_SAMPLES/name.txt, for runs of more than one op (the first
// run of a benchmark, with one op, only discovers sub-benchmarks).
func writeSamples(b *testing.B, name string, samples []time.Duration) {
	dir := os.Getenv("ASTER_BENCH_SAMPLES")
	if dir == "" || b.N <= 1 || len(samples) == 0 {
		return
	}
	var sb strings.Builder
	for _, d := range samples {
		sb.WriteString(strconv.FormatInt(d.Nanoseconds(), 10))
		sb.WriteByte('\n')
	}
	f, err := os.OpenFile(filepath.Join(dir, name+".txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.WriteString(sb.String()); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
