package shardtest

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/asterforge/aster/internal/eventqueue"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/shard"
)

// MemStore is a leasetest.MemStore that is also a shard.Directory: an
// in-memory store for the tests of a fleet, in one process. It learns the
// names of the leases from the calls made through it (every instance of a
// test must share it), and follows each with a watch of the MemStore, so
// that releases and expiries reach its prefix watches as they reach a
// Watcher. Inside a testing/synctest bubble its expiries happen in virtual
// time.
//
// Close it: it runs a goroutine per lease it follows.
type MemStore struct {
	*leasetest.MemStore
	life   context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	keys    map[string]bool
	watches map[*prefixWatch]struct{}
	closed  bool
	wg      sync.WaitGroup
}

var (
	_ lease.Store     = (*MemStore)(nil)
	_ lease.Watcher   = (*MemStore)(nil)
	_ shard.Directory = (*MemStore)(nil)
)

// NewMemStore returns an empty store; opts configure its MemStore.
func NewMemStore(opts ...leasetest.MemOption) *MemStore {
	life, cancel := context.WithCancel(context.Background())
	return &MemStore{MemStore: leasetest.NewMemStore(opts...), life: life, cancel: cancel,
		keys: map[string]bool{}, watches: map[*prefixWatch]struct{}{}}
}

// Acquire implements lease.Store; it follows the lease from now on.
func (s *MemStore) Acquire(ctx context.Context, c lease.Claim) (lease.Acquisition, error) {
	s.follow(c.LeaseID)
	return s.MemStore.Acquire(ctx, c)
}

// Tamper overwrites or deletes a lease key as leasetest.MemStore.Tamper
// does, and follows it.
func (s *MemStore) Tamper(leaseID, owner string, ttl time.Duration) {
	s.follow(leaseID)
	s.MemStore.Tamper(leaseID, owner, ttl)
}

// Watch implements lease.Watcher as a NATS store's watch does: it first
// reports the lease's current state (held, or free once it has been
// written), then every change, so that a standby that opens its watch
// just after a release still sees it.
func (s *MemStore) Watch(ctx context.Context, leaseID string) (<-chan lease.Event, error) {
	s.follow(leaseID)
	in, err := s.MemStore.Watch(ctx, leaseID)
	if err != nil {
		return nil, err
	}
	first := lease.Event{LeaseID: leaseID, Kind: lease.EventFree}
	if h, rev, ok := s.MemStore.Holder(leaseID); ok {
		first = lease.Event{LeaseID: leaseID, Kind: lease.EventHeld, Holder: h, Revision: rev}
	}
	out := make(chan lease.Event, 1)
	out <- first
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, lease.ErrClosed
	}
	s.wg.Go(func() {
		defer close(out)
		for ev := range in {
			for sent := false; !sent; { // coalescing: the latest event replaces an unread one
				select {
				case out <- ev:
					sent = true
				default:
					select {
					case <-out:
					default:
					}
				}
			}
		}
	})
	return out, nil
}

// follow watches id, once, and hands its events to the prefix watches.
func (s *MemStore) follow(id string) {
	if lease.ValidateLeaseID(id) != nil {
		return // the MemStore refuses it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.keys[id] {
		return
	}
	ch, err := s.MemStore.Watch(s.life, id)
	if err != nil {
		return // closed
	}
	s.keys[id] = true
	s.wg.Go(func() {
		first := true
		for ev := range ch {
			// The watch's first event is the state before this store wrote
			// the lease: never written. It is no change, and a prefix watch
			// that received it after the first write would see the lease
			// freed before it is held.
			if first && ev.Kind == lease.EventFree && ev.Revision == 0 {
				first = false
				continue
			}
			first = false
			s.dispatch(ev)
		}
	})
}

func (s *MemStore) dispatch(ev lease.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watches {
		if strings.HasPrefix(ev.LeaseID, w.prefix) {
			w.push(ev)
		}
	}
}

// WatchPrefix implements shard.Directory.
func (s *MemStore) WatchPrefix(ctx context.Context, prefix string) ([]lease.Event, <-chan lease.Event, error) {
	if err := shard.ValidatePrefix(prefix); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, lease.ErrClosed
	}
	defer s.mu.Unlock()
	w := &prefixWatch{prefix: prefix, queue: eventqueue.New()}
	s.watches[w] = struct{}{}
	var current []lease.Event
	for k := range s.keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if h, rev, ok := s.MemStore.Holder(k); ok {
			current = append(current, lease.Event{LeaseID: k, Kind: lease.EventHeld, Holder: h, Revision: rev})
		}
	}
	out := make(chan lease.Event)
	pctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.life, cancel)
	s.wg.Go(func() {
		defer close(out)
		defer stop()
		defer cancel()
		w.queue.Pump(pctx, out)
		s.mu.Lock()
		delete(s.watches, w)
		s.mu.Unlock()
	})
	return current, out, nil
}

// Close closes the store and its watches, and waits for its goroutines. It
// is idempotent.
func (s *MemStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	err := s.MemStore.Close()
	s.wg.Wait()
	return err
}

// prefixWatch is one WatchPrefix.
type prefixWatch struct {
	prefix string
	queue  *eventqueue.Queue
}

func (w *prefixWatch) push(ev lease.Event) { w.queue.Push(ev) }
