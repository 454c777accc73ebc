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

// streamPurge empties the key's subject the way `nats stream purge
// KV_<bucket> --subject '$KV.<bucket>.<key>'` does: no marker is left.
func streamPurge(t *testing.T, js jetstream.JetStream, bucket, key string) {
	t.Helper()
	str, err := js.Stream(ctxT(t), "KV_"+bucket)
	require.NoError(t, err)
	require.NoError(t, str.Purge(ctxT(t), jetstream.WithPurgeSubject("$KV."+bucket+"."+key)))
}

// A stream-level purge leaves no marker: a contender that saw the key held
// must not take the empty subject at once, as its holder may still be
// acting until its renewal fails; it waits the bucket's longest TTL.
func TestStreamPurgeOfHeldKeyWaits(t *testing.T) {
	t.Parallel()
	for _, mode := range []natsstore.ExpiryMode{natsstore.ExpiryServer, natsstore.ExpiryObserved} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t)
			var events eventLog
			cfg := natsstore.Config{Expiry: mode, MaxTTL: 2 * ttl}
			a := dial(t, srv.ClientURL(), cfg)
			cfg.OnEvent = events.add
			b := dial(t, srv.ClientURL(), cfg)
			_, js := conn(t, srv.ClientURL())
			held := mustAcquire(t, a, claim("job", "owner-a"))
			got, err := b.Acquire(ctxT(t), claim("job", "owner-b"))
			require.NoError(t, err)
			require.False(t, got.Acquired)

			streamPurge(t, js, a.Bucket(), "job")
			start := time.Now()
			got, err = b.Acquire(ctxT(t), claim("job", "owner-b"))
			require.NoError(t, err)
			require.False(t, got.Acquired, "taken at once after a stream purge, while its holder may still act")
			assert.Contains(t, events.all(), natsstore.Event(natsstore.KeyVanished{Bucket: b.Bucket(), Key: "job",
				Revision: uint64(held.Token), Emptied: true}))

			_, err = a.Renew(ctxT(t), held)
			require.ErrorIs(t, err, lease.ErrLost)
			l, _ := awaitAcquire(t, b, claim("job", "owner-b"))
			assert.GreaterOrEqual(t, time.Since(start), 2*ttl*9/10, "taken before the bucket's maximum TTL")
			assert.Greater(t, l.Token, held.Token)
		})
	}
}

// A contender that never saw the held value must not free a deleted key
// after its own, shorter TTL: the holder's may be longer.
func TestDeleteWaitsForTheLongestTTL(t *testing.T) {
	t.Parallel()
	a, b, kv, _ := twoStores(t, natsstore.Config{MaxTTL: 3 * time.Second})
	long := claim("job", "owner-a")
	long.TTL = 3 * time.Second
	held := mustAcquire(t, a, long)
	require.NoError(t, kv.Delete(ctxT(t), "job"))
	start := time.Now()
	l, _ := awaitAcquire(t, b, claim("job", "owner-b")) // TTL 1 s
	assert.GreaterOrEqual(t, time.Since(start), long.TTL*9/10, "taken before the holder's TTL ran out")
	assert.Greater(t, l.Token, held.Token)
}
