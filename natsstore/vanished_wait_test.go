package natsstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// An Acquire that finds a held key deleted by hand says how long nobody may
// take it (Acquisition.ExpiresIn): the bucket's MaxTTL from when the store
// saw it vanish, so that a standby can show the end of its wait (issue 32:
// only a log line said wait=2m0s).
func TestVanishedKeyExpiresInIsTheRestOfMaxTTL(t *testing.T) {
	t.Parallel()
	const maxTTL = 5 * time.Second
	a, b, kv, _ := twoStores(t, natsstore.Config{MaxTTL: maxTTL})
	held := mustAcquire(t, a, claim("job", "owner-a"))
	got, err := b.Acquire(ctxT(t), claim("job", "owner-b"))
	require.NoError(t, err)
	require.False(t, got.Acquired)
	require.Equal(t, "owner-a", got.Holder.OwnerID)
	assert.LessOrEqual(t, got.ExpiresIn, held.TTL, "held: the holder's TTL")

	require.NoError(t, kv.Delete(ctxT(t), "job"))
	seen := time.Now()
	got, err = b.Acquire(ctxT(t), claim("job", "owner-b"))
	require.NoError(t, err)
	require.False(t, got.Acquired)
	assert.Equal(t, lease.Holder{}, got.Holder, "nobody holds it")
	assert.InDelta(t, maxTTL, got.ExpiresIn, float64(time.Second), "the bucket's MaxTTL from the sighting")

	time.Sleep(time.Second)
	got, err = b.Acquire(ctxT(t), claim("job", "owner-b"))
	require.NoError(t, err)
	require.False(t, got.Acquired)
	assert.InDelta(t, maxTTL-time.Since(seen), got.ExpiresIn, float64(250*time.Millisecond), "counting down")
}

// A value that is not a lease names the command that removes it, and what
// removing it costs: another wait of the bucket's MaxTTL.
func TestCorruptKeyAdviceSaysWhatTheDeleteCosts(t *testing.T) {
	t.Parallel()
	_, b, kv, _ := twoStores(t, natsstore.Config{MaxTTL: 7 * time.Second})
	_, err := kv.Put(ctxT(t), "job", []byte("garbage"))
	require.NoError(t, err)
	_, err = b.Acquire(ctxT(t), claim("job", "owner-b"))
	require.ErrorIs(t, err, lease.ErrCorrupt)
	assert.ErrorContains(t, err, "nats kv del "+b.Bucket()+" job")
	assert.ErrorContains(t, err, "contenders then wait the bucket's MaxTTL (7s)")
}
