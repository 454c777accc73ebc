package natsstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// serverOf returns the server the client named name is connected to.
func serverOf(t *testing.T, c *natstest.Cluster, name string) *natstest.Server {
	t.Helper()
	for _, s := range c.Servers {
		srv := s.NATS()
		if srv == nil {
			continue
		}
		z, err := srv.Connz(&server.ConnzOptions{})
		require.NoError(t, err)
		for _, ci := range z.Conns {
			if ci.Name == name {
				return s
			}
		}
	}
	t.Fatalf("no server has a client named %q", name)
	return nil
}

// A holder whose server is cut off from the rest of its cluster keeps its
// connection, but JetStream no longer answers through it. The store (its
// connection made by Dial) moves to another server, and the holder renews,
// and so keeps leading, on the majority side while the isolated server still
// runs.
func TestIsolatedHolderMovesToMajority(t *testing.T) {
	t.Parallel()
	c, p := natstest.StartPartitionedCluster(t, 3)
	rec := newWatchEvents()
	holder := dial(t, c.ClientURL(), natsstore.Config{Replicas: 3, OnEvent: rec.on},
		natsstore.DialOptions{Name: "holder"})
	l := mustAcquire(t, holder, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: time.Minute})
	home := serverOf(t, c, "holder")

	p.Isolate(home)
	renewed := renewAgain(t, holder, l)
	assert.Equal(t, l.Token, renewed.Token, "the same tenure goes on")
	assert.True(t, home.Running(), "the isolated server still runs")
	assert.NotSame(t, home, serverOf(t, c, "holder"), "the holder left the isolated server")
	ev := awaitStoreEvent[natsstore.ServerIsolated](t, rec)
	assert.Equal(t, home.ClientURL(), ev.Server)
	if strings.Contains(ev.Reason, "has not heard from a majority of its replicas") {
		// The holder's server led the stream (TestCutOffStreamLeaderIsLeftEarly).
		assert.GreaterOrEqual(t, ev.Unavailable, natsstore.DefaultIsolationTimeout/4)
	} else {
		assert.GreaterOrEqual(t, ev.Unavailable, natsstore.DefaultIsolationTimeout)
	}
}

// A holder on the server that leads the bucket's stream when that server is
// cut off from the rest of its cluster. The probe, answered by that leader,
// shows a leader that has not heard from a majority of its replicas: the
// only leader this server reaches is on the minority side, so the store
// moves once its requests have failed for a quarter of IsolationTimeout,
// not after the whole timeout, which no answer or no leader still needs (a
// stream electing a new leader looks the same from every server). Before,
// it probed only after the whole timeout: at least 12 s here. Holders that
// a move during the stream's election had taken to the cut-off leader sat
// there for twice the timeout (chaos stream-leader-partition).
func TestCutOffStreamLeaderIsLeftEarly(t *testing.T) {
	t.Parallel()
	const bound = 12 * time.Second
	c, p := natstest.StartPartitionedCluster(t, 3)
	dial(t, c.ClientURL(), natsstore.Config{Replicas: 3}) // creates the bucket
	leader := c.StreamLeader("$G", bucketStream)
	require.NotNil(t, leader)
	type isolated struct {
		ev natsstore.ServerIsolated
		at time.Time
	}
	moves := make(chan isolated, 10)
	onEvent := func(ev natsstore.Event) {
		if e, ok := ev.(natsstore.ServerIsolated); ok {
			select {
			case moves <- isolated{e, time.Now()}:
			default:
			}
		}
	}
	urls := []string{leader.ClientURL()} // first, and the others in order
	for _, s := range c.Servers {
		if s != leader {
			urls = append(urls, s.ClientURL())
		}
	}
	nc, _ := conn(t, strings.Join(urls, ","), nats.DontRandomize(), nats.Name("holder"))
	holder, err := natsstore.NewConn(ctxT(t), nc, natsstore.Config{Replicas: 3, IsolationTimeout: bound,
		OnEvent: onEvent})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, holder.Close()) })
	require.Same(t, leader, serverOf(t, c, "holder"))
	l := mustAcquire(t, holder, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-a", TTL: time.Minute})

	cut := time.Now()
	p.Isolate(leader)
	renewed := renewAgain(t, holder, l)
	assert.Equal(t, l.Token, renewed.Token, "the same tenure goes on")
	assert.NotSame(t, leader, serverOf(t, c, "holder"), "the holder left the cut-off leader's server")
	var m isolated
	select {
	case m = <-moves:
	default:
		t.Fatal("no ServerIsolated event")
	}
	assert.Equal(t, leader.ClientURL(), m.ev.Server)
	assert.Contains(t, m.ev.Reason, "has not heard from a majority of its replicas")
	// The requests fail from the cut; the check probes once they have
	// failed for bound/4 (at its first or second tick, bound/4 apart), when
	// the leader has not heard from its replicas for 3 s already.
	assert.Less(t, m.at.Sub(cut), bound*3/4, "the holder left %v after the cut", m.at.Sub(cut))
	t.Logf("left the cut-off leader %v after the cut (requests failing for %v)", m.at.Sub(cut), m.ev.Unavailable)
}
