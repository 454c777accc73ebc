package main

import (
	"context"
	"time"

	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lock"
)

// lockLoop takes the lock (lock.Locker) again and again, runs the workload
// under each guard, and releases it, until ctx is done. It waits for the
// lock in Acquire, or with -try makes one TryAcquire every -standby.
func (e *env) lockLoop(ctx context.Context, sup string) error {
	o := e.o
	cfg := lease.Config{TTL: o.ttl} // the lock's safety margin is the lease default, TTL/10
	locker, err := lock.New(record.NewStore(e.store, e.log, o.proc, cfg, nil), lock.Config{
		OwnerID: o.owner, TTL: o.ttl, RenewInterval: o.renew, RetryInterval: o.standby,
		Session: o.session,
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
		take, pause := locker.Acquire, 10*time.Millisecond
		if o.try {
			take, pause = locker.TryAcquire, o.standby
		}
		g, err := take(ctx, o.leaseID)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			time.Sleep(pause)
			continue
		}
		wctx, cancel := context.WithCancel(g.Context())
		stop := context.AfterFunc(ctx, cancel)
		// The guard's token is checked on the clock before each write.
		tenure := func() (lease.Tenure, error) {
			if _, err := g.Token(); err != nil {
				return lease.Tenure{}, err
			}
			return g.Tenure(), nil
		}
		_ = e.workWith(wctx, o.leaseID, sup, g.OwnerID(), tenure)
		stop()
		cancel()
		rctx, cancel := context.WithTimeout(context.Background(), o.ttl)
		_ = g.Release(rctx)
		cancel()
	}
	return nil
}
