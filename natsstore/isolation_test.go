package natsstore_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
	assert.GreaterOrEqual(t, ev.Unavailable, natsstore.DefaultIsolationTimeout)
}
