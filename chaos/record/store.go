package record

import (
	"context"
	"errors"
	"sync"

	"github.com/asterforge/aster/lease"
)

// Store is a lease.Store (and lease.Watcher, when the inner store is one)
// that records every operation in a Log before it leaves and after it
// returns, on a reference clock, with the validity the caller may claim
// after each success.
type Store struct {
	inner  lease.Store
	log    *Log
	proc   string
	margin func(ttl int64) int64
	now    func() int64

	mu    sync.Mutex
	valid map[string]int64 // the last validity claimed for each lease, for leases under it
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Watcher = (*Store)(nil)
)

// NewStore records the operations of proc on inner in log. cfg gives the
// safety margin with which a claimed validity is computed from a TTL:
// ValidUntil = call + TTL - SafetyMargin, as lease.Config.ValidUntil says.
// now reads the reference clock; nil means Now.
func NewStore(inner lease.Store, log *Log, proc string, cfg lease.Config, now func() int64) *Store {
	if now == nil {
		now = Now
	}
	margin := int64(cfg.EffectiveSafetyMargin())
	return &Store{inner: inner, log: log, proc: proc, now: now,
		margin: func(ttl int64) int64 { return ttl - margin }, valid: map[string]int64{}}
}

// Acquire implements lease.Store.
func (s *Store) Acquire(ctx context.Context, c lease.Claim) (lease.Acquisition, error) {
	op := Op{Proc: s.proc, Lease: c.LeaseID, Owner: c.OwnerID, Term: c.Term, Type: OpAcquire, TTL: c.TTL, Call: s.now()}
	id := s.log.Call(op)
	acq, err := s.inner.Acquire(ctx, c)
	op.Return, op.Result, op.Err = s.now(), result(err), errString(err)
	switch {
	case err == nil && acq.Acquired:
		op.Result, op.OutToken, op.OutRev = ResultOK, uint64(acq.Lease.Token), acq.Lease.Revision
		op.ValidUntil = op.Call + s.margin(int64(c.TTL))
		s.claimed(c.LeaseID, op.ValidUntil)
	case err == nil:
		op.Result, op.OutOwner, op.OutTerm = ResultStandby, acq.Holder.OwnerID, acq.Holder.Term
	}
	s.log.Return(id, op)
	return acq, err
}

// Renew implements lease.Store.
func (s *Store) Renew(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	op := Op{Proc: s.proc, Lease: l.ID, Owner: l.OwnerID, Term: l.Term, Type: OpRenew, TTL: l.TTL,
		Token: uint64(l.Token), Rev: l.Revision, Call: s.now()}
	id := s.log.Call(op)
	out, err := s.inner.Renew(ctx, l)
	op.Return, op.Result, op.Err = s.now(), result(err), errString(err)
	if err == nil {
		op.OutRev, op.ValidUntil = out.Revision, op.Call+s.margin(int64(out.TTL))
		s.claimed(l.ID, op.ValidUntil)
	}
	s.log.Return(id, op)
	return out, err
}

// Release implements lease.Store.
func (s *Store) Release(ctx context.Context, l lease.Lease) error {
	op := Op{Proc: s.proc, Lease: l.ID, Owner: l.OwnerID, Term: l.Term, Type: OpRelease, TTL: l.TTL,
		Token: uint64(l.Token), Rev: l.Revision, Call: s.now()}
	id := s.log.Call(op)
	err := s.inner.Release(ctx, l)
	op.Return, op.Result, op.Err = s.now(), result(err), errString(err)
	s.log.Return(id, op)
	return err
}

// Watch implements lease.Watcher when the inner store does; otherwise it
// returns a channel that stays silent until ctx is done.
func (s *Store) Watch(ctx context.Context, leaseID string) (<-chan lease.Event, error) {
	if w, ok := s.inner.(lease.Watcher); ok {
		return w.Watch(ctx, leaseID)
	}
	ch := make(chan lease.Event)
	context.AfterFunc(ctx, func() { close(ch) })
	return ch, nil
}

// result classifies err: nil is ResultOK, the lease package's definite
// errors are themselves, and anything else leaves the outcome unknown.
func result(err error) Result {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, lease.ErrLost):
		return ResultLost
	case errors.Is(err, lease.ErrCorrupt):
		return ResultCorrupt
	case errors.Is(err, lease.ErrInvalid):
		return ResultInvalid
	}
	return ResultUnknown
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
