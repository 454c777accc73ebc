package demo

import (
	"sync"
	"time"
)

// Queue hands values to one consumer goroutine in order, never blocking
// the sender: a value sent while the queue is full or closed is dropped.
// The demos use it to report events to their orchestrator from actor hooks.
type Queue[T any] struct {
	mu   sync.Mutex
	ch   chan T
	shut bool
	done chan struct{}
}

// NewQueue starts a consumer that calls handle for every value, holding up
// to size values.
func NewQueue[T any](size int, handle func(T)) *Queue[T] {
	q := &Queue[T]{ch: make(chan T, size), done: make(chan struct{})}
	go func() {
		defer close(q.done)
		for v := range q.ch {
			handle(v)
		}
	}()
	return q
}

// Send queues v unless the queue is full or closed.
func (q *Queue[T]) Send(v T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shut {
		return
	}
	select {
	case q.ch <- v:
	default:
	}
}

// Close stops taking values and waits at most timeout for the consumer to
// handle what is queued. It may be called more than once.
func (q *Queue[T]) Close(timeout time.Duration) {
	q.mu.Lock()
	if !q.shut {
		q.shut = true
		close(q.ch)
	}
	q.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-q.done:
	case <-t.C:
	}
}
