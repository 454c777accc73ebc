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
	rewatchMax = 500 * time.Millisecond
)

// Watch implements lease.Watcher. It reports the key's current state first
// (EventFree at Revision 0 for a key never written), then every change:
// EventHeld for a write (Owner "" for a value that is not a lease), EventFree
// for a release, a delete, a purge or an expiry marker (none in
// ExpiryObserved mode). The channel closes at once when ctx is done or the
// store is closed. The calls of one key share one KV watch, kept alive across
// reconnects and leader changes; a silence is reported as WatchStalled. See
// docs/nats.md, "Watches".
func (s *Store) Watch(ctx context.Context, leaseID string) (<-chan lease.Event, error) {
	return s.watches.watch(ctx, leaseID)
}

// watch is Store.Watch.
func (ws *watches) watch(ctx context.Context, leaseID string) (<-chan lease.Event, error) {
	if err := lease.ValidateLeaseID(leaseID); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w, c, err := ws.joinWatch(ctx, leaseID)
	if err != nil {
		return nil, err
	}
	return awaitWatch(ctx, w, c)
}

// watchOutput receives what a watchRun's KV watches deliver, on the run's
// goroutine: Watch's and WatchPrefix's translations of the same entries.
type watchOutput interface {
	// start says that a new KV watch begins: its initial state follows.
	start()
	// entry hands over one entry; initial tells whether it belongs to the
	// watch's initial state.
	entry(e jetstream.KeyValueEntry, initial bool)
	// initialDone says that the initial state is complete; seen tells
	// whether it had an entry.
	initialDone(seen bool)
	// close says that the watch has stopped for good.
	close()
}

// follow keeps a KV watch of filter (a key, or a prefix followed by ">")
// alive until ctx is done or the store is closed, handing what it delivers
// to out, and then calls out.close. The first KV watch is made before follow
// returns, so that its errors reach the caller; out.close is not called
// then.
func (ws *watches) follow(ctx context.Context, filter string, out watchOutput) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Count the watch among the store's goroutines before making it, so
	// that Close waits for it and its teardown from here on.
	ws.mu.Lock()
	if ws.closed.Load() {
		ws.mu.Unlock()
		return lease.ErrClosed
	}
	ws.goroutines.Add(1)
	ws.mu.Unlock()
	started := false
	defer func() {
		if !started {
			ws.goroutines.Done()
		}
	}()

	// Watches live until ctx is done or the store closes.
	wctx, cancel := context.WithCancel(ws.life)
	stopWith := context.AfterFunc(ctx, cancel)
	var reconnected chan nats.Status
	if ws.nc != nil {
		reconnected = ws.nc.StatusChanged(nats.CONNECTED)
	}
	stop := func() {
		stopWith()
		cancel()
		if reconnected != nil {
			ws.nc.RemoveStatusListener(reconnected)
		}
	}

	// The first watch is made here so that its errors reach the caller.
	var w *keyWatch
	err := failFastConn(ctx, ws.nc, func(fctx context.Context) error {
		var err error
		w, err = ws.startWatch(filter, ws.cfg.timeout(), wctx, fctx)
		return err
	})
	if err != nil {
		stop()
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("natsstore: watch %s: %w", filter, cerr)
		}
		if ws.closed.Load() {
			return lease.ErrClosed
		}
		return ws.fail(ctx, "watch "+filter, err)
	}
	if ws.closed.Load() { // closed while the watch was being made
		ws.retire(w)
		stop()
		return lease.ErrClosed
	}

	ws.running.Add(1)
	started = true
	go func() {
		defer ws.goroutines.Done()
		defer ws.running.Add(-1)
		defer out.close()
		defer stop()
		r := ws.newWatchRun(filter, out)
		r.run(wctx, w, reconnected)
	}()
	return nil
}

// failFastConn is failFast when there is a connection to watch.
func failFastConn(ctx context.Context, nc *nats.Conn, fn func(context.Context) error) error {
	if nc == nil {
		return fn(ctx)
	}
	return failFast(ctx, nc, fn)
}

// keyWatch is one KV watch.
type keyWatch struct {
	jetstream.KeyWatcher
}

// stop ends the watch: its updates close, and it deletes the watch's
// consumer (a request, which waits for the store's timeout when the server
// does not answer). Call it through storeLife.retire.
func (w *keyWatch) stop() { _ = w.Stop() }

// retire stops w in the background. The goroutine counts among the store's
// (Close waits for it and reports it when it does not end), so the caller
// must hold a count of the store's goroutines itself.
func (l *storeLife) retire(w *keyWatch) {
	l.running.Add(1)
	l.goroutines.Add(1)
	go func() {
		defer l.goroutines.Done()
		defer l.running.Add(-1)
		w.stop()
	}()
}

// errCreateTimeout reports a watch creation cut short by its bound.
var errCreateTimeout = errors.New("natsstore: creating the watch took too long")

// startWatch creates a KV watch of key; the caller must hold a count of
// ws.goroutines. The creation is bounded by limit,
// by every context in bounds and by the connection: a watch requested while
// the connection is lost is abandoned at once. The watch itself lives until
// it is stopped.
func (ws *watches) startWatch(key string, limit time.Duration, bounds ...context.Context) (*keyWatch, error) {
	wctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	timer := time.AfterFunc(limit, func() { cancel(errCreateTimeout) })
	stops := []func() bool{timer.Stop}
	for _, b := range bounds {
		stops = append(stops, context.AfterFunc(b, func() { cancel(context.Cause(b)) }))
	}
	if l := ws.link.Load(); l != nil {
		stops = append(stops, context.AfterFunc(l.ctx, func() { cancel(errLinkLost) }))
	}
	begin := time.Now()
	w, err := ws.kv.Watch(wctx, key)
	took := time.Since(begin)
	intime := true
	for _, stop := range stops {
		intime = stop() && intime
	}
	kw := &keyWatch{KeyWatcher: w}
	if err == nil && !intime {
		ws.retire(kw)
		err = context.Cause(wctx)
	}
	if err != nil {
		if cause := context.Cause(wctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%v)", cause, err)
		}
		return nil, err
	}
	ws.health.createdIn.Store(int64(took))
	return kw, nil
}

// event translates a KV watch entry.
func (ws *watches) event(e jetstream.KeyValueEntry) lease.Event {
	ws.watched(e) // starts the observation clock of the revision (keys_observe.go)
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
func send(events chan lease.Event, ev lease.Event) {
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
