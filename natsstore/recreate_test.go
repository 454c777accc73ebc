package natsstore_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// A bucket deleted under a running store is a configuration error that
// stops it, not an unavailability to retry forever; the store never
// re-creates it.
func TestDeletedBucketStopsTheStore(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	var events eventLog
	s := dial(t, srv.ClientURL(), natsstore.Config{OnEvent: events.add})
	_, js := conn(t, srv.ClientURL())
	held := mustAcquire(t, s, claim("job", "owner-a"))
	require.NoError(t, js.DeleteKeyValue(ctxT(t), s.Bucket()))

	_, err := s.Renew(ctxT(t), held)
	require.ErrorIs(t, err, lease.ErrStoreConfig)
	assert.Contains(t, err.Error(), "deleted")
	_, err = s.Acquire(ctxT(t), claim("other", "owner-a"))
	require.ErrorIs(t, err, lease.ErrStoreConfig)
	_, err = js.Stream(ctxT(t), "KV_"+s.Bucket())
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "the store re-created the bucket")
	var be *natsstore.BucketError
	require.ErrorAs(t, s.Err(), &be)
	assert.Equal(t, natsstore.ProblemBucketDeleted, be.Problem)
	require.ErrorIs(t, s.Check(ctxT(t)), lease.ErrStoreConfig)
	assert.Contains(t, events.all(), natsstore.Event(natsstore.BucketUnusable{Bucket: s.Bucket(),
		Problem: natsstore.ProblemBucketDeleted, Reason: be.Detail}))
}

// `nats kv rm` then `nats kv add` (or any Dial after a delete, which
// creates the bucket again): the running store notices and stops, and a new
// store's tokens never go below the old bucket's.
func TestRecreatedBucketNeverLowersTokens(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	cfg := natsstore.Config{}
	s := dial(t, srv.ClientURL(), cfg)
	_, js := conn(t, srv.ClientURL())
	var held lease.Lease
	for i := range 5 { // some history
		held = mustAcquire(t, s, claim("job", "owner-a"))
		if i < 4 {
			require.NoError(t, s.Release(ctxT(t), held))
		}
	}
	require.NoError(t, js.DeleteKeyValue(ctxT(t), s.Bucket()))

	// Any Dial after the delete creates the bucket again.
	fresh := dial(t, srv.ClientURL(), cfg)
	l := mustAcquire(t, fresh, claim("job", "owner-b"))
	assert.Greater(t, l.Token, held.Token, "tokens went backwards across the bucket's re-creation")

	// The store that knew the old bucket stops.
	_, err := s.Renew(ctxT(t), held)
	require.ErrorIs(t, err, lease.ErrStoreConfig)
	_, err = s.Acquire(ctxT(t), claim("other", "owner-a"))
	require.ErrorIs(t, err, lease.ErrStoreConfig)
}

// A bucket re-created by hand without the store's epoch restarts its
// revisions at 1: a store that saw larger ones never hands out a token
// below them.
func TestRecreatedByHandIsDetected(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "by_hand"})
	_, js := conn(t, srv.ClientURL())
	var held lease.Lease
	for range 3 {
		held = mustAcquire(t, s, claim("job", "owner-a"))
		require.NoError(t, s.Release(ctxT(t), held))
	}
	require.NoError(t, js.DeleteKeyValue(ctxT(t), "by_hand"))
	recreateByHand(t, js, jetstream.KeyValueConfig{Bucket: "by_hand", History: 1,
		Storage: jetstream.FileStorage, LimitMarkerTTL: time.Minute})

	a, err := s.Acquire(ctxT(t), claim("job", "owner-b"))
	require.ErrorIs(t, err, lease.ErrStoreConfig, "token %d after %d", a.Lease.Token, held.Token)
	require.False(t, a.Acquired)
	var be *natsstore.BucketError
	require.ErrorAs(t, err, &be)
	assert.Contains(t, []natsstore.Problem{natsstore.ProblemSequenceRegression, natsstore.ProblemBucketRecreated}, be.Problem)
}

// A bucket re-created without per-message TTLs refuses the holder's
// renewal ("per-message TTL is disabled"): that is a configuration error,
// not an unavailability to retry until the lease runs out.
func TestTTLRefusedIsAConfigError(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "no_ttl_later"})
	_, js := conn(t, srv.ClientURL())
	held := mustAcquire(t, s, claim("job", "owner-a"))
	require.NoError(t, js.DeleteKeyValue(ctxT(t), "no_ttl_later"))
	recreateByHand(t, js, jetstream.KeyValueConfig{Bucket: "no_ttl_later", History: 1,
		Storage: jetstream.FileStorage})
	_, err := s.Renew(ctxT(t), held)
	require.ErrorIs(t, err, lease.ErrStoreConfig)
	require.NotErrorIs(t, err, lease.ErrUnavailable)
}

// recreateByHand creates a bucket just deleted, as `nats kv add` would. For
// a few milliseconds after a delete the server refuses with "error creating
// store for stream" while it removes the old files; a user retries.
func recreateByHand(t *testing.T, js jetstream.JetStream, cfg jetstream.KeyValueConfig) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := js.CreateKeyValue(ctxT(t), cfg)
		assert.NoError(c, err)
	}, 5*time.Second, 20*time.Millisecond)
}
