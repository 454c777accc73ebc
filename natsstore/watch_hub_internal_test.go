package natsstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
)

// gatedKV holds back the creation of watches until it is opened, and
// counts the creations.
type gatedKV struct {
	keyValue
	started chan struct{} // a creation began
	gaveUp  chan struct{} // a creation was abandoned: its ctx ended

	mu    sync.Mutex
	calls int
	gate  chan struct{} // creations wait until it is closed; nil: they do not
	err   error         // what creations return once through the gate
}

func (g *gatedKV) Watch(ctx context.Context, filter string) (jetstream.KeyWatcher, error) {
	g.mu.Lock()
	g.calls++
	gate, err := g.gate, g.err
	g.mu.Unlock()
	g.started <- struct{}{}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			g.gaveUp <- struct{}{}
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return g.keyValue.Watch(ctx, filter)
}

// hold makes creations wait, and fail with err once let through.
func (g *gatedKV) hold(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate, g.err = make(chan struct{}), err
}

// open lets the waiting creations through, and the later ones at once.
func (g *gatedKV) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
	g.gate = nil
}

func (g *gatedKV) created() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// gatedStore opens a store on a server of its own, its watch creations
// held back by the returned gatedKV. Its timeout, which bounds a creation,
// is longer than the tests' waits.
func gatedStore(t *testing.T) (*Store, *gatedKV) {
	t.Helper()
	srv := natstest.Start(t)
	s, err := Dial(t.Context(), DialOptions{URLs: []string{srv.ClientURL()}}, Config{Timeout: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	g := &gatedKV{keyValue: s.kv, started: make(chan struct{}, 100), gaveUp: make(chan struct{}, 100)}
	s.kv = g
	return s, g
}

// watchResult is what a Watch call returned.
type watchResult struct {
	events <-chan lease.Event
	err    error
}

// watchAsync calls s.Watch in the background.
func watchAsync(s *Store, ctx context.Context, key string) <-chan watchResult {
	res := make(chan watchResult, 1)
	go func() {
		events, err := s.Watch(ctx, key)
		res <- watchResult{events, err}
	}()
	return res
}

// awaitSignal waits for a signal on ch, for at most 10 s.
func awaitSignal[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal(what)
		var zero T
		return zero
	}
}

// awaitCallers waits until n calls have joined the watch of key, for at
// most 10 s.
func awaitCallers(t *testing.T, s *Store, key string, n int) {
	t.Helper()
	count := func() int {
		s.watches.hub.mu.Lock()
		defer s.watches.hub.mu.Unlock()
		w := s.watches.hub.runs[key]
		if w == nil {
			return 0
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.callers)
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() != n {
		require.True(t, time.Now().Before(deadline), "%d calls joined the watch, want %d", count(), n)
		time.Sleep(time.Millisecond)
	}
}

// awaitFree waits for the first event of a key never written.
func awaitFree(t *testing.T, events <-chan lease.Event, key string) {
	t.Helper()
	assert.Equal(t, lease.Event{LeaseID: key, Kind: lease.EventFree}, awaitSignal(t, events, "no first event"))
}

// Calls made while the key's watch is being made wait for that one
// creation; one whose ctx ends meanwhile, the first caller's included,
// returns at once, and the creation goes on for the others.
func TestWatchCallsWaitForOneCreation(t *testing.T) {
	t.Parallel()
	s, g := gatedStore(t)
	g.hold(nil)
	ctxA, cancelA := context.WithCancel(t.Context())
	a := watchAsync(s, ctxA, "job")
	awaitSignal(t, g.started, "no creation")
	b := watchAsync(s, t.Context(), "job")
	ctxC, cancelC := context.WithCancel(t.Context())
	c := watchAsync(s, ctxC, "job")
	awaitCallers(t, s, "job", 3)

	cancelA()
	require.ErrorIs(t, awaitSignal(t, a, "the first caller did not return when its ctx ended").err, context.Canceled)
	cancelC()
	require.ErrorIs(t, awaitSignal(t, c, "a joined caller did not return when its ctx ended").err, context.Canceled)
	select {
	case <-g.gaveUp:
		t.Fatal("the creation was abandoned while a caller waits for it")
	default:
	}

	g.open()
	res := awaitSignal(t, b, "the waiting caller did not return")
	require.NoError(t, res.err)
	awaitFree(t, res.events, "job")
	assert.Equal(t, 1, g.created())
}

// An error of the creation reaches every call waiting for it; the next
// call makes a new watch.
func TestWatchCreationErrorReachesEveryCaller(t *testing.T) {
	t.Parallel()
	s, g := gatedStore(t)
	boom := errors.New("boom")
	g.hold(boom)
	a := watchAsync(s, t.Context(), "job")
	awaitSignal(t, g.started, "no creation")
	b := watchAsync(s, t.Context(), "job")
	awaitCallers(t, s, "job", 2)

	g.open()
	for _, res := range []<-chan watchResult{a, b} {
		err := awaitSignal(t, res, "a caller did not return").err
		require.ErrorIs(t, err, boom)
		require.ErrorIs(t, err, lease.ErrUnavailable)
	}

	g.hold(nil)
	g.open()
	events, err := s.Watch(t.Context(), "job")
	require.NoError(t, err)
	awaitFree(t, events, "job")
	assert.Equal(t, 2, g.created())
}

// A creation is abandoned when every call waiting for it has left; the
// next call makes a new watch.
func TestWatchCreationAbandonedWhenItsCallersLeave(t *testing.T) {
	t.Parallel()
	s, g := gatedStore(t)
	g.hold(nil)
	ctx, cancel := context.WithCancel(t.Context())
	a := watchAsync(s, ctx, "job")
	awaitSignal(t, g.started, "no creation")
	awaitCallers(t, s, "job", 1)

	cancel()
	require.ErrorIs(t, awaitSignal(t, a, "the caller did not return when its ctx ended").err, context.Canceled)
	awaitSignal(t, g.gaveUp, "the creation went on without callers")

	g.open()
	events, err := s.Watch(t.Context(), "job")
	require.NoError(t, err)
	awaitFree(t, events, "job")
	assert.Equal(t, 2, g.created())
}
