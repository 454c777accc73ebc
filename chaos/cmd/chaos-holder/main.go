// Command chaos-holder is a lease holder for the chaos suite: one or more
// candidates competing for one lease over natsstore, through a NATS URL (the
// suite's proxy, or the nodes of a cluster), whose workload writes through
// the fenced resource with its tenure (token and term). Every store
// operation and every workload start and stop is appended to a log on the
// reference clock (package record).
//
//	chaos-holder -nats nats://127.0.0.1:4300 -fence http://127.0.0.1:4301 \
//	    -lease chaos.kill -proc h1 -log /tmp/h1.log
//
// Modes (-mode):
//
//   - supervisor: an actors.LeaseSupervisor run with Run, whose function
//     workload writes every -write-every;
//   - restart: the LeaseSupervisor is a child of a supervision tree (one for
//     all) that restarts it on SIGUSR2;
//   - tree: the workload is a supervision tree (actors.WorkloadTree) whose
//     child writes, with a Shutdown of -shutdown;
//   - singleton: the workload serves requests (package singleton) with a
//     handler, de-duplicated by request ID in the KV bucket -ids, that
//     applies each request with one fenced write carrying its ID;
//   - lock: lock.Locker guards, taken and released again and again (with
//     Acquire, or with -try by TryAcquire every -standby);
//   - shard: a member of a sharded fleet (shard.Host) named by -lease, with
//     -shards shards, whose workload for each shard it runs writes every
//     -write-every under the shard's lease ID (shard.ShardKey).
//
// With -stubborn, a workload (the tree's child in tree mode) ignores its
// cancellation for that long; with -late-write it then makes one last write
// with the tenure it read first, unchecked, as a write prepared before a
// stall would land.
//
// It prints "ready" once its store is open and its candidates run. SIGUSR1
// makes every supervisor resign (LeaseSupervisor.Resign, holding off
// -resign-hold); SIGUSR2 restarts the supervisors in restart mode; SIGTERM
// shuts down gracefully (workloads stopped, leases released).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/chaos/resource"
	"github.com/asterforge/aster/natsstore"
)

type options struct {
	natsURL, fenceURL, leaseID, proc, logPath, bucket, mode, owner, ids string
	ttl, renew, standby, writeEvery, hold, maxTTL, stubborn, shutdown   time.Duration
	resignHold, isolation                                               time.Duration
	candidates, replicas, shards                                        int
	lateWrite, session, try                                             bool
}

func main() {
	var o options
	flag.StringVar(&o.natsURL, "nats", "nats://127.0.0.1:4222", "NATS URL, or comma-separated URLs of a cluster's nodes")
	flag.StringVar(&o.fenceURL, "fence", "", "base URL of the fenced resource (required)")
	flag.StringVar(&o.leaseID, "lease", "chaos", "lease ID")
	flag.StringVar(&o.proc, "proc", "holder", "process name in the records")
	flag.StringVar(&o.logPath, "log", "", "record log (required)")
	flag.StringVar(&o.bucket, "bucket", natsstore.DefaultBucket, "KV bucket")
	flag.DurationVar(&o.ttl, "ttl", time.Second, "lease TTL")
	flag.DurationVar(&o.renew, "renew", 250*time.Millisecond, "renew interval (0: the lease default, TTL/3)")
	flag.DurationVar(&o.standby, "standby", 500*time.Millisecond, "standby retry interval")
	flag.DurationVar(&o.writeEvery, "write-every", 10*time.Millisecond, "period of the workload's fenced writes")
	flag.DurationVar(&o.hold, "hold", 0, "the workload returns after leading this long (a graceful handover); 0 holds on")
	flag.StringVar(&o.mode, "mode", "supervisor", "supervisor, restart, tree, singleton, lock or shard")
	flag.IntVar(&o.shards, "shards", 6, "shard mode: the number of shards (s/0 … s/<n-1>)")
	flag.IntVar(&o.candidates, "candidates", 1, "candidates in this process")
	flag.StringVar(&o.owner, "owner", "", "owner ID of every candidate (\"\": a fresh one each)")
	flag.DurationVar(&o.maxTTL, "max-ttl", 0, "the bucket's maximum lease TTL (0: -ttl)")
	flag.IntVar(&o.replicas, "replicas", 1, "replicas of the bucket, if this holder creates it")
	flag.DurationVar(&o.stubborn, "stubborn", 0, "the workload ignores its cancellation this long")
	flag.DurationVar(&o.shutdown, "shutdown", 50*time.Millisecond, "tree mode: the writing child's Shutdown")
	flag.DurationVar(&o.resignHold, "resign-hold", time.Second, "how long a supervisor holds off after SIGUSR1")
	flag.StringVar(&o.ids, "ids", "chaos_ids", "singleton mode: the KV bucket of request IDs")
	flag.BoolVar(&o.session, "session", false, "with -mode lock: hold the lock under the Locker's session (lock.Config.Session)")
	flag.BoolVar(&o.try, "try", false, "with -mode lock: take the lock with TryAcquire every -standby instead of waiting in Acquire")
	flag.BoolVar(&o.lateWrite, "late-write", false, "a stubborn workload makes one unchecked write when it stops")
	flag.DurationVar(&o.isolation, "isolation", 0, "natsstore.Config.IsolationTimeout (0: never, as for NewConn)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-holder:", err)
		os.Exit(1)
	}
}

// env is what every candidate of the process shares.
type env struct {
	o     options
	nc    *nats.Conn
	store *natsstore.Store
	log   *record.Log
	fence *resource.Client
	// resign and restart are closed and replaced at each SIGUSR1 and
	// SIGUSR2.
	mu              sync.Mutex
	resign, restart chan struct{}
}

func (e *env) signals() (resign, restart <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.resign, e.restart
}

func run(ctx context.Context, o options) error {
	if o.fenceURL == "" || o.logPath == "" {
		return errors.New("-fence and -log are required")
	}
	if o.maxTTL == 0 {
		o.maxTTL = o.ttl
	}
	log, err := record.Create(o.logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	fence := resource.NewClient(o.fenceURL)
	defer fence.Close()

	nc, err := nats.Connect(o.natsURL, nats.Name(o.proc), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.ReconnectJitter(20*time.Millisecond, 0),
		nats.Timeout(time.Second), nats.RetryOnFailedConnect(true))
	if err != nil {
		return err
	}
	defer nc.Close()
	openCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var store *natsstore.Store
	cfg := natsstore.Config{Bucket: o.bucket, Timeout: o.ttl / 2, MaxTTL: o.maxTTL, Replicas: o.replicas,
		IsolationTimeout: o.isolation,
		OnEvent:          func(ev natsstore.Event) { fmt.Printf("store event: %T: %v\n", ev, ev) }}
	// Each attempt has a deadline of its own: an attempt can wait for its
	// whole context on a stream that is still forming.
	for last := ""; ; {
		actx, cancel := context.WithTimeout(openCtx, 5*time.Second)
		start := time.Now()
		store, err = natsstore.NewConn(actx, nc, cfg)
		cancel()
		if err == nil || openCtx.Err() != nil {
			break
		}
		if err.Error() != last {
			last = err.Error()
			fmt.Printf("open store: retrying after %v: %s\n", time.Since(start).Round(time.Millisecond), last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer store.Close()

	e := &env{o: o, nc: nc, store: store, log: log, fence: fence,
		resign: make(chan struct{}), restart: make(chan struct{})}
	go e.relay(ctx)

	var wg sync.WaitGroup
	errs := make(chan error, o.candidates)
	for i := range o.candidates {
		c, err := e.candidate(ctx, i+1)
		if err != nil {
			return err
		}
		wg.Go(func() {
			if err := c(ctx); err != nil {
				errs <- err
			}
		})
	}
	fmt.Println("ready")
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(append(all, log.Err())...)
}

// relay turns SIGUSR1 and SIGUSR2 into closings of e.resign and e.restart.
func (e *env) relay(ctx context.Context) {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sig)
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-sig:
			e.mu.Lock()
			if s == syscall.SIGUSR1 {
				close(e.resign)
				e.resign = make(chan struct{})
			} else {
				close(e.restart)
				e.restart = make(chan struct{})
			}
			e.mu.Unlock()
		}
	}
}

// candidate returns the function that runs candidate i until ctx is done.
func (e *env) candidate(ctx context.Context, i int) (func(context.Context) error, error) {
	sup := fmt.Sprintf("%s/%d", e.o.proc, i)
	switch e.o.mode {
	case "lock":
		return func(ctx context.Context) error { return e.lockLoop(ctx, sup) }, nil
	case "shard":
		if i > 1 {
			return nil, errors.New("-mode shard runs one shard.Host per process: -candidates must be 1")
		}
		return e.shardHost, nil
	case "supervisor", "restart", "tree", "singleton":
		return e.supervisor(ctx, sup)
	}
	return nil, fmt.Errorf("unknown -mode %q", e.o.mode)
}
