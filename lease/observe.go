package lease

import (
	"context"
	"fmt"
	"time"
)

// Observation is the state of a lease as an observer saw it: who holds it,
// or that it is free. It is what Observe reports.
type Observation struct {
	LeaseID string
	// Held reports that a term holds the lease; Holder says which. When
	// Held is true and Holder.OwnerID is "", the store could not read the
	// value under the key (it is not a lease: see ErrCorrupt), and nobody
	// can take the lease until an operator removes it.
	Held   bool
	Holder Holder
	// Revision is the store revision of the change, 0 if unknown.
	Revision uint64
	// Seen is when this process saw the change, on its own clock. It is
	// not when the holder acquired the lease.
	Seen time.Time
}

// Reader is an optional Watcher capability: reading who holds a lease
// without taking it. Leader and Observe use it, when the Watcher has it, for
// the lease's current state; natsstore.Store has it.
type Reader interface {
	// Read returns the lease's current state: Held, Holder and Revision as
	// in Observation (a value that is not a lease is held, by an empty
	// Holder), and Seen when it was read. A key that was never written is
	// free at revision 0.
	Read(ctx context.Context, leaseID string) (Observation, error)
}

// sameHolder reports whether o and p describe the same tenure: both free,
// or both held by the same term with the same token. Renewals do not
// change it.
func (o Observation) sameHolder(p Observation) bool {
	return o.Held == p.Held && o.Holder.OwnerID == p.Holder.OwnerID &&
		o.Holder.Term == p.Holder.Term && o.Holder.Token == p.Holder.Token
}

func observation(ev Event) Observation {
	o := Observation{LeaseID: ev.LeaseID, Revision: ev.Revision, Seen: time.Now()}
	if ev.Kind == EventHeld {
		o.Held, o.Holder = true, ev.Holder
	}
	return o
}

// Leader returns who holds leaseID, like etcd's Election.Leader. held is
// false when the lease is free. Any process can call it, candidate or not;
// it takes nothing.
//
// It reads the lease when w is also a Reader (natsstore.Store is), and
// otherwise takes the first event of w's watch, which must then report the
// lease's current state first; with a Watcher that reports only changes, it
// waits for the next change, bounded by ctx. A value under the key that is
// not a lease gives an error matching ErrCorrupt (and held). When ctx ends
// first, the error matches ctx.Err(); when the watch ends first (the store
// was closed), it matches ErrClosed.
func Leader(ctx context.Context, w Watcher, leaseID string) (h Holder, held bool, err error) {
	if err := ValidateLeaseID(leaseID); err != nil {
		return Holder{}, false, err
	}
	if w == nil {
		return Holder{}, false, invalid("Watcher", "must not be nil")
	}
	if r, ok := w.(Reader); ok {
		o, err := r.Read(ctx, leaseID)
		if err != nil {
			return Holder{}, false, fmt.Errorf("lease: leader of %s: %w", leaseID, err)
		}
		return leader(o)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := w.Watch(wctx, leaseID)
	if err != nil {
		return Holder{}, false, fmt.Errorf("lease: leader of %s: %w", leaseID, err)
	}
	select {
	case ev, ok := <-events:
		switch {
		case !ok && ctx.Err() != nil:
			return Holder{}, false, fmt.Errorf("lease: leader of %s: %w", leaseID, ctx.Err())
		case !ok:
			return Holder{}, false, fmt.Errorf("lease: leader of %s: the watch ended before it reported the lease: %w",
				leaseID, ErrClosed)
		}
		return leader(observation(ev))
	case <-ctx.Done():
		return Holder{}, false, fmt.Errorf("lease: leader of %s: %w", leaseID, ctx.Err())
	}
}

// leader is Leader's answer for o.
func leader(o Observation) (Holder, bool, error) {
	if o.Held && o.Holder.OwnerID == "" {
		return Holder{}, true, fmt.Errorf("lease: leader of %s: %w (revision %d)", o.LeaseID, ErrCorrupt, o.Revision)
	}
	return o.Holder, o.Held, nil
}

// Observe reports who holds leaseID, like etcd's Election.Observe: first
// the lease's current state (read when w is also a Reader, as
// natsstore.Store is; otherwise the first event of the watch), then every
// change of holder: another term or token acquired it, or it became free
// (released, expired or deleted). Renewals, and the same state reported
// again after a watch was re-created, are not reported. Any process can
// observe a lease, candidate or not.
//
// The channel is buffered and coalescing: a slow receiver misses
// intermediate holders, never the latest. It is closed when ctx is done or
// when the watch ends (the store was closed): a channel that closes while
// ctx is not done means that nothing is observed any more. The goroutine
// that feeds it ends with it.
func Observe(ctx context.Context, w Watcher, leaseID string) (<-chan Observation, error) {
	if err := ValidateLeaseID(leaseID); err != nil {
		return nil, err
	}
	if w == nil {
		return nil, invalid("Watcher", "must not be nil")
	}
	wctx, cancel := context.WithCancel(ctx)
	events, err := w.Watch(wctx, leaseID)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("lease: observe %s: %w", leaseID, err)
	}
	var (
		last  Observation
		first = true
	)
	if r, ok := w.(Reader); ok {
		// Read after the watch was opened, so that no change falls between.
		if last, err = r.Read(ctx, leaseID); err != nil {
			cancel()
			return nil, fmt.Errorf("lease: observe %s: %w", leaseID, err)
		}
		first = false
	}
	out := make(chan Observation, 1)
	if !first {
		out <- last
	}
	go func() {
		defer close(out)
		defer cancel()
		for ev := range events {
			o := observation(ev)
			if !first && (o.sameHolder(last) || o.Revision != 0 && o.Revision < last.Revision) {
				continue // a renewal, the same state again, or older than what was read
			}
			first, last = false, o
			offer(out, o)
		}
	}()
	return out, nil
}

// offer hands o over, replacing an observation the receiver has not taken
// yet. Its goroutine is the channel's only sender.
func offer(out chan Observation, o Observation) {
	for {
		select {
		case out <- o:
			return
		default:
		}
		select {
		case <-out:
		default:
		}
	}
}
