package natsstore_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// eventLog collects a store's events.
type eventLog struct {
	mu  sync.Mutex
	evs []natsstore.Event
}

func (l *eventLog) add(ev natsstore.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, ev)
}

func (l *eventLog) all() []natsstore.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]natsstore.Event(nil), l.evs...)
}

// editStream changes the bucket's stream configuration as `nats stream
// edit` would.
func editStream(t *testing.T, js jetstream.JetStream, bucket string, edit func(*jetstream.StreamConfig)) {
	t.Helper()
	str, err := js.Stream(ctxT(t), "KV_"+bucket)
	require.NoError(t, err)
	cfg := str.CachedInfo().Config
	edit(&cfg)
	_, err = js.UpdateStream(ctxT(t), cfg)
	require.NoError(t, err)
}

// A bucket edited to have a MaxAge shorter than a lease's TTL: the server
// removes the held value early with a MaxAge marker, which must not count
// as the lease's expiry.
func TestMaxAgeEditNeverFreesAHeldKey(t *testing.T) {
	t.Parallel()
	a, b, _, js := twoStores(t, natsstore.Config{})
	long := claim("job", "owner-a")
	long.TTL = 5 * time.Second
	mustAcquire(t, a, long)
	editStream(t, js, a.Bucket(), func(c *jetstream.StreamConfig) {
		c.MaxAge, c.Duplicates = time.Second, time.Second
	})

	// The server removes the value after 1 s, with a marker like an expiry.
	var err error
	for deadline := time.Now().Add(10 * time.Second); err == nil; {
		var got lease.Acquisition
		got, err = b.Acquire(ctxT(t), claim("job", "owner-b"))
		require.False(t, got.Acquired, "a MaxAge marker freed a lease held for 5 s")
		require.True(t, time.Now().Before(deadline), "the MaxAge edit went unnoticed")
		time.Sleep(50 * time.Millisecond)
	}
	require.ErrorIs(t, err, lease.ErrStoreConfig)
	assert.Contains(t, err.Error(), "MaxAge")
}

// Garbage under a key is a *CorruptError whose message says how to fix it,
// and a CorruptKey event.
func TestCorruptKeyNamesTheFix(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	var events eventLog
	s := dial(t, srv.ClientURL(), natsstore.Config{OnEvent: events.add})
	_, js := conn(t, srv.ClientURL())
	rev, err := bucket(t, js, s.Bucket()).Put(ctxT(t), "job", []byte("garbage"))
	require.NoError(t, err)
	for range 3 {
		_, err = s.Acquire(ctxT(t), claim("job", "owner-b"))
		require.ErrorIs(t, err, lease.ErrCorrupt)
	}
	var ce *natsstore.CorruptError
	require.True(t, errors.As(err, &ce))
	assert.Contains(t, err.Error(), "nats kv del "+s.Bucket()+" job")
	var seen []natsstore.CorruptKey
	for _, ev := range events.all() {
		if ck, ok := ev.(natsstore.CorruptKey); ok {
			seen = append(seen, ck)
		}
	}
	require.Len(t, seen, 1, "one event per corrupt revision")
	assert.Equal(t, natsstore.CorruptKey{Bucket: s.Bucket(), Key: "job", Revision: rev, Reason: seen[0].Reason}, seen[0])
	assert.True(t, strings.Contains(seen[0].String(), "nats kv del"))
}

// The bucket's configuration is checked again after a reconnect: an edit
// that makes leases unsafe stops the store.
func TestBucketRevalidatedAfterReconnect(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{})
	_, js := conn(t, srv.ClientURL())
	held := mustAcquire(t, s, claim("job", "owner-a"))
	editStream(t, js, s.Bucket(), func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 5 })
	srv.Restart(t)
	var err error
	require.Eventually(t, func() bool {
		_, err = s.Renew(ctxT(t), held)
		return errors.Is(err, lease.ErrStoreConfig)
	}, 10*time.Second, 20*time.Millisecond, "last error: %v", err)
	assert.Contains(t, err.Error(), "History is 5")
}

// A store that creates its bucket says so: an event and a warning naming
// the JetStream domain, so that an instance that forgot the domain does not
// silently lead a bucket of its own.
func TestCreatedBucketIsReported(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	var (
		events eventLog
		logs   bytes.Buffer
	)
	dial(t, srv.ClientURL(), natsstore.Config{Bucket: "made", Replicas: 1, OnEvent: events.add,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.Contains(t, events.all(), natsstore.Event(natsstore.BucketCreated{Bucket: "made", Replicas: 1}))
	assert.Contains(t, logs.String(), `level=WARN msg="natsstore: created the missing bucket;`)
	assert.Contains(t, logs.String(), `domain=(default) account=$G`)
	var again eventLog
	dial(t, srv.ClientURL(), natsstore.Config{Bucket: "made", OnEvent: again.add})
	for _, ev := range again.all() {
		_, created := ev.(natsstore.BucketCreated)
		require.False(t, created, "binding to an existing bucket is not a creation")
	}
}

// An instance that omits the JetStream domain talks to the domain of the
// server it reaches (a leaf node's): the bucket it creates there is
// reported with that domain, which the bucket also records.
func TestCreatedBucketNamesItsDomain(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, natstest.WithOptions(func(o *server.Options) { o.JetStreamDomain = "leaf" }))
	var events eventLog
	dial(t, srv.ClientURL(), natsstore.Config{OnEvent: events.add})
	require.Contains(t, events.all(), natsstore.Event(natsstore.BucketCreated{Bucket: natsstore.DefaultBucket,
		Domain: "leaf", Replicas: 1}))
	_, js := conn(t, srv.ClientURL())
	str, err := js.Stream(ctxT(t), "KV_"+natsstore.DefaultBucket)
	require.NoError(t, err)
	assert.Equal(t, "leaf", str.CachedInfo().Config.Metadata["aster.domain"])
}
