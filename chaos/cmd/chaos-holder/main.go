// Command chaos-holder is a lease holder for the chaos suite: one or more
// candidates (actors.LeaseSupervisor, or lock.Locker with -mode lock, over
// natsstore) competing for one lease
// through a NATS URL (the suite's proxy), whose workload writes through the
// fenced resource. Every store operation and every workload start and stop
// is appended to a log on the reference clock (package record).
//
//	chaos-holder -nats nats://127.0.0.1:4300 -fence http://127.0.0.1:4301 \
//	    -lease chaos.kill -proc h1 -log /tmp/h1.log
//
// It prints "ready" once its store is open and its candidates run, and
// shuts down gracefully (workloads stopped, leases released) on SIGTERM.
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

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/chaos/resource"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lock"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/supervision"
)

type options struct {
	natsURL, fenceURL, leaseID, proc, logPath, bucket, mode string
	ttl, renew, standby, writeEvery, hold                   time.Duration
	candidates                                              int
	session                                                 bool
}

func main() {
	var o options
	flag.StringVar(&o.natsURL, "nats", "nats://127.0.0.1:4222", "NATS URL (the suite's proxy)")
	flag.StringVar(&o.fenceURL, "fence", "", "base URL of the fenced resource (required)")
	flag.StringVar(&o.leaseID, "lease", "chaos", "lease ID")
	flag.StringVar(&o.proc, "proc", "holder", "process name in the records")
	flag.StringVar(&o.logPath, "log", "", "record log (required)")
	flag.StringVar(&o.bucket, "bucket", natsstore.DefaultBucket, "KV bucket")
	flag.DurationVar(&o.ttl, "ttl", time.Second, "lease TTL")
	flag.DurationVar(&o.renew, "renew", 250*time.Millisecond, "renew interval")
	flag.DurationVar(&o.standby, "standby", 500*time.Millisecond, "standby retry interval")
	flag.DurationVar(&o.writeEvery, "write-every", 10*time.Millisecond, "period of the workload's fenced writes")
	flag.DurationVar(&o.hold, "hold", 0, "the workload returns after leading this long (a graceful handover); 0 holds on")
	flag.StringVar(&o.mode, "mode", "supervisor", "supervisor (actors.LeaseSupervisor) or lock (lock.Locker)")
	flag.IntVar(&o.candidates, "candidates", 1, "candidates in this process, each with its own owner ID")
	flag.BoolVar(&o.session, "session", false, "with -mode lock: hold the lock under the Locker's session (lock.Config.Session)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-holder:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.fenceURL == "" || o.logPath == "" {
		return errors.New("-fence and -log are required")
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
	for {
		store, err = natsstore.NewConn(openCtx, nc, natsstore.Config{Bucket: o.bucket, Timeout: o.ttl / 2, MaxTTL: o.ttl})
		if err == nil || openCtx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer store.Close()

	var wg sync.WaitGroup
	errs := make(chan error, o.candidates)
	if o.mode == "lock" {
		for range o.candidates {
			wg.Go(func() {
				if err := lockLoop(ctx, o, store, log, fence); err != nil {
					errs <- err
				}
			})
		}
	}
	for range o.candidates * boolInt(o.mode == "supervisor") {
		cfg := lease.Config{
			LeaseID: o.leaseID, OwnerID: lease.NewOwnerID(), TTL: o.ttl,
			RenewInterval: o.renew, StandbyRetryInterval: o.standby,
		}
		sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
			Lease:    cfg,
			Store:    record.NewStore(store, log, o.proc, cfg, nil),
			Workload: actors.WorkloadFunc(workload(o, cfg.OwnerID, nil, log, fence)),
			Restart:  actors.RestartPolicy{Backoff: supervision.Backoff{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond}, Intensity: supervision.Unlimited},
		})
		if err != nil {
			return err
		}
		wg.Go(func() {
			if err := sup.Run(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", cfg.OwnerID, err)
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

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lockLoop takes the lock (lock.Locker) again and again, runs the workload
// under each guard, and releases it, until ctx is done.
func lockLoop(ctx context.Context, o options, store *natsstore.Store, log *record.Log, fence *resource.Client) error {
	cfg := lease.Config{TTL: o.ttl} // the lock's safety margin is the lease default, TTL/10
	locker, err := lock.New(record.NewStore(store, log, o.proc, cfg, nil), lock.Config{
		TTL: o.ttl, RenewInterval: o.renew, RetryInterval: o.standby, Session: o.session,
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = locker.Close(cctx)
	}()
	for ctx.Err() == nil {
		g, err := locker.Acquire(ctx, o.leaseID)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if token, err := g.Token(); err == nil {
			wctx, cancel := context.WithCancel(g.Context())
			stop := context.AfterFunc(ctx, cancel)
			valid := func() error { _, err := g.Token(); return err } // checked on the clock
			_ = workload(o, g.OwnerID(), valid, log, fence)(wctx, token)
			stop()
			cancel()
		}
		rctx, cancel := context.WithTimeout(context.Background(), o.ttl)
		_ = g.Release(rctx)
		cancel()
	}
	return nil
}

// writeTimeout bounds one fenced write. A write is not abandoned when the
// workload is told to stop (its context is not the lease's): a request
// already sent would land after the release, which the checker flags. A
// write slower than the stop timeout (TTL/10) still can, and is flagged.
const writeTimeout = time.Second

// workload writes through the fence every o.writeEvery while the lease is
// held, and returns after o.hold if set, which hands the lease over. valid,
// when not nil, is asked right before each write whether the lease is still
// valid by the clock: a lock.Guard's Token, or a LeaseSupervisor
// workload's actors.TokenFrom; when nil, the workload reads
// actors.TokenFrom(ctx).
func workload(o options, owner string, valid func() error, log *record.Log, fence *resource.Client) func(context.Context, lease.Token) error {
	return func(ctx context.Context, token lease.Token) error {
		w := record.Workload{Proc: o.proc, Lease: o.leaseID, Owner: owner, Token: uint64(token), Start: record.Now()}
		log.Start(w)
		defer func() {
			w.Stop = record.Now()
			log.Stop(w)
		}()
		var done <-chan time.Time
		if o.hold > 0 {
			t := time.NewTimer(o.hold)
			defer t.Stop()
			done = t.C
		}
		tick := time.NewTicker(o.writeEvery)
		defer tick.Stop()
		check := valid // per term: valid is shared by every term of this holder
		if check == nil {
			check = func() error { _, err := actors.TokenFrom(ctx); return err } // checked on the clock
		}
		for {
			if ctx.Err() != nil || check() != nil {
				return nil
			}
			wctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
			_ = fence.Write(wctx, o.leaseID, o.proc, owner, uint64(token))
			cancel()
			select {
			case <-ctx.Done():
				return nil
			case <-done:
				return nil
			case <-tick.C:
			}
		}
	}
}
