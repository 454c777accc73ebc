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
// ID followed by '.' ("billing." matches "billing.members.a", never
// "billingx.a"), with one KV watch of the subjects under it, whatever the
// number of keys. It implements shard.Directory.
//
// It returns the current state first: an EventHeld for every key under the
// prefix that holds a value now (a lease, or a value that is not one, held
// by an empty Holder, as Watch reports it), sorted by lease ID. It reflects
// every write acknowledged before the call: on a replicated bucket, whose
// watch consumer may run on a follower that has not applied the latest
// writes, it is complete only once the watch has delivered the last
// revision under the prefix that the stream leader showed after the watch
// was made (see watchRun.settle). Then it sends every change on the
// channel, each entry translated as Watch translates it (EventHeld for an
// acquisition or a renewal, EventFree for a release, an expiry, a delete or
// a purge), until ctx is done or the store is closed, and then closes the
// channel.
//
// The channel keeps the latest event of each lease until it is received, so
// that a slow receiver never blocks the watch: it may miss intermediate
// events of a lease, never its latest, and one busy lease never pushes
// another's event out. Events of one lease arrive in order.
//
// The KV watch is kept alive as Watch's is: re-created after a reconnect and
// whenever it ends, and checked every Config.WatchCheckInterval by a read
// of the last revision under the prefix (WatchStalled and WatchRecovered
// name the watch as the prefix followed by ">"). A re-created watch reports
// the current state of every key under the prefix again (complete as the
// first one's), and an EventFree (at Revision 0) for each lease it last
// reported held that the new watch no longer shows (its subject was emptied
// meanwhile without a marker), so that a receiver that missed a change
// converges.
//
// It waits for the current state at most until ctx's deadline or
// Config.Timeout; errors match lease.ErrInvalid (a bad prefix),
// lease.ErrUnavailable (the server cannot be reached or does not answer in
// time, with ErrPermission when the user may not watch the bucket) or
// lease.ErrClosed.
func (s *Store) WatchPrefix(ctx context.Context, prefix string) ([]lease.Event, <-chan lease.Event, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	o := newPrefixOutput(s, cancel)
	if err := s.follow(wctx, prefix+">", o); err != nil {
		o.close()
		return nil, nil, err
	}
	timer := time.NewTimer(s.cfg.timeout())
	defer timer.Stop()
	var err error
	select {
	case current := <-o.ready:
		return current, o.events, nil
	case <-o.ended:
	case <-timer.C:
		err = fmt.Errorf("natsstore: watch %s>: %w: the current state did not arrive within %v",
			prefix, lease.ErrUnavailable, s.cfg.timeout())
	case <-ctx.Done():
	}
	cancel()
	<-o.ended // at once: the watch's goroutine ends with wctx
	switch {
	case ctx.Err() != nil:
		return nil, nil, fmt.Errorf("natsstore: watch %s>: %w", prefix, context.Cause(ctx))
	case s.closed.Load():
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
	s      *Store
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

func newPrefixOutput(s *Store, cancel context.CancelFunc) *prefixOutput {
	o := &prefixOutput{
		s: s, cancel: cancel, queue: eventqueue.New(),
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
	ev := o.s.event(e)
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
