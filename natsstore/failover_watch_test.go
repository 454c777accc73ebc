package natsstore_test

import (
	"context"
	"fmt"
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

const bucketStream = "KV_" + natsstore.DefaultBucket

// consumerHosts returns the servers that host the consumers of the bucket's
// stream (the watches' ordered consumers).
func consumerHosts(t *testing.T, js jetstream.JetStream, c *natstest.Cluster) []*natstest.Server {
	t.Helper()
	stream, err := js.Stream(ctxT(t), bucketStream)
	require.NoError(t, err)
	var hosts []*natstest.Server
	infos := stream.ListConsumers(ctxT(t))
	for ci := range infos.Info() {
		for _, s := range c.Servers {
			if ci.Cluster != nil && ci.Cluster.Leader == s.Name() {
				hosts = append(hosts, s)
			}
		}
	}
	require.NoError(t, infos.Err())
	return hosts
}

// moveStreamLeader makes to the leader of the bucket's stream.
func moveStreamLeader(t *testing.T, nc *nats.Conn, c *natstest.Cluster, to *natstest.Server) {
	t.Helper()
	body := fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, to.Name())
	require.Eventually(t, func() bool {
		if c.StreamLeader("$G", bucketStream) == to {
			return true
		}
		_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+bucketStream, body, 2*time.Second)
		return false
	}, 30*time.Second, 100*time.Millisecond, "the stream leader did not move to %s", to.Name())
}

// watchHostedAway watches "job" through s until the watch's consumer lives
// on a server other than the ones in avoid (the server places it at random,
// and the stream's leader may move), and returns the watch and that server.
func watchHostedAway(t *testing.T, s *natsstore.Store, js jetstream.JetStream, c *natstest.Cluster,
	avoid ...*natstest.Server) (<-chan lease.Event, *natstest.Server) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 50, "every consumer landed on a server to avoid")
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		events, err := s.Watch(ctx, "job")
		require.NoError(t, err)
		hosts := consumerHosts(t, js, c)
		require.Len(t, hosts, 1)
		if !slices.Contains(avoid, hosts[0]) {
			return events, hosts[0]
		}
		cancel()
		require.Eventually(t, func() bool { return len(consumerHosts(t, js, c)) == 0 }, 10*time.Second,
			10*time.Millisecond, "the watch's consumer was not deleted")
	}
}

// renewAgain renews l until it succeeds, each attempt bounded like a
// watchdog's, for at most 45 s (a hang guard).
func renewAgain(t *testing.T, s *natsstore.Store, l lease.Lease) lease.Lease {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := s.Renew(ctx, l)
		cancel()
		require.NotErrorIs(t, err, lease.ErrLost)
		if err == nil {
			return r
		}
		require.True(t, time.Now().Before(deadline), "renewals still fail: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
}

// The stream leader's server stops. A watcher connected to another server,
// whose watch's consumer lived on the stopped one, keeps its connection:
// only its checks (its consumer's missing heartbeats, a read of the key)
// can tell that the watch is dead. A watcher
// connected to the stopped server re-creates its watch after reconnecting.
// Both see a release made right after the stream recovers before a
// standby's poll would.
func TestWatchFollowsStreamLeaderStop(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	nc, js := conn(t, c.ClientURL())
	cfg := natsstore.Config{Replicas: 3}
	owner := dial(t, c.ClientURL(), cfg)
	l := mustAcquire(t, owner, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: 30 * time.Second})

	// The first watcher's watch is made again until its consumer lives on
	// another server than the watcher's (the server places it at random).
	home := c.Servers[0]
	rec := newWatchEvents()
	stayCfg := cfg
	stayCfg.WatchCheckInterval = 250 * time.Millisecond
	stayCfg.OnEvent = rec.on
	stay := dial(t, home.ClientURL(), stayCfg)
	stayEvents, host := watchHostedAway(t, stay, js, c, home)
	awaitEvent(t, stayEvents, lease.EventHeld, l.Revision)

	moving := dial(t, host.ClientURL(), cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	movingEvents, err := moving.Watch(ctx, "job")
	require.NoError(t, err)
	awaitEvent(t, movingEvents, lease.EventHeld, l.Revision)

	moveStreamLeader(t, nc, c, host)
	host.Shutdown()
	l = renewAgain(t, owner, l)
	require.NoError(t, owner.Release(ctxT(t), l))
	awaitBeforePoll(t, stayEvents, lease.EventFree, l.Revision+1)
	awaitBeforePoll(t, movingEvents, lease.EventFree, l.Revision+1)

	stalled := awaitStoreEvent[natsstore.WatchStalled](t, rec)
	assert.Equal(t, "job", stalled.Key)
	assert.Contains(t, stalled.Cause, "consumer")
	awaitStoreEvent[natsstore.WatchRecovered](t, rec)
}

// The watcher's server is cut off from the rest of the cluster, and the
// watcher's connection drops: it reconnects to the same server, where the
// creation of the watch's consumer, and the delete of the old one, go
// unanswered. Once the partition heals the watch is back at once: each
// creation attempt is bounded briefly (not by Config.Timeout), and no attempt
// waits for the old consumer's delete, which is still waiting for its answer
// when the watcher sees a release made after the heal.
func TestWatchReturnsWhenPartitionHeals(t *testing.T) {
	t.Parallel()
	c, p := natstest.StartPartitionedCluster(t, 3)
	owner := dial(t, c.ClientURL(), natsstore.Config{Replicas: 3})
	l := mustAcquire(t, owner, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: 30 * time.Second})

	// The isolated server leads neither JetStream nor the stream, so that
	// the other two go on without it.
	var isolated *natstest.Server
	for _, s := range c.Servers {
		if !s.NATS().JetStreamIsLeader() && c.StreamLeader("$G", bucketStream) != s {
			isolated = s
		}
	}
	require.NotNil(t, isolated)
	proxy := natstest.StartProxy(t, isolated.ClientURL())
	nc, err := nats.Connect(proxy.URL(), nats.IgnoreDiscoveredServers(), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond), nats.ReconnectBufSize(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	rec := newWatchEvents()
	watcher, err := natsstore.NewConn(ctxT(t), nc, natsstore.Config{Replicas: 3, Timeout: 30 * time.Second,
		WatchCheckInterval: 250 * time.Millisecond, CloseTimeout: 100 * time.Millisecond, OnEvent: rec.on})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := watcher.Watch(ctx, "job")
	require.NoError(t, err)
	awaitEvent(t, events, lease.EventHeld, l.Revision)

	p.Isolate(isolated)
	proxy.Cut()
	stalled := awaitStoreEvent[natsstore.WatchStalled](t, rec)
	assert.Equal(t, "job", stalled.Key)
	assert.Contains(t, stalled.Cause, "did not answer")

	p.Heal()
	l = renewAgain(t, owner, l)
	require.NoError(t, owner.Release(ctxT(t), l))
	awaitBeforePoll(t, events, lease.EventFree, l.Revision+1)
	awaitStoreEvent[natsstore.WatchRecovered](t, rec)

	// The old consumer's delete, sent while the server was cut off, is
	// still waiting for its answer: Close, bounded, reports it.
	err = watcher.Close()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not stop")
}
