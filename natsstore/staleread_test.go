package natsstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// A stream leader cut off from its cluster goes on answering reads from
// what it has until it notices, up to 20 s later, that it lost its quorum;
// the majority elects a new leader after 4 to 9 s. A standby connected to
// the isolated leader must not be told that the lease is held by an owner
// who has since released it on the majority side: the store refuses to act
// on a read that the stream leader cannot show to be current, and reports
// lease.ErrUnavailable instead.
func TestIsolatedStreamLeaderReadsAreNotTrusted(t *testing.T) {
	t.Parallel()
	c, p := natstest.StartPartitionedCluster(t, 3)
	dial(t, c.ClientURL(), natsstore.Config{Replicas: 3}) // creates the bucket
	leader := c.StreamLeader("$G", bucketStream)
	require.NotNil(t, leader)
	other := serverOtherThan(c, leader)
	holder := dial(t, other.ClientURL(), natsstore.Config{Replicas: 3, IsolationTimeout: -1},
		natsstore.DialOptions{Name: "holder"})
	standby := dial(t, leader.ClientURL(), natsstore.Config{Replicas: 3, IsolationTimeout: -1},
		natsstore.DialOptions{Name: "standby"})
	require.Same(t, leader, serverOf(t, c, "standby"))

	l := mustAcquire(t, holder, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: time.Minute})
	b := lease.Claim{LeaseID: "job", OwnerID: "owner-b", Term: "term-b", TTL: time.Minute}
	a, err := standby.Acquire(ctxT(t), b)
	require.NoError(t, err)
	require.False(t, a.Acquired)
	require.Equal(t, "term-a", a.Holder.Term)

	p.Isolate(leader)
	released := time.Now().Add(45 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := holder.Release(ctx, l)
		cancel()
		if err == nil || errors.Is(err, lease.ErrLost) {
			break // ErrLost: an earlier call's release, refused by the isolated leader, landed through the new one
		}
		require.ErrorIs(t, err, lease.ErrUnavailable)
		require.True(t, time.Now().Before(released), "the release still fails: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
	require.True(t, leader.NATS().JetStreamIsStreamLeader("$G", bucketStream),
		"the isolated server still believes it leads the stream")

	// The release returned: every read that follows must see it, or fail.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	a, err = standby.Acquire(ctx, b)
	if err == nil {
		assert.NotEqual(t, "term-a", a.Holder.Term, "a stale read: the standby was told the released lease is held")
	} else {
		assert.ErrorIs(t, err, lease.ErrUnavailable)
		t.Log(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	o, err := standby.Read(ctx, "job")
	if err == nil {
		assert.False(t, o.Held && o.Holder.Term == "term-a", "a stale read: the lease reads as held by its former owner")
	} else {
		assert.ErrorIs(t, err, lease.ErrUnavailable)
	}
}

// A store that saw a revision on the majority side and then reconnects to
// the stream leader cut off from it reads an older last revision there: the
// stale leader's, not a server that lost acknowledged writes. The store must
// not stop (SequenceRegression) for it; it reports the bucket unavailable
// until the leader steps down, and goes on working once the cluster heals.
func TestIsolatedStreamLeaderIsNoSequenceRegression(t *testing.T) {
	t.Parallel()
	c, p := natstest.StartPartitionedCluster(t, 3)
	dial(t, c.ClientURL(), natsstore.Config{Replicas: 3}) // creates the bucket
	leader := c.StreamLeader("$G", bucketStream)
	require.NotNil(t, leader)
	other := serverOtherThan(c, leader)
	holder := dial(t, other.ClientURL(), natsstore.Config{Replicas: 3, IsolationTimeout: -1},
		natsstore.DialOptions{Name: "holder"})
	proxy := natstest.StartProxy(t, other.ClientURL())
	nc, _ := conn(t, proxy.URL(), nats.IgnoreDiscoveredServers())
	rec := newWatchEvents()
	standby, err := natsstore.NewConn(ctxT(t), nc, natsstore.Config{Replicas: 3, OnEvent: rec.on})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, standby.Close()) })

	l := mustAcquire(t, holder, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: time.Minute})
	p.Isolate(leader)
	renewAgain(t, holder, l) // on the majority side, at a revision the isolated leader never sees
	b := lease.Claim{LeaseID: "job", OwnerID: "owner-b", Term: "term-b", TTL: time.Minute}
	require.Eventually(t, func() bool {
		a, err := standby.Acquire(ctxT(t), b)
		return err == nil && !a.Acquired
	}, 30*time.Second, 20*time.Millisecond, "the standby reads the majority's state")

	proxy.Retarget(leader.ClientURL())
	proxy.Cut()
	require.Eventually(t, func() bool { return nc.IsConnected() && nc.ConnectedServerName() == leader.Name() },
		10*time.Second, 10*time.Millisecond, "the standby reconnects to the isolated leader")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err = standby.Check(ctx)
	assert.NotErrorIs(t, err, lease.ErrStoreConfig, "a stale leader is no sequence regression")
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = standby.Acquire(ctx, b)
	assert.ErrorIs(t, err, lease.ErrUnavailable)
	assert.NotErrorIs(t, err, lease.ErrStoreConfig, "a stale leader is no sequence regression")
	assert.NoError(t, standby.Err())
}

// While the majority elects a new stream leader (4 to 9 s after it last
// heard from the old one), the stream has no leader and every write finds
// no responder. One Renew call whose deadline outlasts the election lands
// its renewal once the new leader is there: the call keeps writing, instead
// of failing at the first refusal and leaving the next attempt to its
// caller's cadence.
func TestRenewOutlastsAStreamLeaderElection(t *testing.T) {
	t.Parallel()
	c, p := natstest.StartPartitionedCluster(t, 3)
	dial(t, c.ClientURL(), natsstore.Config{Replicas: 3}) // creates the bucket
	leader := c.StreamLeader("$G", bucketStream)
	require.NotNil(t, leader)
	other := serverOtherThan(c, leader)
	holder := dial(t, other.ClientURL(), natsstore.Config{Replicas: 3, IsolationTimeout: -1},
		natsstore.DialOptions{Name: "holder"})
	l := mustAcquire(t, holder, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: time.Minute})

	p.Isolate(leader)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	renewed, err := holder.Renew(ctx, l)
	require.NoError(t, err, "one call rides out the election")
	assert.Equal(t, l.Token, renewed.Token)
	assert.Greater(t, renewed.Revision, l.Revision)
}

// A read sent while the bucket's stream elects a leader is dropped as a
// write is: the store asks again, within the call, and has its answer soon
// after the new leader is there, instead of waiting out its deadline. (A
// standby's Acquire reads so; it used to miss a release its watch reported
// meanwhile.)
func TestReadOutlastsAStreamLeaderElection(t *testing.T) {
	t.Parallel()
	c, p := natstest.StartPartitionedCluster(t, 3)
	holder := dial(t, c.ClientURL(), natsstore.Config{Replicas: 3})
	l := mustAcquire(t, holder, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: time.Minute})
	leader := c.StreamLeader("$G", bucketStream)
	require.NotNil(t, leader)
	other := serverOtherThan(c, leader)
	reader := dial(t, other.ClientURL(), natsstore.Config{Replicas: 3, Timeout: time.Minute, IsolationTimeout: -1},
		natsstore.DialOptions{Name: "reader"})

	p.Isolate(leader)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	begin := time.Now()
	o, err := reader.Read(ctx, "job")
	require.NoError(t, err, "one call rides out the election")
	assert.True(t, o.Held)
	assert.Equal(t, "owner-a", o.Holder.OwnerID)
	assert.Equal(t, l.Token, o.Holder.Token)
	// An election takes 4 to 9 s: far less than the call's minute.
	assert.Less(t, time.Since(begin), 30*time.Second)
}

// serverOtherThan returns a server of c other than not.
func serverOtherThan(c *natstest.Cluster, not *natstest.Server) *natstest.Server {
	for _, s := range c.Servers {
		if s != not {
			return s
		}
	}
	return nil
}
