package natsstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/asterforge/aster/lease"
)

// The Watch calls of one key in one store share one watch run.
//
// A process often runs many candidates of one lease (a singleton with 25
// standbys in one process), each watching the lease's key. With a KV watch
// each, every change of the key makes the server deliver one message per
// watch and the process handle each. So the Watch calls of a key share one
// run of follow: one consumer, one liveness check, one re-creation and one
// WatchStalled and WatchRecovered per silence, whatever the number of
// callers. The run translates each entry once and hands the event to every
// caller's own coalescing channel.
//
// The first call of a key starts the run, whose first KV watch is made in
// the background (within Config.Timeout). Every caller that comes
// meanwhile, the first included, waits for it within its own ctx and gets
// its channel, or the creation's error. A caller whose ctx ends while it
// waits returns at once; the creation goes on for the others, and is
// abandoned when none is left. A caller that joins a run whose initial
// state has arrived gets the latest event the run delivered at once (the
// run's current view of the key), then every change; one that joins
// earlier gets the initial state when it arrives.
//
// Each caller's channel closes when its ctx is done or the run ends (the
// store is closed). The run stops when its last caller leaves, its
// consumer deleted in the background as follow does, and a later call of
// the key starts a new run.

// watchHub holds the runs of a store's Watch calls. Its zero value is ready
// to use.
type watchHub struct {
	mu   sync.Mutex              // guards runs; taken before a sharedWatch's mu
	runs map[string]*sharedWatch // the runs new callers join, by key; each has callers
}

// sharedWatch is the run of one key and its callers; it is the run's
// watchOutput.
type sharedWatch struct {
	ws     *watches
	key    string
	cancel context.CancelFunc // stops the run
	ready  chan struct{}      // closed once the run's first KV watch is made or has failed
	err    error              // why it failed; written before ready is closed

	mu      sync.Mutex
	callers map[*watchCaller]struct{}
	last    lease.Event // the latest event the run delivered
	known   bool        // last is set: the key's initial state has arrived
}

// watchCaller is one Watch call.
type watchCaller struct {
	events chan lease.Event
	stop   func() bool // unregisters the caller's leave from its ctx
}

// joinWatch adds a caller to the run of key, starting one if there is none.
// The caller leaves when ctx is done.
func (ws *watches) joinWatch(ctx context.Context, key string) (*sharedWatch, *watchCaller, error) {
	h := &ws.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if ws.closed.Load() {
		return nil, nil, lease.ErrClosed
	}
	w := h.runs[key]
	if w == nil {
		var err error
		if w, err = ws.startShared(key); err != nil {
			return nil, nil, err
		}
	}
	c := &watchCaller{events: make(chan lease.Event, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.callers[c] = struct{}{}
	if w.known {
		send(c.events, w.last)
	}
	// Runs on its own goroutine, never here: ws.hub.mu is held.
	c.stop = context.AfterFunc(ctx, func() { ws.leaveWatch(w, c) })
	return w, c, nil
}

// startShared starts the run of key and makes it the one new callers of
// key join; the caller holds ws.hub.mu and adds the run's first caller
// before releasing it.
func (ws *watches) startShared(key string) (*sharedWatch, error) {
	// Count the creation among the store's goroutines, so that Close waits
	// for it; the run counts itself (follow).
	ws.mu.Lock()
	if ws.closed.Load() {
		ws.mu.Unlock()
		return nil, lease.ErrClosed
	}
	ws.goroutines.Add(1)
	ws.mu.Unlock()

	// The run lives until its last caller leaves (or the store closes).
	ctx, cancel := context.WithCancel(context.Background())
	w := &sharedWatch{ws: ws, key: key, cancel: cancel, ready: make(chan struct{}),
		callers: map[*watchCaller]struct{}{}}
	if ws.hub.runs == nil {
		ws.hub.runs = map[string]*sharedWatch{}
	}
	ws.hub.runs[key] = w
	go func() {
		defer ws.goroutines.Done()
		defer close(w.ready)
		if err := ws.follow(ctx, key, w); err != nil {
			w.err = err
			w.close() // follow does not: no run started
		}
	}()
	return w, nil
}

// leaveWatch removes c from w and closes its channel; the last caller to
// leave stops the run.
func (ws *watches) leaveWatch(w *sharedWatch, c *watchCaller) {
	h := &ws.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.callers[c]; !ok {
		return // the run has ended and closed c
	}
	delete(w.callers, c)
	close(c.events)
	if len(w.callers) == 0 {
		h.drop(w)
		w.cancel()
	}
}

// drop removes w from the runs new callers join, unless a newer run of its
// key has replaced it.
func (h *watchHub) drop(w *sharedWatch) {
	if h.runs[w.key] == w {
		delete(h.runs, w.key)
	}
}

func (w *sharedWatch) start() {}

func (w *sharedWatch) entry(e jetstream.KeyValueEntry, _ bool) { w.deliver(w.ws.event(e)) }

func (w *sharedWatch) initialDone(seen bool) {
	if !seen { // the key is empty: say so, it is its current state
		w.deliver(lease.Event{LeaseID: w.key, Kind: lease.EventFree})
	}
}

// deliver hands ev to every caller and keeps it for those who join later.
func (w *sharedWatch) deliver(ev lease.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last, w.known = ev, true
	for c := range w.callers {
		send(c.events, ev)
	}
}

// close ends w for good: no caller joins it any more, and every caller's
// channel closes.
func (w *sharedWatch) close() {
	h := &w.ws.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(w)
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.callers {
		c.stop()
		close(c.events)
	}
	clear(w.callers)
	w.cancel()
}

// awaitWatch waits, within ctx, until the first KV watch of c's run is
// made, and returns c's channel, or why the watch could not be made.
func awaitWatch(ctx context.Context, w *sharedWatch, c *watchCaller) (<-chan lease.Event, error) {
	if err := await(ctx, time.Time{}, w.ready); err != nil { // c leaves by itself (joinWatch)
		return nil, fmt.Errorf("natsstore: watch %s: %w", w.key, err)
	}
	if w.err != nil {
		return nil, w.err
	}
	return c.events, nil
}
