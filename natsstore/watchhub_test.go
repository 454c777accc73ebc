package natsstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// consumers returns how many consumers the bucket's stream has.
func consumers(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	stream, err := js.Stream(ctxT(t), bucketStream)
	require.NoError(t, err)
	info, err := stream.Info(ctxT(t))
	require.NoError(t, err)
	return info.State.Consumers
}

// awaitConsumers waits until the bucket's stream has n consumers, for at
// most 10 s: consumers of stopped watches are deleted in the background.
func awaitConsumers(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := consumers(t, js)
		if got == n {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d consumers, want %d", got, n)
		time.Sleep(10 * time.Millisecond)
	}
}

// firstEvent returns the event already waiting on events: a call that
// joins a watch which has reported the key's state gets it before Watch
// returns.
func firstEvent(t *testing.T, events <-chan lease.Event) lease.Event {
	t.Helper()
	select {
	case ev, ok := <-events:
		require.True(t, ok, "watch closed")
		return ev
	default:
		t.Fatal("no event at once: the call did not join the key's watch")
		return lease.Event{}
	}
}

// closedWithin reports whether events closes within d, draining it.
func closedWithin(events <-chan lease.Event, d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// watchN starts n Watch calls of key on s, each with a context of its own,
// and returns their channels and cancel functions.
func watchN(t *testing.T, s *natsstore.Store, key string, n int) ([]<-chan lease.Event, []context.CancelFunc) {
	t.Helper()
	var (
		chans   []<-chan lease.Event
		cancels []context.CancelFunc
	)
	for range n {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		events, err := s.Watch(ctx, key)
		require.NoError(t, err)
		chans, cancels = append(chans, events), append(cancels, cancel)
	}
	return chans, cancels
}

// The Watch calls of one key in a store make one consumer on the server,
// whatever their number; a call of another key makes its own. When every
// call's context is cancelled, the consumers go.
func TestWatchesOfOneKeyShareOneConsumer(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	s := dial(t, srv.ClientURL(), natsstore.Config{})
	require.Equal(t, 0, consumers(t, js))

	chans, cancels := watchN(t, s, "job", 5)
	for _, events := range chans {
		awaitEvent(t, events, lease.EventFree, 0)
	}
	assert.Equal(t, 1, consumers(t, js), "5 watches of one key")
	other, cancelOther := watchN(t, s, "other", 2)
	awaitEvent(t, other[0], lease.EventFree, 0)
	assert.Equal(t, 2, consumers(t, js), "and 2 of another key")

	for _, cancel := range append(cancels, cancelOther...) {
		cancel()
	}
	for _, events := range append(chans, other...) {
		awaitClosed(t, events)
	}
	awaitConsumers(t, js, 0)
}

// Every call sees the key's state and then each change, a call that joins
// after the state was delivered included: it gets the watch's latest event
// at once.
func TestSharedWatchReportsToEveryCaller(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{})

	chans, _ := watchN(t, s, "job", 2)
	for _, events := range chans {
		assert.Equal(t, lease.Event{LeaseID: "job", Kind: lease.EventFree}, <-events)
	}
	l := mustAcquire(t, s, claim("job", "owner-a"))
	for _, events := range chans {
		ev := awaitEvent(t, events, lease.EventHeld, l.Revision)
		assert.Equal(t, "owner-a", ev.Holder.OwnerID)
	}

	late, _ := watchN(t, s, "job", 1)
	ev := firstEvent(t, late[0])
	assert.Equal(t, lease.EventHeld, ev.Kind)
	assert.Equal(t, l.Revision, ev.Revision)
	assert.Equal(t, "owner-a", ev.Holder.OwnerID)

	require.NoError(t, s.Release(ctxT(t), l))
	for _, events := range append(chans, late...) {
		awaitBeforePoll(t, events, lease.EventFree, l.Revision+1)
	}
}

// Cancelling one call closes its channel only: the others go on receiving
// from the same watch.
func TestCancelledWatchLeavesTheOthers(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	s := dial(t, srv.ClientURL(), natsstore.Config{})
	chans, cancels := watchN(t, s, "job", 3)
	for _, events := range chans {
		awaitEvent(t, events, lease.EventFree, 0)
	}

	cancels[1]()
	awaitClosed(t, chans[1])
	l := mustAcquire(t, s, claim("job", "owner-a"))
	for _, i := range []int{0, 2} {
		awaitEvent(t, chans[i], lease.EventHeld, l.Revision)
	}
	require.NoError(t, s.Release(ctxT(t), l))
	for _, i := range []int{0, 2} {
		awaitBeforePoll(t, chans[i], lease.EventFree, l.Revision+1)
	}
	assert.Equal(t, 1, consumers(t, js))
}

// When the last call of a key has left, the key's watch stops; a later
// call makes a new one, which reports the key's current state.
func TestWatchAfterTheLastCallerLeft(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	s := dial(t, srv.ClientURL(), natsstore.Config{})
	chans, cancels := watchN(t, s, "job", 2)
	for _, events := range chans {
		awaitEvent(t, events, lease.EventFree, 0)
	}
	for i, cancel := range cancels {
		cancel()
		awaitClosed(t, chans[i])
	}

	// At once, while the old watch's consumer may still be being deleted.
	l := mustAcquire(t, s, claim("job", "owner-a"))
	again, _ := watchN(t, s, "job", 1)
	ev := awaitEvent(t, again[0], lease.EventHeld, l.Revision)
	assert.Equal(t, l.Revision, ev.Revision)
	awaitConsumers(t, js, 1)
	require.NoError(t, s.Release(ctxT(t), l))
	awaitBeforePoll(t, again[0], lease.EventFree, l.Revision+1)
}

// Calls of one key joining and leaving from many goroutines at once, the
// last of a watch leaving while the next joins, each get the key's state
// and a channel that closes when they leave; no watch stays behind.
func TestWatchesJoinAndLeaveConcurrently(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	s := dial(t, srv.ClientURL(), natsstore.Config{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				ctx, cancel := context.WithCancel(context.Background())
				events, err := s.Watch(ctx, "job")
				if !assert.NoError(t, err) {
					cancel()
					return
				}
				select {
				case ev, ok := <-events:
					assert.True(t, ok, "closed before its call left")
					assert.Equal(t, lease.Event{LeaseID: "job", Kind: lease.EventFree}, ev)
				case <-time.After(10 * time.Second):
					assert.Fail(t, "no first event")
				}
				cancel()
				assert.True(t, closedWithin(events, 10*time.Second), "not closed when its call left")
			}
		})
	}
	wg.Wait()
	awaitConsumers(t, js, 0)

	again, _ := watchN(t, s, "job", 1)
	awaitEvent(t, again[0], lease.EventFree, 0)
	assert.Equal(t, 1, consumers(t, js))
}

// A shared watch that loses its consumer is reported stalled and recovered
// once, not once per call, and every call gets the key's state again.
func TestSharedWatchReportsAStallOnce(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	owner := dial(t, srv.ClientURL(), natsstore.Config{})
	l := mustAcquire(t, owner, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: 30 * time.Second})

	rec := newWatchEvents()
	watcher := dial(t, srv.ClientURL(), natsstore.Config{WatchCheckInterval: 200 * time.Millisecond, OnEvent: rec.on})
	chans, _ := watchN(t, watcher, "job", 3)
	for _, events := range chans {
		awaitEvent(t, events, lease.EventHeld, l.Revision)
	}

	require.Equal(t, 1, deleteConsumers(t, js))
	awaitStoreEvent[natsstore.WatchStalled](t, rec)
	awaitStoreEvent[natsstore.WatchRecovered](t, rec)
	for _, events := range chans {
		awaitEvent(t, events, lease.EventHeld, l.Revision) // the state again
	}
	require.NoError(t, owner.Release(ctxT(t), l))
	for _, events := range chans {
		awaitBeforePoll(t, events, lease.EventFree, l.Revision+1)
	}
	for len(rec) > 0 {
		switch ev := <-rec; ev.(type) {
		case natsstore.WatchStalled, natsstore.WatchRecovered:
			t.Fatalf("%T reported again", ev)
		}
	}
}

// Close closes the channel of every call, and later calls fail.
func TestStoreCloseClosesSharedWatches(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{})
	chans, _ := watchN(t, s, "job", 3)
	other, _ := watchN(t, s, "other", 1)
	for _, events := range append(chans, other...) {
		awaitEvent(t, events, lease.EventFree, 0)
	}

	require.NoError(t, s.Close())
	for _, events := range append(chans, other...) {
		awaitClosed(t, events)
	}
	_, err := s.Watch(context.Background(), "job")
	require.ErrorIs(t, err, lease.ErrClosed)
}
