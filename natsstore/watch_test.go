package natsstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// watchEvents collects the events a store reports through Config.OnEvent.
type watchEvents chan natsstore.Event

func newWatchEvents() watchEvents { return make(watchEvents, 1000) }

func (r watchEvents) on(ev natsstore.Event) {
	select {
	case r <- ev:
	default: // a test that floods the watchEvents reads only the first events
	}
}

// awaitStoreEvent waits for the next event of type T, for at most 30 s (a
// hang guard).
func awaitStoreEvent[T natsstore.Event](t *testing.T, r watchEvents) T {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-r:
			if e, ok := ev.(T); ok {
				return e
			}
		case <-timeout:
			var zero T
			t.Fatalf("no %T event", zero)
		}
	}
}

// awaitBeforePoll waits for an event of kind at revision rev or later, and
// fails if a standby polling every lease.DefaultStandbyRetryInterval would
// have learned of the change first: the watch exists to beat the poll.
func awaitBeforePoll(t *testing.T, events <-chan lease.Event, kind lease.EventKind, rev uint64) lease.Event {
	t.Helper()
	poll := time.After(lease.DefaultStandbyRetryInterval)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "watch closed")
			if ev.Kind == kind && ev.Revision >= rev {
				return ev
			}
		case <-poll:
			t.Fatalf("no %v event at revision %d or later before a standby's poll", kind, rev)
		}
	}
}

// awaitClosed waits for events to close, for at most 30 s (a hang guard).
func awaitClosed(t *testing.T, events <-chan lease.Event) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the watch's channel did not close")
		}
	}
}

// watchPermissions returns the publish permissions the store needs for bucket
// without $JS.FC (flow control) and, unless withDelete, without
// $JS.API.CONSUMER.DELETE.
func watchPermissions(bucket string, withDelete bool) []string {
	p := []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO.KV_" + bucket,
		"$JS.API.STREAM.MSG.GET.KV_" + bucket,
		"$JS.API.CONSUMER.CREATE.KV_" + bucket + ".>",
		"$KV." + bucket + ".>",
	}
	if withDelete {
		p = append(p, "$JS.API.CONSUMER.DELETE.KV_"+bucket+".>")
	}
	return p
}

// Watching a key that was never written reports its state first: free, at
// revision 0.
func TestWatchReportsEmptyKey(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := s.Watch(ctx, "never-written")
	require.NoError(t, err)
	select {
	case ev := <-events:
		assert.Equal(t, lease.Event{LeaseID: "never-written", Kind: lease.EventFree}, ev)
	case <-time.After(10 * time.Second):
		t.Fatal("no first event for a key never written")
	}
	l := mustAcquire(t, s, claim("never-written", "owner-a"))
	awaitEvent(t, events, lease.EventHeld, l.Revision)
}

// Without permission for flow-control replies ($JS.FC), the server stops
// delivering to a watch after about 2 MiB of updates. The liveness check
// notices, re-creates the watch, and names the missing permission.
func TestWatchSurvivesUnansweredFlowControl(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, natstest.WithUser("admin", "a"),
		natstest.WithRestrictedUser("standby", "s", watchPermissions(natsstore.DefaultBucket, true), []string{"_INBOX.>"}))
	dial(t, srv.ClientURL(), natsstore.Config{}, natsstore.DialOptions{User: "admin", Password: "a"}) // creates the bucket
	rec := newWatchEvents()
	standby := dial(t, srv.ClientURL(), natsstore.Config{OnEvent: rec.on},
		natsstore.DialOptions{User: "standby", Password: "s"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := standby.Watch(ctx, "job")
	require.NoError(t, err)

	_, js := conn(t, srv.ClientURL(), nats.UserInfo("admin", "a"))
	kv := bucket(t, js, natsstore.DefaultBucket)
	value := []byte(strings.Repeat("x", 1024))
	var last uint64
	for range 3000 { // 3 MiB: the watch stalls after about 2
		last, err = kv.Put(ctxT(t), "job", value)
		require.NoError(t, err)
	}
	awaitEvent(t, events, lease.EventHeld, last)

	stalled := awaitStoreEvent[natsstore.WatchStalled](t, rec)
	assert.Equal(t, "job", stalled.Key)
	assert.Contains(t, stalled.Cause, "$JS.FC.KV_"+natsstore.DefaultBucket+".>")
	recovered := awaitStoreEvent[natsstore.WatchRecovered](t, rec)
	assert.Equal(t, "job", recovered.Key)
	assert.GreaterOrEqual(t, recovered.Silent, stalled.Silent)
}

// Stopping a watch never waits for its consumer to be deleted: without
// permission for $JS.API.CONSUMER.DELETE the delete waits for its timeout,
// but the channel closes at once, and Close reports the teardown that has
// not finished.
func TestWatchStopsWithoutWaitingForConsumerDelete(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, natstest.WithUser("admin", "a"),
		natstest.WithRestrictedUser("standby", "s", watchPermissions(natsstore.DefaultBucket, false), []string{"_INBOX.>"}))
	dial(t, srv.ClientURL(), natsstore.Config{}, natsstore.DialOptions{User: "admin", Password: "a"})
	s, err := natsstore.Dial(ctxT(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}, User: "standby", Password: "s"},
		natsstore.Config{CloseTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	events, err := s.Watch(ctx, "job")
	require.NoError(t, err)
	awaitEvent(t, events, lease.EventFree, 0) // the key's state: the watch works

	cancel()
	awaitClosed(t, events)
	// The consumer's delete is still waiting for its answer: the channel
	// closed before it, and Close, bounded, says so.
	err = s.Close()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not stop")
}
