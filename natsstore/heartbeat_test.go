package natsstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// deleteConsumers deletes every consumer of the bucket's stream, as an
// operator's `nats consumer rm` would, and returns how many there were.
func deleteConsumers(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	stream, err := js.Stream(ctxT(t), bucketStream)
	require.NoError(t, err)
	names := stream.ConsumerNames(ctxT(t))
	n := 0
	for name := range names.Name() {
		require.NoError(t, stream.DeleteConsumer(ctxT(t), name))
		n++
	}
	require.NoError(t, names.Err())
	return n
}

// A watch whose consumer is gone receives nothing, not even a heartbeat.
// The store notices by the silence alone, while the key does not change
// (a check that reads the key's revision cannot tell), reports it, and
// makes a new watch, which reports the key's state again and then follows
// it.
func TestWatchNoticesALostConsumerByItsHeartbeats(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	owner := dial(t, srv.ClientURL(), natsstore.Config{})
	l := mustAcquire(t, owner, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: 30 * time.Second})

	rec := newWatchEvents()
	watcher := dial(t, srv.ClientURL(), natsstore.Config{WatchCheckInterval: 200 * time.Millisecond, OnEvent: rec.on})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := watcher.Watch(ctx, "job")
	require.NoError(t, err)
	awaitEvent(t, events, lease.EventHeld, l.Revision)

	require.Equal(t, 1, deleteConsumers(t, js))
	stalled := awaitStoreEvent[natsstore.WatchStalled](t, rec)
	assert.Equal(t, "job", stalled.Key)
	assert.Contains(t, stalled.Cause, "heartbeat")
	assert.GreaterOrEqual(t, stalled.Silent, 200*time.Millisecond)
	awaitStoreEvent[natsstore.WatchRecovered](t, rec)
	// The new watch reports the unchanged key again.
	awaitEvent(t, events, lease.EventHeld, l.Revision)

	require.NoError(t, owner.Release(ctxT(t), l))
	awaitBeforePoll(t, events, lease.EventFree, l.Revision+1)
}

// A watch of an idle key lives on: its consumer's heartbeats keep it, and
// the store neither reports it nor makes it again.
func TestWatchOfAnIdleKeyIsKeptByHeartbeats(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	rec := newWatchEvents()
	watcher := dial(t, srv.ClientURL(), natsstore.Config{WatchCheckInterval: 100 * time.Millisecond, OnEvent: rec.on})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := watcher.Watch(ctx, "idle")
	require.NoError(t, err)
	first := <-events
	require.Equal(t, lease.EventFree, first.Kind)

	stream, err := js.Stream(ctxT(t), bucketStream)
	require.NoError(t, err)
	names := func() []string {
		var all []string
		list := stream.ConsumerNames(ctxT(t))
		for n := range list.Name() {
			all = append(all, n)
		}
		require.NoError(t, list.Err())
		return all
	}
	before := names()
	require.Len(t, before, 1)
	// Twenty heartbeat intervals (50 ms each) with nothing to deliver.
	time.Sleep(time.Second)
	assert.Equal(t, before, names(), "the watch's consumer was replaced")
	for {
		select {
		case ev := <-rec:
			switch ev.(type) {
			case natsstore.WatchStalled, natsstore.WatchRecovered:
				t.Fatalf("the idle watch was reported: %T %+v", ev, ev)
			}
			continue
		case ev := <-events:
			t.Fatalf("unexpected watch event %+v", ev)
		default:
		}
		return
	}
}

// The server that hosts a watch's consumer stops, and the stream keeps its
// leader: the watcher, connected elsewhere, keeps its connection, and its
// consumer is gone. The store notices by the missing heartbeats, before the
// key changes, and the new watch sees the release.
func TestWatchNoticesItsConsumersServerStop(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	_, js := conn(t, c.ClientURL())
	cfg := natsstore.Config{Replicas: 3}
	owner := dial(t, c.ClientURL(), cfg)
	l := mustAcquire(t, owner, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: 30 * time.Second})

	rec := newWatchEvents()
	home := c.Servers[0]
	watchCfg := cfg
	watchCfg.WatchCheckInterval = 250 * time.Millisecond
	watchCfg.OnEvent = rec.on
	watcher := dial(t, home.ClientURL(), watchCfg)
	// The watch's consumer must live on a server that neither is the
	// watcher's nor leads the stream.
	events, host := watchHostedAway(t, watcher, js, c, home, c.StreamLeader("$G", bucketStream))
	awaitEvent(t, events, lease.EventHeld, l.Revision)

	host.Shutdown()
	stalled := awaitStoreEvent[natsstore.WatchStalled](t, rec)
	assert.Contains(t, stalled.Cause, "heartbeat")
	awaitStoreEvent[natsstore.WatchRecovered](t, rec)
	awaitEvent(t, events, lease.EventHeld, l.Revision)

	require.NoError(t, owner.Release(ctxT(t), l))
	awaitBeforePoll(t, events, lease.EventFree, l.Revision+1)
}
