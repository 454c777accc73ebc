package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/chaos/resource"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/singleton"
)

// singleton returns the workload of singleton mode: while the candidate sup
// leads, it serves the lease's requests with a handler de-duplicated by
// request ID (singleton.Dedupe over a KV bucket shared by the fleet) that
// applies each request with one write through the fence, carrying the
// request's tenure and ID.
func (e *env) singleton(ctx context.Context, sup, owner string) (actors.Workload, error) {
	js, err := jetstream.New(e.nc)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, e.o.ids)
	if err != nil {
		return nil, fmt.Errorf("request-ID bucket %s: %w", e.o.ids, err)
	}
	ids := &idStore{inner: singleton.NewKVIDStore(kv), log: e.log, proc: e.o.proc}
	apply := func(ctx context.Context, req *singleton.Request) ([]byte, error) {
		err := e.fence.Write(ctx, resource.Offer{Lease: e.o.leaseID, Proc: e.o.proc, Owner: owner,
			Tenure: req.Tenure, Request: req.ID})
		if err != nil {
			return nil, err
		}
		return []byte("applied"), nil
	}
	h := singleton.Dedupe(ids, apply)
	cfg := singleton.ServeConfig{DrainTimeout: e.o.ttl / 20} // within the stop timeout (TTL/10)
	return actors.WorkloadFunc(func(ctx context.Context, token lease.Token) error {
		term, _ := actors.TermFrom(ctx)
		w := record.Workload{Proc: e.o.proc, Lease: e.o.leaseID, Owner: owner, Term: term.ID(), Sup: sup,
			Token: uint64(token), Start: record.Now()}
		e.log.Start(w)
		defer func() {
			w.Stop = record.Now()
			e.log.Stop(w)
		}()
		return singleton.Serve(ctx, e.nc, cfg, h)
	}), nil
}

// idStore records every call of a singleton.IDStore in the holder's log.
type idStore struct {
	inner singleton.IDStore
	log   *record.Log
	proc  string
}

var _ singleton.IDStore = (*idStore)(nil)

// Get implements singleton.IDStore.
func (s *idStore) Get(ctx context.Context, id string) ([]byte, bool, error) {
	op := record.IDOp{Proc: s.proc, Request: id, Type: "get", Call: record.Now()}
	n := s.log.IDCall(op)
	reply, ok, err := s.inner.Get(ctx, id)
	op.Return, op.Found, op.Err = record.Now(), ok, errString(err)
	s.log.IDReturn(n, op)
	return reply, ok, err
}

// Put implements singleton.IDStore.
func (s *idStore) Put(ctx context.Context, id string, reply []byte) error {
	op := record.IDOp{Proc: s.proc, Request: id, Type: "put", Call: record.Now()}
	n := s.log.IDCall(op)
	err := s.inner.Put(ctx, id, reply)
	op.Return, op.Err = record.Now(), errString(err)
	s.log.IDReturn(n, op)
	return err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
