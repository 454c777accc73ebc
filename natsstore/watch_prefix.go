package natsstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/internal/eventqueue"
	"github.com/asterforge/aster/lease"
)

// WatchPrefix watches every lease whose ID begins with prefix, a valid lease
// ID followed by '.', with one KV watch; it implements shard.Directory. It
// returns every key held now, sorted by lease ID and reflecting every write
// acknowledged before the call, then sends each change (translated as Watch
// does) until ctx is done or the store is closed. The channel keeps the latest
// event of each lease, so a slow receiver may miss intermediate events, never
// the latest. Errors match lease.ErrInvalid, lease.ErrUnavailable (with
// ErrPermission when the user may not watch) or lease.ErrClosed. See
// docs/nats.md, "Watches".
func (s *Store) WatchPrefix(ctx context.Context, prefix string) ([]lease.Event, <-chan lease.Event, error) {
	return s.watches.watchPrefix(ctx, prefix)
}

// watchPrefix is Store.WatchPrefix.
func (ws *watches) watchPrefix(ctx context.Context, prefix string) ([]lease.Event, <-chan lease.Event, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	o := newPrefixOutput(ws, cancel)
	if err := ws.follow(wctx, prefix+">", o); err != nil {
		o.close()
		return nil, nil, err
	}
	timer := time.NewTimer(ws.cfg.timeout())
	defer timer.Stop()
	var err error
	select {
	case current := <-o.ready:
		return current, o.events, nil
	case <-o.ended:
	case <-timer.C:
		err = fmt.Errorf("natsstore: watch %s>: %w: the current state did not arrive within %v",
			prefix, lease.ErrUnavailable, ws.cfg.timeout())
	case <-ctx.Done():
	}
	cancel()
	<-o.ended // at once: the watch's goroutine ends with wctx
	switch {
	case ctx.Err() != nil:
		return nil, nil, fmt.Errorf("natsstore: watch %s>: %w", prefix, context.Cause(ctx))
	case ws.closed.Load():
		return nil, nil, lease.ErrClosed
	case err == nil:
		err = fmt.Errorf("natsstore: watch %s>: %w: the watch ended before its current state arrived",
			prefix, lease.ErrUnavailable)
	}
	return nil, nil, err
}

// validatePrefix reports whether prefix is a valid lease ID followed by '.'
// (shard.ValidatePrefix; this package does not import shard).
func validatePrefix(prefix string) error {
	id, ok := strings.CutSuffix(prefix, ".")
	if !ok {
		return &lease.FieldError{Field: "prefix", Reason: fmt.Sprintf("must end with '.', got %q", prefix)}
	}
	if err := lease.ValidateLeaseID(id); err != nil {
		return &lease.FieldError{Field: "prefix", Reason: fmt.Sprintf("%q does not begin with a valid lease ID: %v", prefix, err)}
	}
	return nil
}

// prefixOutput is WatchPrefix's output: the first watch's initial state as
// the current state, then a queue that keeps the latest event of each lease,
// pumped to the receiver's channel by a goroutine of its own, so that the
// watch never waits for the receiver.
type prefixOutput struct {
	ws     *watches
	cancel context.CancelFunc // ends the watch
	queue  *eventqueue.Queue
	events chan lease.Event   // the receiver's channel
	ready  chan []lease.Event // the current state, once
	ended  chan struct{}      // closed once the watch has stopped and events is closed

	stopPump context.CancelFunc
	pumped   chan struct{} // closed when the pump has returned

	// Used on the watch's goroutine only.
	first    bool                   // the current state has not been handed over yet
	current  map[string]lease.Event // the first initial state, while it arrives
	held     map[string]bool        // the leases last reported held
	snapshot map[string]bool        // the keys of the initial state that arrives, nil between them
}

func newPrefixOutput(ws *watches, cancel context.CancelFunc) *prefixOutput {
	o := &prefixOutput{
		ws: ws, cancel: cancel, queue: eventqueue.New(),
		events: make(chan lease.Event), ready: make(chan []lease.Event, 1), ended: make(chan struct{}),
		pumped: make(chan struct{}), first: true, held: map[string]bool{},
	}
	pctx, stop := context.WithCancel(context.Background())
	o.stopPump = stop
	go func() {
		defer close(o.pumped)
		o.queue.Pump(pctx, o.events)
	}()
	return o
}

func (o *prefixOutput) start() {
	o.snapshot = map[string]bool{}
	if o.first {
		o.current = map[string]lease.Event{}
	}
}

func (o *prefixOutput) entry(e jetstream.KeyValueEntry, initial bool) {
	ev := o.ws.event(e)
	if initial && o.snapshot != nil {
		o.snapshot[ev.LeaseID] = true
	}
	if ev.Kind == lease.EventHeld {
		o.held[ev.LeaseID] = true
	} else {
		delete(o.held, ev.LeaseID)
	}
	if o.first {
		o.current[ev.LeaseID] = ev
		return
	}
	o.queue.Push(ev)
}

func (o *prefixOutput) initialDone(bool) {
	if o.first {
		// The state of this watch only: an earlier one may have been lost
		// before its initial state was complete.
		clear(o.held)
		current := make([]lease.Event, 0, len(o.current))
		for _, ev := range o.current {
			if ev.Kind == lease.EventHeld {
				current = append(current, ev)
				o.held[ev.LeaseID] = true
			}
		}
		slices.SortFunc(current, func(a, b lease.Event) int { return strings.Compare(a.LeaseID, b.LeaseID) })
		o.first, o.current = false, nil
		o.ready <- current // never blocks: once
	} else {
		// A re-created watch: what the last one reported held and this one
		// does not show is gone.
		for id := range o.held {
			if !o.snapshot[id] {
				delete(o.held, id)
				o.queue.Push(lease.Event{LeaseID: id, Kind: lease.EventFree})
			}
		}
	}
	o.snapshot = nil
}

func (o *prefixOutput) close() {
	o.cancel()
	o.stopPump()
	<-o.pumped
	close(o.events)
	close(o.ended)
}
