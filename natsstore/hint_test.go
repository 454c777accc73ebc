package natsstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// metaLeader returns the server that leads JetStream's meta group.
func metaLeader(t *testing.T, c *natstest.Cluster) *natstest.Server {
	t.Helper()
	for _, s := range c.Servers {
		if s.NATS().JetStreamIsLeader() {
			return s
		}
	}
	t.Fatal("the cluster has no meta leader")
	return nil
}

// The server that leads JetStream's meta group is cut off from the other
// two, which keep the bucket's stream (its leader is one of them): writes
// and reads go on, but no consumer can be made until the two elect a meta
// leader, 4 to 9 s after they last heard from the old one. This is the
// cluster a graceful handover met 1 s after the stream leader's server was
// killed, when that server led the meta group too (chaos scenario
// graceful-after-failover). A watch whose consumer lived on the cut-off
// server falls silent and cannot be re-created meanwhile; it follows the
// key through its writes instead, and reports the release long before a
// new consumer could: a standby takes over in milliseconds, not at its
// next poll.
func TestWatchSeesReleaseWithoutMetaLeader(t *testing.T) {
	t.Parallel()
	c, p := natstest.StartPartitionedCluster(t, 3)
	meta := metaLeader(t, c)
	others := slices.DeleteFunc(slices.Clone(c.Servers), func(s *natstest.Server) bool { return s == meta })
	home := others[0]
	nc, js := conn(t, home.ClientURL())
	cfg := natsstore.Config{Replicas: 3}
	owner := dial(t, home.ClientURL(), cfg)
	l := mustAcquire(t, owner, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: 30 * time.Second})
	moveStreamLeader(t, nc, c, others[1])

	rec := newWatchEvents()
	wcfg := cfg
	wcfg.WatchCheckInterval = 250 * time.Millisecond
	wcfg.OnEvent = rec.on
	wcfg.CloseTimeout = 100 * time.Millisecond
	watcher, err := natsstore.Dial(ctxT(t), natsstore.DialOptions{URLs: []string{home.ClientURL()},
		ReconnectWait: 20 * time.Millisecond}, wcfg)
	require.NoError(t, err)
	// The lost watch's consumer is deleted through the meta leader: Close,
	// bounded, may still be waiting for that answer.
	t.Cleanup(func() { _ = watcher.Close() })
	events, host := watchHostedAway(t, watcher, js, c, others...)
	require.Equal(t, meta, host)
	awaitEvent(t, events, lease.EventHeld, l.Revision)

	p.Isolate(meta)
	cut := time.Now()
	stalled := awaitStoreEvent[natsstore.WatchStalled](t, rec)
	assert.Equal(t, "job", stalled.Key)
	require.NoError(t, owner.Release(ctxT(t), l))
	released := time.Now()
	awaitEvent(t, events, lease.EventFree, l.Revision+1)
	took := time.Since(released)
	require.Less(t, took, time.Second, "the release reached the watcher only %v after it was made", took)
	for _, s := range others {
		require.False(t, s.NATS().JetStreamIsLeader(), "%s was elected meta leader %v after the cut: the test "+
			"saw no window without one", s.Name(), time.Since(cut))
	}
	t.Logf("the release reached the watcher %v after it was made, %v after the cut, with no meta leader", took,
		time.Since(cut).Round(time.Millisecond))

	// The watch comes back once the meta group has a leader again.
	p.Heal()
	awaitStoreEvent[natsstore.WatchRecovered](t, rec)
	l2 := mustAcquire(t, owner, lease.Claim{LeaseID: "job", OwnerID: "owner-b", Term: "term-b", TTL: 30 * time.Second})
	awaitEvent(t, events, lease.EventHeld, l2.Revision)
}

// The account may have one consumer: once a watch's consumer is deleted and
// another takes its place, no new watch can be made, however often the
// store tries. The watch follows its keys through their writes meanwhile,
// for a Watch as for a WatchPrefix, and is made again once it can be.
func TestWatchFollowsWritesWhileNoConsumerCanBeMade(t *testing.T) {
	t.Parallel()
	for _, prefix := range []bool{false, true} {
		name := "Watch"
		if prefix {
			name = "WatchPrefix"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t, natstest.WithConfig(t,
				`accounts { A: { jetstream: { max_consumers: 1 }, users: [{user: a, password: a}] } }`))
			user := natsstore.DialOptions{User: "a", Password: "a"}
			owner := dial(t, srv.ClientURL(), natsstore.Config{}, user)
			l := mustAcquire(t, owner, lease.Claim{LeaseID: "jobs.a", OwnerID: "owner-a", Term: "term-a", TTL: time.Minute})

			rec := newWatchEvents()
			watcher := dial(t, srv.ClientURL(), natsstore.Config{WatchCheckInterval: 200 * time.Millisecond,
				OnEvent: rec.on}, user)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var events <-chan lease.Event
			if prefix {
				current, changes, err := watcher.WatchPrefix(ctx, "jobs.")
				require.NoError(t, err)
				require.Len(t, current, 1)
				events = changes
			} else {
				var err error
				events, err = watcher.Watch(ctx, "jobs.a")
				require.NoError(t, err)
				awaitEvent(t, events, lease.EventHeld, l.Revision)
			}

			_, js := conn(t, srv.ClientURL(), nats.UserInfo("a", "a"))
			require.Equal(t, 1, deleteConsumers(t, js))
			placeholder, err := js.CreateConsumer(ctxT(t), bucketStream, jetstream.ConsumerConfig{Durable: "placeholder"})
			require.NoError(t, err)
			stalled := awaitStoreEvent[natsstore.WatchStalled](t, rec)
			assert.Contains(t, stalled.Cause, "heartbeat")

			// A write the stream refuses is published on the key's subject
			// all the same: the watch reports only what a read then shows,
			// never the write it saw (here a release nobody made).
			forged := &nats.Msg{Subject: "$KV." + natsstore.DefaultBucket + ".jobs.a", Header: nats.Header{
				"KV-Operation": []string{"DEL"}, jetstream.ExpectedLastSubjSeqHeader: []string{"1"}}}
			_, err = js.PublishMsg(ctxT(t), forged)
			require.Error(t, err, "the stream refuses it")
			select {
			case ev := <-events:
				t.Fatalf("an event from a refused write: %+v", ev)
			case <-time.After(300 * time.Millisecond): // past every read a seen write makes (hintRetries)
			}

			l = renewAgain(t, owner, l)
			awaitEvent(t, events, lease.EventHeld, l.Revision)
			require.NoError(t, owner.Release(ctxT(t), l))
			ev := awaitEvent(t, events, lease.EventFree, l.Revision+1)
			assert.Equal(t, "jobs.a", ev.LeaseID)
			for len(rec) > 0 {
				_, recovered := (<-rec).(natsstore.WatchRecovered)
				require.False(t, recovered, "a watch was made with the consumer limit reached")
			}

			require.NoError(t, js.DeleteConsumer(ctxT(t), bucketStream, placeholder.CachedInfo().Name))
			awaitStoreEvent[natsstore.WatchRecovered](t, rec)
			l2 := mustAcquire(t, owner, lease.Claim{LeaseID: "jobs.a", OwnerID: "owner-b", Term: "term-b", TTL: time.Minute})
			awaitEvent(t, events, lease.EventHeld, l2.Revision)
		})
	}
}
