package supervision

import (
	"log/slog"
	"sync"
	"sync/atomic"
)

// bus delivers events to hooks on its own goroutine. Publish never blocks:
// events that do not fit in the buffer are dropped and counted.
type bus struct {
	hooks   []func(Event)
	logger  *slog.Logger
	dropped *atomic.Uint64
	limit   int

	mu     sync.Mutex
	queue  []Event
	spare  []Event
	closed bool

	wake chan struct{}
	done chan struct{}
}

// newBus starts the delivery goroutine, or returns nil when there are no
// hooks (a nil bus drops nothing and does nothing).
func newBus(hooks []func(Event), limit int, logger *slog.Logger, dropped *atomic.Uint64) *bus {
	if len(hooks) == 0 {
		return nil
	}
	b := &bus{
		hooks:   hooks,
		logger:  logger,
		dropped: dropped,
		limit:   limit,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	go b.run()
	return b
}

// publish queues e for the hooks without blocking.
func (b *bus) publish(e Event) {
	if b == nil {
		return
	}
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return
	case len(b.queue) >= b.limit:
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	b.queue = append(b.queue, e)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// close delivers the events already queued, then stops the goroutine and
// waits for it.
func (b *bus) close() {
	if b == nil {
		return
	}
	b.mu.Lock()
	already := b.closed
	b.closed = true
	b.mu.Unlock()
	if !already {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	<-b.done
}

func (b *bus) run() {
	defer close(b.done)
	for range b.wake {
		for {
			b.mu.Lock()
			if len(b.queue) == 0 {
				closed := b.closed
				b.mu.Unlock()
				if closed {
					return
				}
				break
			}
			// Swap buffers: publishers append to the spare one meanwhile.
			batch := b.queue
			b.queue, b.spare = b.spare[:0], nil
			b.mu.Unlock()
			for _, e := range batch {
				b.deliver(e)
			}
			clear(batch)
			b.mu.Lock()
			b.spare = batch[:0]
			b.mu.Unlock()
		}
	}
}

func (b *bus) deliver(e Event) {
	for _, h := range b.hooks {
		func() {
			defer func() {
				if r := recover(); r != nil {
					b.logger.Warn("supervision: event hook panicked", "event", e.String(), "panic", r)
				}
			}()
			h(e)
		}()
	}
}
