package natsstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// A server restart with the same store dir keeps revisions and held leases;
// while the server is down operations fail fast with a clear error; after
// the restart renewals resume.
func TestServerRestartKeepsLeases(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{})
	c := lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-owner-a", TTL: 30 * time.Second}
	l := mustAcquire(t, s, c)
	l, err := s.Renew(ctxT(t), l)
	require.NoError(t, err)

	srv.Shutdown()
	// A generous deadline: the calls must not wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = s.Renew(ctx, l)
	require.ErrorIs(t, err, lease.ErrUnavailable)
	require.NoError(t, ctx.Err(), "Renew waited for its deadline instead of failing fast")
	assert.Contains(t, err.Error(), "not connected")
	_, err = s.Acquire(ctx, lease.Claim{LeaseID: "other", OwnerID: "owner-a", Term: "term-owner-a", TTL: time.Second})
	require.ErrorIs(t, err, lease.ErrUnavailable)
	require.ErrorIs(t, s.Release(ctx, l), lease.ErrUnavailable)
	require.NoError(t, ctx.Err(), "calls waited for their deadline instead of failing fast")

	srv.Restart(t)
	var renewed lease.Lease
	require.Eventually(t, func() bool {
		renewed, err = s.Renew(ctxT(t), l)
		require.NotErrorIs(t, err, lease.ErrLost)
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "renewals did not resume: %v", err)
	assert.Equal(t, l.Token, renewed.Token)
	assert.Greater(t, renewed.Revision, l.Revision, "revisions continue after the restart")

	// Another process finds the lease held, and a later acquisition gets a
	// larger token.
	other := dial(t, srv.ClientURL(), natsstore.Config{})
	a, err := other.Acquire(ctxT(t), lease.Claim{LeaseID: "job", OwnerID: "owner-b", Term: "term-owner-b", TTL: time.Second})
	require.NoError(t, err)
	require.False(t, a.Acquired)
	assert.Equal(t, "owner-a", a.Holder.OwnerID)
	require.NoError(t, s.Release(ctxT(t), renewed))
	b := mustAcquire(t, other, lease.Claim{LeaseID: "job", OwnerID: "owner-b", Term: "term-owner-b", TTL: time.Second})
	assert.Greater(t, b.Token, renewed.Token)
}

// The watch is re-created after a reconnect: without that, a KV watch is
// silent for about 19 s after a server restart.
func TestWatchSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	watcher := dial(t, srv.ClientURL(), natsstore.Config{})
	owner := dial(t, srv.ClientURL(), natsstore.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := watcher.Watch(ctx, "job")
	require.NoError(t, err)

	srv.Restart(t)
	l := awaitNoError(t, func() (lease.Lease, error) {
		a, err := owner.Acquire(ctxT(t), claim("job", "owner-a"))
		if err == nil && !a.Acquired {
			t.Fatalf("held by %q", a.Holder.OwnerID)
		}
		return a.Lease, err
	})
	awaitEvent(t, events, lease.EventHeld, l.Revision)
	require.NoError(t, owner.Release(ctxT(t), l))
	awaitEvent(t, events, lease.EventFree, l.Revision+1)
}

// awaitNoError retries fn until it succeeds, for at most 20 s.
func awaitNoError[T any](t *testing.T, fn func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err := fn()
		if err == nil {
			return v
		}
		require.True(t, time.Now().Before(deadline), "still failing: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitEvent waits for an event of kind at revision rev or later. The bound
// is well under the 19 s a watch that is not re-created stays silent.
func awaitEvent(t *testing.T, events <-chan lease.Event, kind lease.EventKind, rev uint64) lease.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "watch closed")
			if ev.Kind == kind && ev.Revision >= rev {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %v event at revision %d or later", kind, rev)
		}
	}
}

func TestWatchClosesOnStoreClose(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s, err := natsstore.Dial(ctxT(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, natsstore.Config{})
	require.NoError(t, err)
	events, err := s.Watch(context.Background(), "job")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	for range events { //nolint:revive // drain until closed
	}
	_, err = s.Watch(context.Background(), "job")
	require.ErrorIs(t, err, lease.ErrClosed)
	_, err = s.Acquire(ctxT(t), claim("job", "o"))
	require.ErrorIs(t, err, lease.ErrClosed)
	_, err = s.Renew(ctxT(t), lease.Lease{ID: "job", OwnerID: "o", Term: "t", Token: 1, Revision: 1, TTL: time.Second})
	require.ErrorIs(t, err, lease.ErrClosed)
	require.ErrorIs(t, s.Release(ctxT(t), lease.Lease{ID: "job", OwnerID: "o", Term: "t", Token: 1, Revision: 1, TTL: time.Second}),
		lease.ErrClosed)
}

// A cluster loses its stream leader: after the fail-over, the holder's
// renewals resume with the same token.
func TestClusterLeaderRestart(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	s := dial(t, c.ClientURL(), natsstore.Config{Replicas: 3})
	l := mustAcquire(t, s, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-owner-a", TTL: 30 * time.Second})
	leader := c.StreamLeader("$G", "KV_"+s.Bucket())
	require.NotNil(t, leader)
	leader.Restart(t)
	renewed := awaitNoError(t, func() (lease.Lease, error) {
		r, err := s.Renew(ctxT(t), l)
		require.NotErrorIs(t, err, lease.ErrLost)
		return r, err
	})
	assert.Equal(t, l.Token, renewed.Token)
	assert.Greater(t, renewed.Revision, l.Revision)
	require.NoError(t, s.Check(ctxT(t)), "a new stream leader is the same bucket")
}

// A stream leader cut off from its followers refuses every write after one
// of its proposals failed to commit, while reads show the key unchanged:
// the holder hears that the store is unavailable, not that the key kept
// changing.
func TestIsolatedStreamLeaderIsUnavailable(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	s := dial(t, c.ClientURL(), natsstore.Config{Replicas: 3})
	l := mustAcquire(t, s, lease.Claim{LeaseID: "job", OwnerID: "owner-a", Term: "term-owner-a", TTL: 30 * time.Second})
	leader := c.StreamLeader("$G", "KV_"+s.Bucket())
	require.NotNil(t, leader)
	for _, srv := range c.Servers {
		if srv != leader {
			srv.Shutdown()
		}
	}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := s.Renew(ctx, l)
		cancel()
		require.ErrorIs(t, err, lease.ErrUnavailable, "renewal %d", i)
		require.NotErrorIs(t, err, lease.ErrLost, "renewal %d", i)
		assert.NotContains(t, err.Error(), "kept changing", "renewal %d", i)
	}
}
