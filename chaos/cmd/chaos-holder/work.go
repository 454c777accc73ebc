package main

import (
	"context"
	"time"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/chaos/resource"
	"github.com/asterforge/aster/lease"
)

// writeTimeout bounds one fenced write. A write is not abandoned when the
// workload is told to stop (its context is not the lease's): a request
// already sent would land after the release, which the checker flags. A
// write slower than the stop timeout (TTL/10) still can, and is flagged.
const writeTimeout = time.Second

// tenureOf is how a workload reads its tenure before each write: on the
// clock, failing once the lease is lost or its validity has passed.
type tenureOf func() (lease.Tenure, error)

// work is a workload of the candidate sup: it writes through the fence
// every o.writeEvery while tenure succeeds and ctx lasts, and returns
// after o.hold if set, which hands the lease over. With o.stubborn it then
// ignores its cancellation that long, and with o.lateWrite makes one last
// write with the tenure it read first, unchecked: a write prepared before a
// stall.
func (e *env) work(ctx context.Context, sup, owner string, term actors.Term) error {
	return e.workWith(ctx, e.o.leaseID, sup, owner, term.Tenure)
}

// workWith is work for the lease leaseID (a shard's, in shard mode), whose
// tenure is read with tenure.
func (e *env) workWith(ctx context.Context, leaseID, sup, owner string, tenure tenureOf) error {
	o := e.o
	first, err := tenure()
	if err != nil {
		return nil // the term ended before the workload started
	}
	w := record.Workload{Proc: o.proc, Lease: leaseID, Owner: owner, Term: first.Term, Sup: sup,
		Token: uint64(first.Token), Start: record.Now(), Stubborn: o.stubborn > 0}
	e.log.Start(w)
	defer func() {
		w.Stop = record.Now()
		e.log.Stop(w)
	}()
	var done <-chan time.Time
	if o.hold > 0 {
		t := time.NewTimer(o.hold)
		defer t.Stop()
		done = t.C
	}
	tick := time.NewTicker(o.writeEvery)
	defer tick.Stop()
loop:
	for {
		t, err := tenure() // checked on the clock, right before the write
		if ctx.Err() != nil || err != nil {
			break
		}
		e.write(leaseID, owner, t)
		select {
		case <-ctx.Done():
			break loop
		case <-done:
			return nil
		case <-tick.C:
		}
	}
	if o.stubborn > 0 {
		time.Sleep(o.stubborn) // deaf to ctx
		if o.lateWrite {
			e.write(leaseID, owner, first)
		}
	}
	return nil
}

// write offers one write of owner's tenure t of leaseID.
func (e *env) write(leaseID, owner string, t lease.Tenure) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	_ = e.fence.Write(ctx, resource.Offer{Lease: leaseID, Proc: e.o.proc, Owner: owner, Tenure: t})
}
