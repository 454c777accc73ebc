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

// A bucket the store creates records its maximum lease TTL and the domain
// it lives in, and starts at a revision drawn from the clock.
func TestCreatedBucketRecordsMaxTTLAndEpoch(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	before := uint64(time.Now().UnixMicro())
	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "recorded", MaxTTL: 90 * time.Second})
	assert.Equal(t, 90*time.Second, s.MaxTTL())
	_, js := conn(t, srv.ClientURL())
	str, err := js.Stream(ctxT(t), "KV_recorded")
	require.NoError(t, err)
	cfg := str.CachedInfo().Config
	assert.Equal(t, "1m30s", cfg.Metadata["aster.max_ttl"])
	assert.GreaterOrEqual(t, cfg.FirstSeq, before)
	l := mustAcquire(t, s, claim("job", "owner-a"))
	assert.Greater(t, uint64(l.Token), before)

	// Claims longer than the bucket's maximum are refused.
	long := claim("job2", "owner-a")
	long.TTL = 91 * time.Second
	_, err = s.Acquire(ctxT(t), long)
	require.ErrorIs(t, err, lease.ErrInvalid)
	l.TTL = 2 * time.Minute
	_, err = s.Renew(ctxT(t), l)
	require.ErrorIs(t, err, lease.ErrInvalid)

	// Another store uses the bucket's maximum, and refuses to promise more.
	other := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "recorded"})
	assert.Equal(t, 90*time.Second, other.MaxTTL())
	_, err = natsstore.Dial(ctxT(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}},
		natsstore.Config{Bucket: "recorded", MaxTTL: 5 * time.Minute})
	require.ErrorIs(t, err, natsstore.ErrBucketConfig)
	require.ErrorIs(t, err, lease.ErrStoreConfig)
	assert.Contains(t, err.Error(), "up to 1m30s")
	lower := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "recorded", MaxTTL: 30 * time.Second})
	_, err = lower.Acquire(ctxT(t), long)
	require.ErrorIs(t, err, lease.ErrInvalid, "a store refuses claims above its own MaxTTL")
}

// A bucket made by hand (or by an older version), once its revisions were
// moved past the clock as the store asks, records no maximum TTL: the store
// says what that weakens, assumes its own MaxTTL, and works.
func TestBucketWithoutRecordsIsDegraded(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	byHand(t, srv.ClientURL(), jetstream.KeyValueConfig{Bucket: "by_hand", History: 1,
		Storage: jetstream.FileStorage, LimitMarkerTTL: time.Minute})
	var events eventLog
	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "by_hand", MaxTTL: 10 * time.Second, OnEvent: events.add})
	assert.Equal(t, 10*time.Second, s.MaxTTL())
	var reasons []string
	for _, ev := range events.all() {
		if d, ok := ev.(natsstore.BucketDegraded); ok {
			reasons = append(reasons, d.Reason)
		}
	}
	require.Len(t, reasons, 1)
	assert.Contains(t, reasons[0], "records no maximum lease TTL")
	works(t, s)
}

// An administrator creates the bucket; services refuse to create one.
func TestCreateBucketThenNoCreate(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := conn(t, srv.ClientURL())
	cfg := natsstore.Config{Bucket: "admin_made", MaxTTL: time.Minute, NoCreate: true}
	_, err := natsstore.Dial(ctxT(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, cfg)
	require.ErrorIs(t, err, natsstore.ErrNoBucket)
	require.ErrorIs(t, err, lease.ErrStoreConfig)

	require.NoError(t, natsstore.CreateBucket(ctxT(t), js, cfg))
	require.ErrorIs(t, natsstore.CreateBucket(ctxT(t), js, cfg), jetstream.ErrStreamNameAlreadyInUse)
	var events eventLog
	cfg.OnEvent = events.add
	s := dial(t, srv.ClientURL(), cfg)
	assert.Empty(t, events.all(), "a bucket as natsstore creates it is neither created again nor degraded")
	assert.Equal(t, natsstore.ExpiryServer, s.Expiry())
	works(t, s)
}
