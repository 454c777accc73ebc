package natsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// Bounds of the pause between attempts to re-create a watch.
const (
	rewatchMin = 10 * time.Millisecond
	rewatchMax = time.Second
)

// Watch implements lease.Watcher over a KV watch of the key. It first
// reports the key's current state, then every change: EventHeld for a write
// (Owner is "" when the value is not a lease), EventFree for a release, a
// delete, a purge or an expiry marker. In ExpiryObserved mode the server
// writes no expiry markers, so expiries are not reported.
//
// A KV watch stays silent for many seconds after a server restart, so the
// watch is re-created whenever the connection reconnects (and whenever it
// ends for any other reason), and reports the key's state again. The
// channel closes when ctx is done or the store is closed.
func (s *Store) Watch(ctx context.Context, leaseID string) (<-chan lease.Event, error) {
	if err := lease.ValidateLeaseID(leaseID); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, lease.ErrClosed
	}
	// Watches live until ctx is done or the store closes.
	wctx, cancel := context.WithCancel(s.life)
	stopWith := context.AfterFunc(ctx, cancel)
	var reconnected chan nats.Status
	if s.nc != nil {
		reconnected = s.nc.StatusChanged(nats.CONNECTED)
	}
	stop := func() {
		stopWith()
		cancel()
		if reconnected != nil {
			s.nc.RemoveStatusListener(reconnected)
		}
	}

	// The first watch is made here so that its errors reach the caller.
	var w *keyWatch
	err := failFastConn(ctx, s.nc, func(fctx context.Context) error {
		var err error
		w, err = s.startWatch(wctx, fctx, leaseID)
		return err
	})
	if err != nil {
		stop()
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("natsstore: watch %s: %w", leaseID, cerr)
		}
		return nil, s.fail(ctx, "watch "+leaseID, err)
	}

	events := make(chan lease.Event, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() { // closed while the watch was being made
		w.stop()
		stop()
		return nil, lease.ErrClosed
	}
	s.watches.Add(1)
	s.running.Add(1)
	go func() {
		defer s.watches.Done()
		defer s.running.Add(-1)
		defer close(events)
		defer stop()
		s.runWatch(wctx, leaseID, w, reconnected, events)
	}()
	return events, nil
}

// failFastConn is failFast when there is a connection to watch.
func failFastConn(ctx context.Context, nc *nats.Conn, fn func(context.Context) error) error {
	if nc == nil {
		return fn(ctx)
	}
	return failFast(ctx, nc, fn)
}

// keyWatch is one KV watch and the context its subscription lives by.
type keyWatch struct {
	jetstream.KeyWatcher
	cancel context.CancelFunc
}

func (w *keyWatch) stop() {
	_ = w.Stop()
	w.cancel()
}

// startWatch creates a KV watch of key that lives until life is done or the
// watch is stopped. Its creation is bounded by the store's Timeout, by
// bound, and by the connection: a watch requested while the connection is
// lost is abandoned at once. (nats.go ties the subscription to the context
// it is created with, so the bound cannot be a context deadline.)
func (s *Store) startWatch(life, bound context.Context, key string) (*keyWatch, error) {
	wctx, cancel := context.WithCancelCause(life)
	errCreate := errors.New("natsstore: creating the watch took too long")
	timer := time.AfterFunc(s.cfg.timeout(), func() { cancel(errCreate) })
	stopBound := context.AfterFunc(bound, func() { cancel(context.Cause(bound)) })
	stopLink := func() bool { return true }
	if l := s.link.Load(); l != nil {
		stopLink = context.AfterFunc(l.ctx, func() { cancel(errLinkLost) })
	}
	w, err := s.kv.Watch(wctx, key)
	intime := timer.Stop()
	intime = stopBound() && intime
	intime = stopLink() && intime
	if err == nil && !intime {
		_ = w.Stop()
		err = context.Cause(wctx)
	}
	if err != nil {
		cancel(nil)
		if cause := context.Cause(wctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%v)", cause, err)
		}
		return nil, err
	}
	return &keyWatch{KeyWatcher: w, cancel: func() { cancel(nil) }}, nil
}

// runWatch forwards the updates of w until ctx is done, re-creating the
// watch after a reconnect or when it ends.
func (s *Store) runWatch(ctx context.Context, key string, w *keyWatch,
	reconnected <-chan nats.Status, events chan lease.Event) {
	defer func() {
		if w != nil {
			w.stop()
		}
	}()
	pause := rewatchMin
	for {
		var updates <-chan jetstream.KeyValueEntry
		if w != nil {
			updates = w.Updates()
		}
		select {
		case <-ctx.Done():
			return
		case e, ok := <-updates:
			if !ok {
				s.log.Debug("natsstore: watch ended; re-creating it", "lease", key)
				w.stop()
				w = nil
				continue
			}
			if e != nil {
				s.send(events, s.event(e))
			}
			pause = rewatchMin
			continue
		case <-reconnected:
			s.log.Debug("natsstore: reconnected; re-creating the watch", "lease", key)
			if w != nil {
				w.stop()
				w = nil
			}
		case <-after(w == nil, pause):
		}
		if w != nil {
			continue
		}
		nw, err := s.startWatch(ctx, ctx, key)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Debug("natsstore: re-creating a watch failed; retrying", "lease", key, "err", err, "pause", pause)
			}
			pause = min(2*pause, rewatchMax)
			continue
		}
		w = nw
	}
}

// after returns a channel that fires after pause when waiting is true, and
// nil (never fires) otherwise.
func after(waiting bool, pause time.Duration) <-chan time.Time {
	if !waiting {
		return nil
	}
	return time.After(pause)
}

// event translates a KV watch entry.
func (s *Store) event(e jetstream.KeyValueEntry) lease.Event {
	s.watched(e) // starts the observation clock of the revision (observe.go)
	ev := lease.Event{LeaseID: e.Key(), Revision: e.Revision()}
	switch e.Operation() {
	case jetstream.KeyValuePut:
		ev.Kind = lease.EventHeld
		if r, err := parseRecord(e.Value()); err == nil && r.Kind == kindHeld {
			ev.Holder = r.holder(e.Revision())
		}
	default:
		ev.Kind = lease.EventFree
	}
	return ev
}

// send hands ev over, replacing an event the receiver has not taken yet: the
// channel is coalescing, and the latest event is never lost.
func (s *Store) send(events chan lease.Event, ev lease.Event) {
	for {
		select {
		case events <- ev:
			return
		default:
		}
		select {
		case <-events:
		default:
		}
	}
}
