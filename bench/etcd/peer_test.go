package peer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPeer runs every measurement on each system in turn: Aster's
// lock under a session (lock.Config.Session, as etcd's Mutex holds its
// keys under a session) on nats-server with the default sync_interval
// (aster) and with sync_interval always (aster-sync), etcd's
// concurrency.Mutex with one session per client (etcd), and, where they
// differ, Aster's lock with a lease of its own per lock (aster-lease) and
// etcd with a session per lock (etcd-session-per-lock). Every client has
// a connection of its own; the servers run in processes of their own.
//
//   - handover-waiting: a standby that has waited 250 ms takes the lock
//     from a holder that releases it: release call to the standby's Lock
//     returning (p50-ms, p99-ms).
//   - handover-fresh: the same, with the release 1 ms after the standby
//     started waiting.
//   - crash: the holder's connection is closed at a random moment, with
//     nothing released (TTL 2 s for all): crash to the standby's Lock
//     returning.
//   - uncontended: Lock + Unlock of a free lock (p50-ms, p99-ms);
//     uncontended-try: TryLock + Unlock.
//   - life: a short-lived lock client's whole life on a connection already
//     open: Aster's lock.New, TryAcquire, Release and Close (a Locker of
//     the default Config, a lease per lock: aster-lease; under a session:
//     aster), etcd's NewSession, TryLock, Unlock and the session's Close
//     (with fsync: etcd; without: etcd-nosync) (p50-ms, p99-ms).
//   - contended: 8 clients lock and unlock one lock for 3 s: locks/s.
//   - held-10000: one client holds 10,000 locks at a TTL of 30 s for 20 s,
//     on a server started for the measurement, after one lock taken and
//     released (what a client sets up once is not counted per lock): client-cores and
//     server-cores (CPU seconds per second), client-B/lock (the client's
//     live heap per lock after GC) and server-B/lock (the server's
//     resident memory per lock).
func BenchmarkPeer(b *testing.B) {
	main := []system{asterSession, asterSyncSession, etcdShared}
	withLease := append(slices.Clone(main), asterLease)
	for _, m := range []struct {
		name    string
		systems []system
		run     func(b *testing.B, sys system)
	}{
		{"handover-waiting", withLease, func(b *testing.B, sys system) { handover(b, sys, 250*time.Millisecond, 30) }},
		{"handover-fresh", main, func(b *testing.B, sys system) { handover(b, sys, time.Millisecond, 30) }},
		{"crash", main, func(b *testing.B, sys system) { crash(b, sys, 2*time.Second, 8) }},
		{"uncontended", withLease, func(b *testing.B, sys system) { uncontended(b, sys, false, 300) }},
		{"uncontended-try", withLease, func(b *testing.B, sys system) { uncontended(b, sys, true, 300) }},
		{"life", []system{asterLease, asterSession, etcdShared, etcdNoSyncShared}, func(b *testing.B, sys system) { life(b, sys, 300) }},
		{"contended", main, func(b *testing.B, sys system) { contended(b, sys, 8, 3*time.Second) }},
		{"held-10000", append(withLease, etcdPerLock), func(b *testing.B, sys system) { held(b, sys, 10_000, 20*time.Second) }},
	} {
		for _, sys := range m.systems {
			b.Run(m.name+"/"+sys.String(), func(b *testing.B) {
				for range b.N {
					m.run(b, sys)
				}
			})
		}
	}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(int(p*float64(len(lat))), len(lat)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat)), "samples")
}

func ctxFor(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// handover: a standby waits for wait, then the holder releases.
func handover(b *testing.B, sys system, wait time.Duration, n int) {
	holder, standby := newClient(b, sys, 30*time.Second), newClient(b, sys, 30*time.Second)
	defer holder.close()
	defer standby.close()
	key := fmt.Sprintf("handover.%d", rand.Uint64())
	var lat []time.Duration
	for range n {
		ctx, cancel := ctxFor(time.Minute)
		unlock, err := holder.lock(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		var sUnlock func(context.Context) error
		go func() {
			u, err := standby.lock(ctx, key)
			if err != nil {
				b.Error(err)
			}
			sUnlock = u
			got <- time.Now()
		}()
		time.Sleep(wait)
		released := time.Now()
		if err := unlock(ctx); err != nil {
			b.Fatal(err)
		}
		at := <-got
		if sUnlock == nil {
			b.FailNow()
		}
		lat = append(lat, at.Sub(released))
		if err := sUnlock(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	reportLatency(b, lat)
}

// crash: the holder's connection is closed at a random moment.
func crash(b *testing.B, sys system, ttl time.Duration, n int) {
	standby := newClient(b, sys, ttl)
	defer standby.close()
	key := fmt.Sprintf("crash.%d", rand.Uint64())
	var lat []time.Duration
	for range n {
		holder := newClient(b, sys, ttl)
		ctx, cancel := ctxFor(time.Minute)
		if _, err := holder.lock(ctx, key); err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		var sUnlock func(context.Context) error
		go func() {
			u, err := standby.lock(ctx, key)
			if err != nil {
				b.Error(err)
			}
			sUnlock = u
			got <- time.Now()
		}()
		time.Sleep(time.Duration(rand.Int64N(int64(ttl))))
		crashed := time.Now()
		holder.crash()
		at := <-got
		if sUnlock == nil {
			b.FailNow()
		}
		lat = append(lat, at.Sub(crashed))
		if err := sUnlock(ctx); err != nil {
			b.Fatal(err)
		}
		holder.close()
		cancel()
	}
	reportLatency(b, lat)
	b.ReportMetric(ttl.Seconds(), "ttl-s")
}

// uncontended: Lock (or TryLock) and Unlock of a free lock.
func uncontended(b *testing.B, sys system, try bool, n int) {
	c := newClient(b, sys, 30*time.Second)
	defer c.close()
	take := c.lock
	if try {
		take = c.tryLock
	}
	key := fmt.Sprintf("uncontended.%d", rand.Uint64())
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	var lat []time.Duration
	for i := range n + 10 {
		t0 := time.Now()
		unlock, err := take(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := unlock(ctx); err != nil {
			b.Fatal(err)
		}
		if i >= 10 { // the first cycles warm up (a session is opened)
			lat = append(lat, time.Since(t0))
		}
	}
	reportLatency(b, lat)
}

// life: a short-lived lock client's whole life, n times.
func life(b *testing.B, sys system, n int) {
	c := newClient(b, sys, 30*time.Second)
	defer c.close()
	key := fmt.Sprintf("life.%d", rand.Uint64())
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	var lat []time.Duration
	for i := range n + 10 {
		t0 := time.Now()
		if err := c.life(ctx, key); err != nil {
			b.Fatal(err)
		}
		if i >= 10 { // the first lives warm up
			lat = append(lat, time.Since(t0))
		}
	}
	reportLatency(b, lat)
}

// contended: clients lock and unlock one lock for d.
func contended(b *testing.B, sys system, clients int, d time.Duration) {
	cs := make([]client, clients)
	for i := range cs {
		cs[i] = newClient(b, sys, 30*time.Second)
	}
	defer func() {
		for _, c := range cs {
			c.close()
		}
	}()
	key := fmt.Sprintf("contended.%d", rand.Uint64())
	ctx, cancel := ctxFor(d)
	defer cancel()
	var locks atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range cs {
		wg.Go(func() {
			for ctx.Err() == nil {
				unlock, err := c.lock(ctx, key)
				if err != nil {
					if ctx.Err() == nil {
						b.Error(err)
					}
					return
				}
				locks.Add(1)
				rctx, rcancel := ctxFor(10 * time.Second)
				if err := unlock(rctx); err != nil {
					b.Error(err)
				}
				rcancel()
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(locks.Load())/time.Since(start).Seconds(), "locks/s")
}

// held: one client holds n locks; steady CPU and memory over observe.
func held(b *testing.B, sys system, n int, observe time.Duration) {
	// A server of its own, so that its memory and CPU are this
	// measurement's alone.
	srv := startServer(b, sys.server)
	defer srv.stop()
	time.Sleep(time.Second) // let it settle after its start
	c := newClientOn(b, srv, sys, 30*time.Second)
	pid := srv.cmd.Process.Pid
	ctx, cancel := ctxFor(10 * time.Minute)
	defer cancel()
	// One lock taken and released first, so that what a client sets up
	// once (a session, an actor system, a connection's buffers) is not
	// counted per lock.
	prefix := fmt.Sprintf("held.%d.", rand.Uint64())
	unlock, err := c.lock(ctx, prefix+"warm")
	if err == nil {
		err = unlock(ctx)
	}
	if err != nil {
		b.Fatal(err)
	}
	heap0 := liveHeap()
	rss0 := rss(pid)
	unlocks := make([]func(context.Context) error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				u, err := c.lock(ctx, fmt.Sprint(prefix, i))
				if err != nil {
					b.Error(err)
					return
				}
				unlocks[i] = u
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if b.Failed() {
		c.close()
		return
	}
	time.Sleep(time.Second) // let the acquisitions' garbage and in-flight work settle
	heap1 := liveHeap()
	rss1 := rss(pid)
	cc0, sc0, t0 := selfCPU(), cpu(pid), time.Now()
	time.Sleep(observe)
	cc, sc, wall := selfCPU()-cc0, cpu(pid)-sc0, time.Since(t0)
	b.ReportMetric(cc.Seconds()/wall.Seconds(), "client-cores")
	b.ReportMetric(sc.Seconds()/wall.Seconds(), "server-cores")
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/float64(n), "client-B/lock")
	b.ReportMetric(float64(rss1-rss0)/float64(n), "server-B/lock")
	b.ReportMetric(float64(took.Microseconds())/float64(n), "acquire-us/lock")
	// Release everything (bounded), so that the next system's server is idle.
	rctx, rcancel := ctxFor(5 * time.Minute)
	defer rcancel()
	var rnext atomic.Int64
	for range 16 {
		wg.Go(func() {
			for {
				i := int(rnext.Add(1) - 1)
				if i >= n {
					return
				}
				if err := unlocks[i](rctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	c.close()
	runtime.KeepAlive(unlocks)
}

// liveHeap returns the live heap after a full GC.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// selfCPU returns the CPU time this process (not its children) has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
