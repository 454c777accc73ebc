// Package natsdir makes a natsstore bucket a shard.Directory, until
// natsstore.Store implements WatchPrefix itself: it learns the names of the
// keys under a prefix from a KV watch of their metadata, and reads each
// held key through the store's own watch (natsstore.Store.Watch), which
// decodes the lease values.
//
// It costs one KV watch for the prefix and one per key held since the
// watch began (also once freed: a member that left keeps its watch), which suits
// tens of shards (the examples, the chaos suite), not thousands; and its
// prefix watch is not re-created after a server restart.
package natsdir

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/internal/eventqueue"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/shard"
)

// Directory is a shard.Directory over a KV bucket and the natsstore.Store
// that keeps its leases.
type Directory struct {
	kv      jetstream.KeyValue
	store   lease.Watcher
	timeout time.Duration
}

var _ shard.Directory = (*Directory)(nil)

// New returns a Directory over kv, the bucket of store (a
// natsstore.Store). timeout bounds the reads of the current state (0
// means 5 s).
func New(kv jetstream.KeyValue, store lease.Watcher, timeout time.Duration) *Directory {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Directory{kv: kv, store: store, timeout: timeout}
}

// WatchPrefix implements shard.Directory.
func (d *Directory) WatchPrefix(ctx context.Context, prefix string) ([]lease.Event, <-chan lease.Event, error) {
	if err := shard.ValidatePrefix(prefix); err != nil {
		return nil, nil, err
	}
	life, cancel := context.WithCancel(ctx)
	kw, err := d.kv.Watch(life, prefix+">", jetstream.MetaOnly())
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("%w: natsdir: watch %s>: %w", lease.ErrUnavailable, prefix, err)
	}
	w := &watch{d: d, life: life, queue: eventqueue.New(), keys: map[string]context.CancelFunc{}}
	current, err := w.start(kw)
	if err != nil {
		_ = kw.Stop()
		cancel()
		w.wg.Wait()
		return nil, nil, err
	}
	out := make(chan lease.Event)
	go func() {
		defer close(out)
		defer w.wg.Wait()
		defer cancel()
		defer func() { _ = kw.Stop() }()
		w.wg.Go(func() { w.queue.Pump(life, out) })
		w.follow(kw)
	}()
	return current, out, nil
}

// watch is one WatchPrefix.
type watch struct {
	d     *Directory
	life  context.Context
	queue *eventqueue.Queue
	keys  map[string]context.CancelFunc // the keys watched through the store
	wg    sync.WaitGroup
}

// start reads the keys that exist now, and the state of the held ones.
func (w *watch) start(kw jetstream.KeyWatcher) ([]lease.Event, error) {
	deadline := time.NewTimer(w.d.timeout)
	defer deadline.Stop()
	var held []string
	for done := false; !done; {
		select {
		case e, ok := <-kw.Updates():
			switch {
			case !ok:
				return nil, fmt.Errorf("%w: natsdir: the watch ended", lease.ErrUnavailable)
			case e == nil:
				done = true
			case e.Operation() == jetstream.KeyValuePut:
				held = append(held, e.Key())
			}
		case <-deadline.C:
			return nil, fmt.Errorf("%w: natsdir: no current state within %v", lease.ErrUnavailable, w.d.timeout)
		case <-w.life.Done():
			return nil, w.life.Err()
		}
	}
	var current []lease.Event
	for _, key := range held {
		ch, err := w.open(key)
		if err != nil {
			return nil, err
		}
		select {
		case ev, ok := <-ch:
			if ok && ev.Kind == lease.EventHeld {
				current = append(current, ev)
			}
		case <-deadline.C:
			return nil, fmt.Errorf("%w: natsdir: no current state within %v", lease.ErrUnavailable, w.d.timeout)
		case <-w.life.Done():
			return nil, w.life.Err()
		}
		w.forward(ch)
	}
	return current, nil
}

// open watches key through the store.
func (w *watch) open(key string) (<-chan lease.Event, error) {
	ctx, cancel := context.WithCancel(w.life)
	ch, err := w.d.store.Watch(ctx, key)
	if err != nil {
		cancel()
		return nil, err
	}
	w.keys[key] = cancel
	return ch, nil
}

func (w *watch) forward(ch <-chan lease.Event) {
	w.wg.Go(func() {
		for ev := range ch {
			w.queue.Push(ev)
		}
	})
}

// follow watches the keys written from now on, until the watch ends. A key
// is watched through the store until the WatchPrefix ends, so that its
// events come from one watch, in order.
func (w *watch) follow(kw jetstream.KeyWatcher) {
	for {
		select {
		case <-w.life.Done():
			return
		case e, ok := <-kw.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			key := e.Key()
			if e.Operation() != jetstream.KeyValuePut || w.keys[key] != nil {
				continue // the store's watch of the key reports it
			}
			if ch, err := w.open(key); err == nil {
				w.forward(ch)
			}
		}
	}
}
