package lock_test

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

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lock"
	"github.com/asterforge/aster/natsstore"
)

// The takeover benchmarks run Lockers on natsstore against an in-process
// nats-server on loopback, each Locker with a NATS connection of its own (a
// process of its own, as far as the server can tell). Latencies are
// reported as p50-ns, p90-ns, p99-ns and max-ns, and, when
// ASTER_BENCH_SAMPLES names a directory, appended there one per line
// (nanoseconds) for the report, as the failover benchmarks of package
// actors do.

// takeoverTTL is the TTL of the crash benchmarks: that of the outside
// measurement the session's goal comes from.
const takeoverTTL = 2 * time.Second

// takeoverLocks is the number of locks a killed holder holds, each awaited
// by a contender in a Locker of its own.
const takeoverLocks = 4

// takeoverSeq makes every run's resources unique.
var takeoverSeq atomic.Int64

// BenchmarkLockCrashTakeover measures how long after its holder is killed a
// lock is taken by a contender waiting in another Locker: the holder holds
// 4 locks, each awaited by a contender in a Locker of its own, and at a
// random moment of its renewal cycle its NATS connection is closed, as a
// SIGKILL closes it: the kernel closes the socket, so nothing it had not
// sent reaches the server (a renewal in flight may still land), nothing is
// released, and the server drops its subscriptions. The Locker itself is
// left running on the dead connection, as a frozen process would be, and
// is closed only after the locks were taken. Closing the store instead
// would stop its watches first, through the connection; stopping a
// watchdog leaves the connection, and is no kill.
//
// Sub-benchmarks, at TTL 2 s (renewed every second):
//
//   - lease: every lock has a lease (and a watchdog) of its own, and so
//     have the contenders': the baseline, and the goal's reference;
//   - session: the locks are held under the holder's session
//     (Config.Session), and the contenders' Lockers hold theirs under
//     sessions too (lease.SessionStore.AcquireUnder);
//   - session-lease-contenders: the locks are held under a session, and
//     the contenders take them with leases of their own (Store.Acquire).
//
// Metrics: p50-ns, p90-ns, p99-ns and max-ns of the time from the kill to
// each lock taken (goal: p99 at most TTL + 250 ms), p99/ttl, late-p50-ns
// and late-p99-ns (from the send of the dead holder's last successful
// renewal of the lease the lock rested on, plus the TTL: how late after the
// earliest moment a contender may judge it ended), ttl-ns and takeovers.
// One op is one kill.
//
//	go test -run '^$' -bench BenchmarkLockCrashTakeover -benchtime 10x ./lock
func BenchmarkLockCrashTakeover(b *testing.B) {
	srv := natstest.Start(b)
	for _, tc := range []struct {
		name                     string
		session, contendersUnder bool
	}{
		{"lease", false, false},
		{"session", true, true},
		{"session-lease-contenders", true, false},
	} {
		b.Run(tc.name, func(b *testing.B) { crashTakeover(b, srv.ClientURL(), tc.name, tc.session, tc.contendersUnder) })
	}
}

func crashTakeover(b *testing.B, url, name string, session, contendersUnder bool) {
	contenders := make([]*lock.Locker, takeoverLocks)
	for i := range contenders {
		contenders[i] = benchLocker(b, benchStore(b, url, "bench_takeover"), lock.Config{
			OwnerID: fmt.Sprint("contender-", i), TTL: takeoverTTL, Session: contendersUnder})
	}
	cfg := lock.Config{OwnerID: "holder", TTL: takeoverTTL, Session: session}
	period := lease.RenewPeriod(lease.Config{TTL: takeoverTTL}.EffectiveRenewInterval(), takeoverTTL)
	var samples, late []time.Duration
	b.ResetTimer()
	for range b.N {
		run := takeoverSeq.Add(1)
		h := startHolder(b, url, cfg)
		resources := make([]string, takeoverLocks)
		held := make([]*lock.Guard, takeoverLocks)
		for i := range resources {
			resources[i] = fmt.Sprintf("takeover.%s.%d.%d", strings.ReplaceAll(name, "-", "."), run, i)
			g, err := h.locker.TryAcquire(context.Background(), resources[i])
			if err != nil {
				b.Fatal(err)
			}
			held[i] = g
		}
		type take struct {
			at  time.Time
			g   *lock.Guard
			err error
		}
		takes := make([]take, takeoverLocks)
		var wg sync.WaitGroup
		ctx, cancel := context.WithTimeout(context.Background(), benchWaitTakeover)
		for i, l := range contenders {
			wg.Go(func() {
				g, err := l.Acquire(ctx, resources[i])
				takes[i] = take{at: time.Now(), g: g, err: err}
				if err == nil {
					// The dead holder's guard must have ended by now: its
					// validity ran out before the contender may take it.
					if _, terr := held[i].Token(); terr == nil {
						b.Errorf("%s: taken while the killed holder's guard still gives a token", resources[i])
					}
				}
			})
		}
		// Contenders wait a while (and watch the session, after 100 ms);
		// the kill comes at a random moment of the renewal cycle.
		time.Sleep(300*time.Millisecond + rand.N(period))
		killed := h.kill()
		wg.Wait()
		cancel()
		b.StopTimer()
		for i, t := range takes {
			if t.err != nil {
				b.Fatalf("%s: %v", resources[i], t.err)
			}
			samples = append(samples, t.at.Sub(killed))
			if sent, ok := h.lastWrite(held[i]); ok {
				late = append(late, t.at.Sub(sent.Add(takeoverTTL)))
			}
			if err := t.g.Release(context.Background()); err != nil {
				b.Error(err)
			}
		}
		h.close()
		b.StartTimer()
	}
	b.StopTimer()
	reportTakeover(b, "lock-takeover-crash-"+name, samples)
	reportQuantiles(b, "late-", late)
	if len(samples) > 0 {
		b.ReportMetric(float64(quantileNR(samples, 0.99))/float64(takeoverTTL), "p99/ttl")
	}
	b.ReportMetric(float64(takeoverTTL), "ttl-ns")
	b.ReportMetric(float64(len(samples)), "takeovers")
}

// benchWaitTakeover bounds one run's wait for its takeovers.
const benchWaitTakeover = 30 * time.Second

// killedHolder is a Locker on a NATS connection of its own, which the
// benchmark closes as a SIGKILL would.
type killedHolder struct {
	nc     *nats.Conn
	store  *natsstore.Store
	locker *lock.Locker
	writes *timedWrites
}

func startHolder(b *testing.B, url string, cfg lock.Config) *killedHolder {
	b.Helper()
	nc, err := nats.Connect(url, nats.ReconnectBufSize(-1))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := natsstore.NewConn(ctx, nc, natsstore.Config{Bucket: "bench_takeover"})
	if err != nil {
		nc.Close()
		b.Fatal(err)
	}
	w := &timedWrites{SessionStore: st, sent: make(map[string]time.Time)}
	l, err := lock.New(w, cfg)
	if err != nil {
		nc.Close()
		b.Fatal(err)
	}
	return &killedHolder{nc: nc, store: st, locker: l, writes: w}
}

// kill closes the holder's connection and returns when.
func (h *killedHolder) kill() time.Time {
	at := time.Now()
	h.nc.Close()
	return at
}

// close stops what is left of the holder: its Locker (whose releases fail
// on the closed connection) and its store.
func (h *killedHolder) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.locker.Close(ctx)
	_ = h.store.Close()
}

// lastWrite returns the send time of the last successful write of the
// lease g rested on: its Locker's session, or its own (the Locker has no
// Prefix: its lease ID is its resource).
func (h *killedHolder) lastWrite(g *lock.Guard) (time.Time, bool) {
	id := g.Session()
	if id == "" {
		id = g.Resource()
	}
	return h.writes.last(id)
}

// timedWrites records the send time of each lease's last successful write
// (acquisition or renewal).
type timedWrites struct {
	lease.SessionStore
	mu   sync.Mutex
	sent map[string]time.Time
}

func (s *timedWrites) wrote(id string, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent[id] = sent
}

func (s *timedWrites) last(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.sent[id]
	return t, ok
}

func (s *timedWrites) Acquire(ctx context.Context, c lease.Claim) (lease.Acquisition, error) {
	sent := time.Now()
	a, err := s.SessionStore.Acquire(ctx, c)
	if err == nil && a.Acquired {
		s.wrote(c.LeaseID, sent)
	}
	return a, err
}

func (s *timedWrites) Renew(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	sent := time.Now()
	nl, err := s.SessionStore.Renew(ctx, l)
	if err == nil {
		s.wrote(l.ID, sent)
	}
	return nl, err
}

// BenchmarkSessionLockHandover measures graceful handovers of locks held
// under a session: two Lockers with sessions (Config.Session), each on a
// connection of its own, 4 locks; the one holding them releases each in
// turn while the other waits for each in Acquire, and then the roles swap.
// Latency from a Release call to the other Locker's Acquire returning
// (goal: p99 at most 10 ms) is p50-ns, p90-ns, p99-ns and max-ns; one op
// is one round of 4 handovers.
//
//	go test -run '^$' -bench BenchmarkSessionLockHandover -benchtime 200x ./lock
func BenchmarkSessionLockHandover(b *testing.B) {
	srv := natstest.Start(b)
	ls := [2]*lock.Locker{}
	for i := range ls {
		ls[i] = benchLocker(b, benchStore(b, srv.ClientURL(), "bench_session_handover"), lock.Config{
			OwnerID: fmt.Sprint("node-", i), TTL: takeoverTTL, Session: true})
	}
	resources := make([]string, takeoverLocks)
	guards := make([]*lock.Guard, takeoverLocks)
	for i := range resources {
		resources[i] = fmt.Sprintf("handover.session.%d.%d", takeoverSeq.Add(1), i)
		g, err := ls[0].TryAcquire(context.Background(), resources[i])
		if err != nil {
			b.Fatal(err)
		}
		guards[i] = g
	}
	samples := make([]time.Duration, 0, b.N*takeoverLocks)
	b.ResetTimer()
	for n := range b.N {
		next := ls[(n+1)%2]
		type take struct {
			at  time.Time
			g   *lock.Guard
			err error
		}
		takes := make([]take, takeoverLocks)
		var wg sync.WaitGroup
		ctx, cancel := context.WithTimeout(context.Background(), benchWaitTakeover)
		for i := range resources {
			wg.Go(func() {
				g, err := next.Acquire(ctx, resources[i])
				takes[i] = take{at: time.Now(), g: g, err: err}
			})
		}
		time.Sleep(50*time.Millisecond + rand.N(10*time.Millisecond)) // the waiters are watching
		released := make([]time.Time, takeoverLocks)
		for i, g := range guards {
			released[i] = time.Now()
			if err := g.Release(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		cancel()
		for i, t := range takes {
			if t.err != nil {
				b.Fatalf("%s: %v", resources[i], t.err)
			}
			samples = append(samples, t.at.Sub(released[i]))
			guards[i] = t.g
		}
	}
	b.StopTimer()
	for _, g := range guards {
		_ = g.Release(context.Background())
	}
	reportTakeover(b, "lock-handover-session", samples)
	b.ReportMetric(float64(len(samples)), "handovers")
}

// quantileNR returns the q-quantile of ds by the nearest-rank method, as
// package actors' failover benchmarks and the report compute it.
func quantileNR(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(q*float64(len(s)) + 0.999999)
	return s[min(max(rank, 1), len(s))-1]
}

// reportTakeover reports the percentiles of samples and writes them for the
// report (writeTakeoverSamples).
func reportTakeover(b *testing.B, name string, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	reportQuantiles(b, "", samples)
	b.ReportMetric(float64(quantileNR(samples, 0.90)), "p90-ns")
	b.ReportMetric(float64(slices.Max(samples)), "max-ns")
	writeTakeoverSamples(b, name, samples)
}

// reportQuantiles reports the p50 and p99 of samples as prefix+"p50-ns"
// and prefix+"p99-ns".
func reportQuantiles(b *testing.B, prefix string, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	b.ReportMetric(float64(quantileNR(samples, 0.50)), prefix+"p50-ns")
	b.ReportMetric(float64(quantileNR(samples, 0.99)), prefix+"p99-ns")
}

// writeTakeoverSamples appends samples, in nanoseconds, one per line, to
// $ASTER_BENCH_SAMPLES/name.txt, for runs of more than one op (the first
// run of a benchmark, with one op, only discovers sub-benchmarks).
func writeTakeoverSamples(b *testing.B, name string, samples []time.Duration) {
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
