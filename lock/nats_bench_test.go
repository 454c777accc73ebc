package lock_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
	"github.com/asterforge/aster/natsstore"
)

// benchStore opens a natsstore on url with a connection of its own (a
// process of its own, as far as the server can tell).
func benchStore(b *testing.B, url, bucket string) *natsstore.Store {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{url}}, natsstore.Config{Bucket: bucket})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func benchLocker(b *testing.B, store lease.Store, cfg lock.Config) *lock.Locker {
	b.Helper()
	l, err := lock.New(store, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			b.Error(err)
		}
	})
	return l
}

// BenchmarkAcquireRelease times an uncontended Acquire + Release (and a
// TryAcquire + Release) of one lock on natsstore against an in-process
// nats-server, beside two raw KV writes, the primitive they are made of
// (a conditional publish with the expected last sequence and a TTL, then a
// conditional delete marker, on a connection of its own), in alternating
// order. ns/op is the lock's mean; raw2-ns/op the two raw writes'; lock/raw2
// their ratio and lock/raw2-p50 the ratio of the medians (goal: at most
// 1.1); outside-ns/op is the lock's mean time outside the store's calls (its
// own share, the store's being the rest). Sub-benchmarks: lease (a lock with a lease of its own and its
// watchdog), session (under the Locker's session, already open), try
// (TryAcquire, lease).
//
//	go test -run '^$' -bench BenchmarkAcquireRelease ./lock
func BenchmarkAcquireRelease(b *testing.B) {
	srv := natstest.Start(b)
	store := benchStore(b, srv.ClientURL(), "bench_lock")
	js := natstest.JetStream(b, srv.ClientURL(), nats.ReconnectBufSize(-1))
	raw := &rawKV{js: js, subject: "$KV.bench_lock.raw", data: bytes.Repeat([]byte("x"), 128)}
	ctx := context.Background()
	for _, mode := range []string{"lease", "session", "try"} {
		b.Run(mode, func(b *testing.B) {
			ts := &timedStore{Store: store}
			l := benchLocker(b, ts, lock.Config{OwnerID: "bench", Session: mode == "session"})
			take := l.Acquire
			if mode == "try" {
				take = l.TryAcquire
			}
			var outside time.Duration
			cycle := func() time.Duration {
				in0 := ts.in.Load()
				t0 := time.Now()
				g, err := take(ctx, "res."+mode)
				if err != nil {
					b.Fatal(err)
				}
				if err := g.Release(ctx); err != nil {
					b.Fatal(err)
				}
				d := time.Since(t0)
				outside += d - time.Duration(ts.in.Load()-in0)
				return d
			}
			cycle() // warm up: the actor system, the session, the store's knowledge of the key
			raw.pair(b)
			lockTimes := make([]time.Duration, 0, b.N)
			rawTimes := make([]time.Duration, 0, b.N)
			outside = 0
			b.ResetTimer()
			for i := range b.N {
				if i%2 == 0 {
					lockTimes = append(lockTimes, cycle())
					rawTimes = append(rawTimes, raw.pair(b))
				} else {
					rawTimes = append(rawTimes, raw.pair(b))
					lockTimes = append(lockTimes, cycle())
				}
			}
			b.StopTimer()
			lockMean, rawMean := meanOf(lockTimes), meanOf(rawTimes)
			b.ReportMetric(lockMean, "ns/op")
			b.ReportMetric(rawMean, "raw2-ns/op")
			b.ReportMetric(lockMean/rawMean, "lock/raw2")
			b.ReportMetric(medianOf(lockTimes)/medianOf(rawTimes), "lock/raw2-p50")
			b.ReportMetric(float64(outside)/float64(max(len(lockTimes), 1)), "outside-ns/op")
		})
	}
}

// timedStore is a natsstore that adds up the time its Acquire,
// AcquireUnder and Release calls take (its other methods, the watch
// included, are natsstore's), so that a lock's own share of an Acquire +
// Release, outside the store, can be told apart.
type timedStore struct {
	*natsstore.Store
	in atomic.Int64 // nanoseconds
}

func (t *timedStore) since(t0 time.Time) { t.in.Add(int64(time.Since(t0))) }

func (t *timedStore) Acquire(ctx context.Context, c lease.Claim) (lease.Acquisition, error) {
	defer t.since(time.Now())
	return t.Store.Acquire(ctx, c)
}

func (t *timedStore) AcquireUnder(ctx context.Context, c lease.Claim, session lease.Lease) (lease.Acquisition, error) {
	defer t.since(time.Now())
	return t.Store.AcquireUnder(ctx, c, session)
}

func (t *timedStore) Release(ctx context.Context, l lease.Lease) error {
	defer t.since(time.Now())
	return t.Store.Release(ctx, l)
}

// rawKV makes raw KV writes on one key: a conditional put with a TTL, then
// a conditional delete marker.
type rawKV struct {
	js      jetstream.JetStream
	subject string
	data    []byte
	seq     uint64
}

func (w *rawKV) write(b *testing.B, del bool) {
	m := &nats.Msg{Subject: w.subject, Data: w.data}
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(w.seq), jetstream.WithMsgTTL(30 * time.Second)}
	if del {
		m.Header = nats.Header{"KV-Operation": []string{"DEL"}}
	}
	ack, err := w.js.PublishMsg(context.Background(), m, opts...)
	if err != nil {
		b.Fatal(err)
	}
	w.seq = ack.Sequence
}

// pair times a put and a delete marker.
func (w *rawKV) pair(b *testing.B) time.Duration {
	t0 := time.Now()
	w.write(b, false)
	w.write(b, true)
	return time.Since(t0)
}

func meanOf(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum) / float64(max(len(ds), 1))
}

func medianOf(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2])
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

// BenchmarkNew times lock.New, and how long after New a Locker's first lock
// (with a watchdog, on an in-memory store) is taken, which waits for the
// actor system New starts in the background: first-lock-us.
//
//	go test -run '^$' -bench BenchmarkNew ./lock
func BenchmarkNew(b *testing.B) {
	mem := leasetest.NewMemStore()
	defer mem.Close()
	ctx := context.Background()
	var first time.Duration
	for b.Loop() {
		t0 := time.Now()
		l, err := lock.New(mem, lock.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		g, err := l.TryAcquire(ctx, "res")
		first += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		_ = g.Release(ctx)
		_ = l.Close(ctx)
		b.StartTimer()
	}
	b.ReportMetric(float64(first.Microseconds())/float64(b.N), "first-lock-us")
}

// BenchmarkLockerLife is a short-lived Locker's whole life on the
// in-memory store: lock.New, one lock taken and released, Close.
// own=true starts the Locker's own actor system (Config.System nil);
// own=false gives every Locker one shared System: the difference is what
// an actor system of its own costs.
//
//	go test -run '^$' -bench BenchmarkLockerLife -benchtime 2000x ./lock
func BenchmarkLockerLife(b *testing.B) {
	for _, own := range []bool{true, false} {
		b.Run(fmt.Sprintf("own=%t", own), func(b *testing.B) {
			mem := leasetest.NewMemStore()
			defer mem.Close()
			cfg := lock.Config{}
			if !own {
				sys := actorsys.New(nil)
				defer sys.Shutdown()
				cfg.System = sys.ActorSystem
			}
			ctx := context.Background()
			for b.Loop() {
				l, err := lock.New(mem, cfg)
				if err != nil {
					b.Fatal(err)
				}
				g, err := l.TryAcquire(ctx, "res")
				if err != nil {
					b.Fatal(err)
				}
				if err := g.Release(ctx); err != nil {
					b.Fatal(err)
				}
				if err := l.Close(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHeldLocksNATS holds many locks of one Locker on natsstore against
// an in-process nats-server, at the default TTL (30 s, renewed every 10 s),
// and measures the steady CPU time of the whole process (the client and the
// server together) over 1.5 renew periods after taking them: cores (CPU
// seconds per second), cpu-ns/lock-s (per lock and second),
// cpu-us/renewal (per renewal of a lock's own lease; the session's one
// renewal per period under a session), renewals (those seen), and B/lock
// (the process's live heap per lock after GC, the server's included).
// mode=lease gives every lock a lease and a watchdog of its own;
// mode=session holds them under the Locker's session.
//
//	go test -run '^$' -bench BenchmarkHeldLocksNATS -benchtime 1x ./lock
func BenchmarkHeldLocksNATS(b *testing.B) {
	for _, tc := range []struct {
		mode  string
		locks int
	}{{"lease", 10_000}, {"session", 10_000}, {"session", 100_000}} {
		b.Run(fmt.Sprintf("locks=%d/mode=%s", tc.locks, tc.mode), func(b *testing.B) {
			for range b.N {
				heldLocksNATS(b, tc.locks, tc.mode == "session")
			}
		})
	}
}

func heldLocksNATS(b *testing.B, n int, session bool) {
	srv := natstest.Start(b)
	store := benchStore(b, srv.ClientURL(), "bench_held")
	var renewals atomic.Int64
	cfg := lock.Config{OwnerID: "bench-node", Session: session}
	counting := &countRenewals{Store: store, n: &renewals}
	var st lease.Store = counting
	if session {
		st = countRenewalsUnder{counting}
	}
	heap0, _ := heap()
	l, err := lock.New(st, cfg)
	if err != nil {
		b.Fatal(err)
	}
	guards := make([]*lock.Guard, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				g, err := l.TryAcquire(context.Background(), fmt.Sprint("res.", i))
				if err != nil {
					b.Error(err)
					return
				}
				guards[i] = g
			}
		})
	}
	wg.Wait()
	acquireTook := time.Since(start)
	if b.Failed() {
		_ = l.Close(context.Background())
		return
	}
	heap1, _ := heap()
	period := lease.RenewPeriod(lease.Config{}.EffectiveRenewInterval(), lease.DefaultTTL)
	observe := period * 3 / 2
	renewals.Store(0)
	cpu0, t0 := cpuTime(), time.Now()
	time.Sleep(observe)
	cpu, wall := cpuTime()-cpu0, time.Since(t0)
	seen := renewals.Load()
	for _, g := range guards {
		if _, err := g.Token(); err != nil {
			b.Errorf("a lock was lost: %v", err)
			break
		}
	}
	closeStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	if err := l.Close(ctx); err != nil {
		b.Errorf("Close: %v", err)
	}
	cancel()
	closeTook := time.Since(closeStart)
	cores := cpu.Seconds() / wall.Seconds()
	b.ReportMetric(cores, "cores")
	b.ReportMetric(float64(cpu.Nanoseconds())/wall.Seconds()/float64(n), "cpu-ns/lock-s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(max(seen, 1)), "cpu-us/renewal")
	b.ReportMetric(float64(seen), "renewals")
	b.ReportMetric(float64(heap1-heap0)/float64(n), "B/lock")
	b.ReportMetric(float64(acquireTook.Microseconds())/float64(n), "acquire-us/lock")
	b.ReportMetric(ms(closeTook), "close-ms")
	b.Logf("%d locks (session %v): %.3f cores over %v (%d renewals, %.1f µs CPU each), %.0f B/lock, acquire %v, close %v",
		n, session, cores, wall.Round(time.Millisecond), seen, float64(cpu.Microseconds())/float64(max(seen, 1)),
		float64(heap1-heap0)/float64(n), acquireTook, closeTook)
	runtime.KeepAlive(guards)
}

// countRenewals counts the renewals that succeed.
type countRenewals struct {
	lease.Store
	n *atomic.Int64
}

func (s *countRenewals) Renew(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	l, err := s.Store.Renew(ctx, l)
	if err == nil {
		s.n.Add(1)
	}
	return l, err
}

func (s *countRenewals) Watch(ctx context.Context, id string) (<-chan lease.Event, error) {
	return s.Store.(lease.Watcher).Watch(ctx, id)
}

// countRenewalsUnder is countRenewals over a lease.SessionStore.
type countRenewalsUnder struct{ *countRenewals }

func (s countRenewalsUnder) AcquireUnder(ctx context.Context, c lease.Claim, session lease.Lease) (lease.Acquisition, error) {
	return s.Store.(lease.SessionStore).AcquireUnder(ctx, c, session)
}

// BenchmarkLockHandover times graceful handovers of one lock between
// candidates on natsstore against an in-process nats-server: from the
// holder's Release call to the next holder's Acquire returning. Each
// Locker has a store and a connection of its own (a process, as far as the
// server can tell); a candidate that released waits for the next
// acquisition before it contends again. locks=3: three Lockers of one
// candidate each; locks=100: four Lockers of 25 candidates each. Metrics:
// p50-ms, p90-ms, p99-ms of the handover, and handovers (samples).
//
//	go test -run '^$' -bench BenchmarkLockHandover -benchtime 300x ./lock
func BenchmarkLockHandover(b *testing.B) {
	for _, tc := range []struct {
		name             string
		lockers, perEach int
		session          bool
	}{
		{"candidates=3", 3, 1, false},
		{"candidates=100", 4, 25, false},
		{"candidates=100/session", 4, 25, true},
	} {
		b.Run(tc.name, func(b *testing.B) { lockHandover(b, tc.lockers, tc.perEach, tc.session) })
	}
}

func lockHandover(b *testing.B, lockers, perEach int, session bool) {
	srv := natstest.Start(b)
	ls := make([]*lock.Locker, lockers)
	for i := range ls {
		ls[i] = benchLocker(b, benchStore(b, srv.ClientURL(), "bench_handover"), lock.Config{
			OwnerID: fmt.Sprint("node-", i), Session: session, RetryInterval: time.Second})
	}
	var (
		mu         sync.Mutex
		lat        []time.Duration
		releasedAt time.Time // of the last release; zero before the first
		generation = make(chan struct{})
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range lockers * perEach {
		wg.Go(func() {
			l := ls[i%lockers]
			for {
				g, err := l.Acquire(ctx, "res")
				if err != nil {
					return // cancelled: done
				}
				now := time.Now()
				mu.Lock()
				if !releasedAt.IsZero() {
					lat = append(lat, now.Sub(releasedAt))
				}
				done := len(lat) >= b.N
				next := make(chan struct{})
				close(generation)
				generation = next
				mu.Unlock()
				if done {
					cancel()
				}
				time.Sleep(200 * time.Microsecond) // the critical section
				mu.Lock()
				releasedAt = time.Now()
				mu.Unlock()
				if err := g.Release(context.Background()); err != nil {
					b.Error(err)
				}
				select { // wait for another candidate to take it before contending again
				case <-next:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(ms(quantile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(quantile(lat, 0.90)), "p90-ms")
	b.ReportMetric(ms(quantile(lat, 0.99)), "p99-ms")
	b.ReportMetric(float64(len(lat)), "handovers")
}
