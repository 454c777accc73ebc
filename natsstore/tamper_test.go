package natsstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

const ttl = time.Second

func claim(id, owner string) lease.Claim {
	return lease.Claim{LeaseID: id, OwnerID: owner, Term: "term-" + owner, TTL: ttl}
}

func mustAcquire(t *testing.T, s *natsstore.Store, c lease.Claim) lease.Lease {
	t.Helper()
	a, err := s.Acquire(ctxT(t), c)
	require.NoError(t, err)
	require.True(t, a.Acquired, "%s should acquire %s; %q holds it", c.OwnerID, c.LeaseID, a.Holder.OwnerID)
	return a.Lease
}

// awaitAcquire retries until c is acquired, and returns how many attempts
// failed before.
func awaitAcquire(t *testing.T, s *natsstore.Store, c lease.Claim) (lease.Lease, int) {
	t.Helper()
	for failed := 0; ; failed++ {
		a, err := s.Acquire(ctxT(t), c)
		require.NoError(t, err)
		if a.Acquired {
			return a.Lease, failed
		}
		require.Less(t, failed, 200, "not acquired after 200 attempts (10 s)")
		time.Sleep(50 * time.Millisecond)
	}
}

// Two processes (stores) on one server, and an operator's connection.
func twoStores(t *testing.T, cfg natsstore.Config) (a, b *natsstore.Store, kv jetstream.KeyValue, js jetstream.JetStream) {
	srv := natstest.Start(t)
	a = dial(t, srv.ClientURL(), cfg)
	b = dial(t, srv.ClientURL(), cfg)
	_, js = conn(t, srv.ClientURL())
	return a, b, bucket(t, js, a.Bucket()), js
}

// An operator deletes a held key: the holder's renewal reports ErrLost, and
// a contender does not take the lease at once (its holder may still be
// acting until its TTL runs out) but only after the bucket's maximum TTL.
func TestOperatorDeleteNeverMakesTwoOwners(t *testing.T) {
	t.Parallel()
	for _, mode := range []natsstore.ExpiryMode{natsstore.ExpiryServer, natsstore.ExpiryObserved} {
		t.Run(mode.String(), func(t *testing.T) {
			a, b, kv, _ := twoStores(t, natsstore.Config{Expiry: mode, MaxTTL: ttl})
			held := mustAcquire(t, a, claim("job", "owner-a"))
			require.NoError(t, kv.Delete(ctxT(t), "job"))

			got, err := b.Acquire(ctxT(t), claim("job", "owner-b"))
			require.NoError(t, err)
			require.False(t, got.Acquired, "taken right after an operator's delete")
			assert.Empty(t, got.Holder.OwnerID, "nobody holds it, but it is not free yet")

			_, err = a.Renew(ctxT(t), held)
			require.ErrorIs(t, err, lease.ErrLost)
			assert.Contains(t, err.Error(), "deleted by someone else")

			start := time.Now()
			l, _ := awaitAcquire(t, b, claim("job", "owner-b"))
			assert.GreaterOrEqual(t, time.Since(start), ttl*9/10, "the contender waits about one TTL")
			assert.Greater(t, l.Token, held.Token)
		})
	}
}

func TestOperatorPurgeWaitsOneTTL(t *testing.T) {
	t.Parallel()
	a, b, kv, _ := twoStores(t, natsstore.Config{MaxTTL: ttl})
	held := mustAcquire(t, a, claim("job", "owner-a"))
	require.NoError(t, kv.Purge(ctxT(t), "job"))
	got, err := b.Acquire(ctxT(t), claim("job", "owner-b"))
	require.NoError(t, err)
	require.False(t, got.Acquired)
	_, err = a.Renew(ctxT(t), held)
	require.ErrorIs(t, err, lease.ErrLost)
	_, failed := awaitAcquire(t, b, claim("job", "owner-b"))
	assert.Positive(t, failed)
}

// Garbage under a key: a typed error matching lease.ErrCorrupt, never a
// panic, never a free lease; the holder's renewal reports ErrLost.
func TestGarbageIsCorruptNeverFree(t *testing.T) {
	t.Parallel()
	a, b, kv, _ := twoStores(t, natsstore.Config{MaxTTL: ttl})
	held := mustAcquire(t, a, claim("job", "owner-a"))
	for _, garbage := range [][]byte{
		[]byte("hello"),
		{},
		[]byte("aster.lease/2 held owner-x 0 1000 0 0000000000000001"),
		[]byte("aster.lease/1 released owner-x 0 0 0 0000000000000001"),
		{0xff, 0x00, 0xfe},
	} {
		rev, err := kv.Put(ctxT(t), "job", garbage)
		require.NoError(t, err)

		got, err := b.Acquire(ctxT(t), claim("job", "owner-b"))
		require.ErrorIs(t, err, lease.ErrCorrupt, "%q", garbage)
		require.False(t, got.Acquired)
		var ce *natsstore.CorruptError
		require.True(t, errors.As(err, &ce))
		assert.Equal(t, "job", ce.Key)
		assert.Equal(t, rev, ce.Revision)

		_, err = a.Renew(ctxT(t), held)
		require.ErrorIs(t, err, lease.ErrLost, "%q", garbage)
		require.ErrorIs(t, a.Release(ctxT(t), held), lease.ErrLost)
	}
	// Long after any TTL, garbage is still not free.
	time.Sleep(2 * ttl)
	_, err := b.Acquire(ctxT(t), claim("job", "owner-b"))
	require.ErrorIs(t, err, lease.ErrCorrupt)

	// Once an operator deletes the garbage, the lease is taken after a TTL.
	require.NoError(t, kv.Delete(ctxT(t), "job"))
	l, _ := awaitAcquire(t, b, claim("job", "owner-b"))
	assert.Greater(t, l.Token, held.Token)
}

// An operator overwrites a held key with another (valid-looking) owner: the
// holder loses, and nobody takes the lease before that value's TTL.
func TestOverwriteByOperator(t *testing.T) {
	t.Parallel()
	a, b, kv, _ := twoStores(t, natsstore.Config{Expiry: natsstore.ExpiryObserved})
	held := mustAcquire(t, a, claim("job", "owner-a"))
	_, err := kv.Put(ctxT(t), "job", []byte("aster.lease/1 held intruder 0 1000 0 0000000000000001"))
	require.NoError(t, err)
	_, err = a.Renew(ctxT(t), held)
	require.ErrorIs(t, err, lease.ErrLost)
	assert.Contains(t, err.Error(), "intruder")
	got, err := b.Acquire(ctxT(t), claim("job", "owner-b"))
	require.NoError(t, err)
	assert.False(t, got.Acquired)
	assert.Equal(t, "intruder", got.Holder.OwnerID)
	_, failed := awaitAcquire(t, b, claim("job", "owner-b"))
	assert.Positive(t, failed)
}

// A renewed key still expires when renewals stop: renewals carry the TTL
// (kv.Update would drop it and the key would live forever).
func TestRenewedKeyStillExpires(t *testing.T) {
	t.Parallel()
	a, b, kv, js := twoStores(t, natsstore.Config{})
	l := mustAcquire(t, a, claim("job", "owner-a"))
	for range 3 {
		var err error
		l, err = a.Renew(ctxT(t), l)
		require.NoError(t, err)
	}
	st, err := kv.Status(ctxT(t))
	require.NoError(t, err)
	stream := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Name
	str, err := js.Stream(ctxT(t), stream)
	require.NoError(t, err)
	m, err := str.GetLastMsgForSubject(ctxT(t), "$KV."+a.Bucket()+".job")
	require.NoError(t, err)
	require.Equal(t, l.Revision, m.Sequence)
	assert.Equal(t, "2s", m.Header.Get(jetstream.MsgTTLHeader), "the renewal carries the TTL and its grace")

	events, err := b.Watch(ctxT(t), "job")
	require.NoError(t, err)
	// The key disappears at the server by itself, and watchers hear of it.
	require.Eventually(t, func() bool {
		_, err := kv.Get(ctxT(t), "job")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}, 10*time.Second, 20*time.Millisecond, "the renewed key never expired")
	for ev := range events {
		if ev.Kind == lease.EventFree {
			break
		}
	}
	got := mustAcquire(t, b, claim("job", "owner-b"))
	assert.Greater(t, got.Token, l.Token)
	_, err = a.Renew(ctxT(t), l)
	require.ErrorIs(t, err, lease.ErrLost)
}

// Release markers carry the bucket's marker TTL, so that buckets with many
// short-lived lock keys do not grow without bound; once a marker is gone the
// key is empty and acquisitions go on with larger tokens.
func TestReleaseMarkerExpires(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	cfg := natsstore.Config{Bucket: "short_markers", MarkerTTL: time.Second}
	a := dial(t, srv.ClientURL(), cfg)
	b := dial(t, srv.ClientURL(), cfg)
	_, js := conn(t, srv.ClientURL())
	str, err := js.Stream(ctxT(t), "KV_short_markers")
	require.NoError(t, err)

	l := mustAcquire(t, a, claim("job", "owner-a"))
	require.NoError(t, a.Release(ctxT(t), l))
	require.Eventually(t, func() bool {
		_, err := str.GetLastMsgForSubject(ctxT(t), "$KV.short_markers.job")
		return errors.Is(err, jetstream.ErrMsgNotFound)
	}, 10*time.Second, 20*time.Millisecond, "the release marker (and any marker after it) never went away")

	for _, s := range []*natsstore.Store{a, b} {
		next := mustAcquire(t, s, claim("job", "owner-b"))
		assert.Greater(t, next.Token, l.Token)
		require.NoError(t, s.Release(ctxT(t), next))
		l = next
	}
}

// A watch reports a value that is not a lease as held by nobody known,
// never as free.
func TestWatchReportsGarbageAsHeld(t *testing.T) {
	t.Parallel()
	a, _, kv, _ := twoStores(t, natsstore.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := a.Watch(ctx, "job")
	require.NoError(t, err)
	rev, err := kv.Put(ctxT(t), "job", []byte("garbage"))
	require.NoError(t, err)
	for ev := range events {
		if ev.Kind == lease.EventFree {
			require.Zero(t, ev.Revision, "only the state of the key before the write is free")
		}
		if ev.Revision == rev {
			assert.Equal(t, lease.EventHeld, ev.Kind)
			assert.Empty(t, ev.Holder.OwnerID)
			return
		}
	}
}
