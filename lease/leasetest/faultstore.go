package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asterforge/aster/lease"
)

// Op names the Store operations a FaultStore can break. Ops combine as a
// bit set.
type Op uint8

// The operations of lease.Store and lease.Watcher.
const (
	OpAcquire Op = 1 << iota
	OpRenew
	OpRelease
	OpWatch
	// OpAll is every operation.
	OpAll = OpAcquire | OpRenew | OpRelease | OpWatch
)

func (o Op) String() string {
	switch o {
	case OpAcquire:
		return "acquire"
	case OpRenew:
		return "renew"
	case OpRelease:
		return "release"
	case OpWatch:
		return "watch"
	case OpAll:
		return "all"
	default:
		return fmt.Sprintf("ops(%#x)", uint8(o))
	}
}

// ErrInjected is wrapped by every error a FaultStore makes up, together with
// the lease error it stands for (lease.ErrUnavailable unless told
// otherwise).
var ErrInjected = errors.New("leasetest: injected fault")

// FaultStore wraps a lease.Store and breaks it on demand, for tests of the
// code that uses a store: failed calls, lost ownership, slow calls, and
// writes that land although the caller sees a timeout. It works inside a
// testing/synctest bubble (delays are timers). It is safe for concurrent
// use; a new FaultStore passes every call through.
//
// Faults are checked in this order on each call: FailAll, FailNext, Delay,
// DropAfterApply. Watch passes through when the inner store is a
// lease.Watcher, and otherwise fails with lease.ErrUnavailable, so that its
// users fall back to polling; SilenceWatch keeps a watch open but delivers
// nothing.
type FaultStore struct {
	inner lease.Store

	mu      sync.Mutex
	all     map[Op]error
	next    map[Op]*nextFault
	delay   map[Op]time.Duration
	drop    map[Op]int
	calls   map[Op]int
	silence bool
}

type nextFault struct {
	n   int
	err error
}

var (
	_ lease.Store   = (*FaultStore)(nil)
	_ lease.Watcher = (*FaultStore)(nil)
)

// NewFaultStore wraps inner.
func NewFaultStore(inner lease.Store) *FaultStore {
	return &FaultStore{
		inner: inner,
		all:   make(map[Op]error),
		next:  make(map[Op]*nextFault),
		delay: make(map[Op]time.Duration),
		drop:  make(map[Op]int),
		calls: make(map[Op]int),
	}
}

// Inner returns the wrapped store.
func (s *FaultStore) Inner() lease.Store { return s.inner }

// each calls f for every single operation in ops.
func each(ops Op, f func(Op)) {
	for o := OpAcquire; o <= OpWatch; o <<= 1 {
		if ops&o != 0 {
			f(o)
		}
	}
}

// FailNext makes the next n calls of each operation in ops fail with err
// (lease.ErrUnavailable when nil) without reaching the inner store.
func (s *FaultStore) FailNext(ops Op, n int, err error) {
	if err == nil {
		err = lease.ErrUnavailable
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	each(ops, func(o Op) { s.next[o] = &nextFault{n: n, err: err} })
}

// FailRenewals makes the next n renewals fail with lease.ErrUnavailable.
func (s *FaultStore) FailRenewals(n int) { s.FailNext(OpRenew, n, nil) }

// LoseRenewals makes the next n renewals answer lease.ErrLost, as if
// another owner had taken the lease.
func (s *FaultStore) LoseRenewals(n int) { s.FailNext(OpRenew, n, lease.ErrLost) }

// FailAll makes every call of each operation in ops fail with err until
// it is called again with a nil err. An err of lease.ErrUnavailable models
// a store that cannot be reached.
func (s *FaultStore) FailAll(ops Op, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	each(ops, func(o Op) {
		if err == nil {
			delete(s.all, o)
		} else {
			s.all[o] = err
		}
	})
}

// Delay makes every call of each operation in ops wait d before it reaches
// the inner store (0 removes the delay). A call whose context ends first
// fails with lease.ErrUnavailable wrapping the context's error, and does not
// reach the store.
func (s *FaultStore) Delay(ops Op, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	each(ops, func(o Op) {
		if d <= 0 {
			delete(s.delay, o)
		} else {
			s.delay[o] = d
		}
	})
}

// DropAfterApply makes the next n calls of each operation in ops reach the
// inner store (with a context that does not end) and then fail with
// lease.ErrUnavailable wrapping context.DeadlineExceeded: the write lands
// but the caller sees a timeout.
func (s *FaultStore) DropAfterApply(ops Op, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	each(ops, func(o Op) { s.drop[o] = n })
}

// SilenceWatch makes watches opened from now on deliver nothing (they
// stay open until their context ends), as a watch on a lost connection.
func (s *FaultStore) SilenceWatch(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.silence = on
}

// Heal removes every fault. Call counts are kept.
func (s *FaultStore) Heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.all)
	clear(s.next)
	clear(s.delay)
	clear(s.drop)
	s.silence = false
}

// Calls returns how many calls of the operations in ops were made, faulty
// or not.
func (s *FaultStore) Calls(ops Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	each(ops, func(o Op) { n += s.calls[o] })
	return n
}

// fault is what happens to one call: an error returned without reaching
// the store, a delay, and whether the answer is dropped.
type fault struct {
	err   error
	delay time.Duration
	drop  bool
}

// plan decides the fault of one call of op.
func (s *FaultStore) plan(op Op) fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	if e, ok := s.all[op]; ok {
		return fault{err: injected(op, e)}
	}
	if f := s.next[op]; f != nil && f.n > 0 {
		f.n--
		return fault{err: injected(op, f.err)}
	}
	f := fault{delay: s.delay[op]}
	if n := s.drop[op]; n > 0 {
		s.drop[op] = n - 1
		f.drop = true
	}
	return f
}

func injected(op Op, err error) error {
	return fmt.Errorf("%w (%s): %w", ErrInjected, op, err)
}

// before applies the planned error and delay of one call of op.
func (s *FaultStore) before(ctx context.Context, op Op) (context.Context, bool, error) {
	f := s.plan(op)
	if f.err != nil {
		return ctx, false, f.err
	}
	if delay := f.delay; delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx, false, fmt.Errorf("%w (%s delayed %v): %w: %w",
				ErrInjected, op, delay, lease.ErrUnavailable, context.Cause(ctx))
		}
	}
	if f.drop {
		return context.WithoutCancel(ctx), true, nil
	}
	return ctx, false, nil
}

func dropped(op Op) error {
	return fmt.Errorf("%w (%s applied, answer dropped): %w: %w",
		ErrInjected, op, lease.ErrUnavailable, context.DeadlineExceeded)
}

// Acquire implements lease.Store.
func (s *FaultStore) Acquire(ctx context.Context, c lease.Claim) (lease.Acquisition, error) {
	ctx, drop, err := s.before(ctx, OpAcquire)
	if err != nil {
		return lease.Acquisition{}, err
	}
	a, err := s.inner.Acquire(ctx, c)
	if drop && err == nil {
		return lease.Acquisition{}, dropped(OpAcquire)
	}
	return a, err
}

// Renew implements lease.Store.
func (s *FaultStore) Renew(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	ctx, drop, err := s.before(ctx, OpRenew)
	if err != nil {
		return l, err
	}
	got, err := s.inner.Renew(ctx, l)
	if drop && err == nil {
		return l, dropped(OpRenew)
	}
	return got, err
}

// Release implements lease.Store.
func (s *FaultStore) Release(ctx context.Context, l lease.Lease) error {
	ctx, drop, err := s.before(ctx, OpRelease)
	if err != nil {
		return err
	}
	err = s.inner.Release(ctx, l)
	if drop && err == nil {
		return dropped(OpRelease)
	}
	return err
}

// Watch implements lease.Watcher.
func (s *FaultStore) Watch(ctx context.Context, leaseID string) (<-chan lease.Event, error) {
	ctx, _, err := s.before(ctx, OpWatch)
	if err != nil {
		return nil, err
	}
	w, ok := s.inner.(lease.Watcher)
	if !ok {
		return nil, fmt.Errorf("%w: the inner store %T cannot watch", lease.ErrUnavailable, s.inner)
	}
	s.mu.Lock()
	silent := s.silence
	s.mu.Unlock()
	if !silent {
		return w.Watch(ctx, leaseID)
	}
	if err := lease.ValidateLeaseID(leaseID); err != nil {
		return nil, err
	}
	ch := make(chan lease.Event)
	context.AfterFunc(ctx, func() { close(ch) })
	return ch, nil
}
