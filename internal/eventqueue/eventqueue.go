// Package eventqueue is an unbounded queue of lease events that keeps the
// latest event of each lease, in the order the leases first changed: what a
// watch of many leases needs so that a slow receiver misses intermediate
// events of a lease, never its latest, and its sender never blocks.
package eventqueue

import (
	"context"
	"sync"

	"github.com/asterforge/aster/lease"
)

// Queue holds events until Pump sends them. The zero Queue is not ready:
// use New. It is safe for concurrent use.
type Queue struct {
	mu      sync.Mutex
	order   []string
	pending map[string]lease.Event
	signal  chan struct{}
}

// New returns an empty Queue.
func New() *Queue {
	return &Queue{pending: map[string]lease.Event{}, signal: make(chan struct{}, 1)}
}

// Push queues ev, replacing an event of the same lease that has not been
// sent yet. It never blocks.
func (q *Queue) Push(ev lease.Event) {
	q.mu.Lock()
	if _, ok := q.pending[ev.LeaseID]; !ok {
		q.order = append(q.order, ev.LeaseID)
	}
	q.pending[ev.LeaseID] = ev
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *Queue) pop() (lease.Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		return lease.Event{}, false
	}
	id := q.order[0]
	q.order = q.order[1:]
	ev := q.pending[id]
	delete(q.pending, id)
	return ev, true
}

// Pump sends the queued events to out until ctx is done.
func (q *Queue) Pump(ctx context.Context, out chan<- lease.Event) {
	for {
		ev, ok := q.pop()
		if !ok {
			select {
			case <-q.signal:
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- ev:
		case <-ctx.Done():
			return
		}
	}
}
