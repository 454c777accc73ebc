package grains_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/grains"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// denyUser adds the user with every permission but publishing to deny.
func denyUser(user string, deny ...string) []natstest.Option {
	return []natstest.Option{
		natstest.WithRestrictedUser(user, "p", []string{">"}, []string{">"}),
		natstest.WithOptions(func(o *server.Options) {
			for _, u := range o.Users {
				if u.Username == user {
					u.Permissions.Publish.Deny = deny
				}
			}
		}),
	}
}

// TestBucketWithoutPermission gives members NATS users whose permissions
// deny the bucket's key subjects: every key (the store does not open),
// the members' keys (StartMember fails), the grains' keys (the member
// starts, a call fails). Each fails with natsstore.ErrPermission, well
// within its bound, never by hanging until a deadline. One member at a
// time, under -race (see nats_test.go).
func TestBucketWithoutPermission(t *testing.T) {
	kv := "$KV." + natsstore.DefaultBucket + "."
	opts := []natstest.Option{natstest.WithUser("admin", "a")}
	opts = append(opts, denyUser("nokv", kv+">")...)
	opts = append(opts, denyUser("nomember", kv+"test.members.>")...)
	opts = append(opts, denyUser("nograin", kv+"test.grain.>")...)
	srv := natstest.Start(t, opts...)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	admin, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}, User: "admin", Password: "a"},
		natsstore.Config{}) // creates the bucket
	require.NoError(t, err)
	require.NoError(t, admin.Close())

	dial := func(t *testing.T, user string) (*natsstore.Store, error) {
		return natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()}, User: user, Password: "p"},
			natsstore.Config{})
	}

	// startAs starts a member as user, with a JoinTimeout of 3 s, and stops
	// it: its Config, how long StartMember took, and StartMember's error.
	startAs := func(t *testing.T, user string) (grains.Config, time.Duration, error) {
		t.Helper()
		st, err := dial(t, user)
		require.NoError(t, err)
		defer st.Close()
		cfg := fast
		cfg.JoinTimeout = 3 * time.Second
		m, c := newCluster(t, st, cfg)
		start := time.Now()
		err = grains.StartMember(c)
		took := time.Since(start)
		stopCluster(m, c)
		return cfg, took, err
	}

	t.Run("no key", func(t *testing.T) {
		start := time.Now()
		_, err := dial(t, "nokv")
		require.ErrorIs(t, err, natsstore.ErrPermission)
		assert.Less(t, time.Since(start), 5*time.Second)
	})

	t.Run("no member key", func(t *testing.T) {
		cfg, took, err := startAs(t, "nomember")
		require.ErrorIs(t, err, lease.ErrUnavailable)
		require.ErrorIs(t, err, natsstore.ErrPermission, "the last error names the refusal")
		assert.Less(t, took, cfg.JoinTimeout+2*time.Second, "bounded by JoinTimeout")
		t.Log(err)
	})

	t.Run("no grain key", func(t *testing.T) {
		cfg, took, err := startAs(t, "nograin")
		require.ErrorIs(t, err, natsstore.ErrPermission, "the member may not take its activations' locks")
		assert.ErrorContains(t, err, "activations' locks")
		assert.Less(t, took, 2*cfg.JoinTimeout+2*time.Second, "bounded by JoinTimeout (joining, then the probe)")
		t.Log(err)
	})
}

// newCluster makes a member over st, with the counter kind, not started.
func newCluster(t *testing.T, st *natsstore.Store, cfg grains.Config) (*grains.Member, *cluster.Cluster) {
	t.Helper()
	cfg.Logger = testLogger
	m, err := grains.New(st, cfg)
	require.NoError(t, err)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	c := cluster.New(sys, cluster.Configure("test", m.Provider(), m.Lookup(), remote.Configure("127.0.0.1", 0),
		cluster.WithKinds(cluster.NewKind(kind, newChecker().props()))))
	return m, c
}

func stopCluster(m *grains.Member, c *cluster.Cluster) {
	(&testMember{m: m, c: c}).stop()
}
