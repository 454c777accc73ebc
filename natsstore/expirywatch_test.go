package natsstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
)

// leaderlessReadsKV answers reads with 503 "JetStream system temporarily
// unavailable" while down is set, as every server of a cluster does while
// JetStream's meta group has no leader (for seconds after a partition
// heals), although the bucket's stream takes writes. It counts reads and
// writes.
type leaderlessReadsKV struct {
	keyValue
	down          atomic.Bool
	reads, writes atomic.Int32
}

func (k *leaderlessReadsKV) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	k.reads.Add(1)
	if k.down.Load() {
		return nil, &jetstream.APIError{Code: 503, ErrorCode: jetstream.ErrorCode(10008),
			Description: "JetStream system temporarily unavailable"}
	}
	return k.keyValue.GetLastMsgForSubject(ctx, subject)
}

func (k *leaderlessReadsKV) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	k.writes.Add(1)
	return k.keyValue.PublishMsg(ctx, m, opts...)
}

// expiringStores opens two stores of one bucket on a server; the second's
// reads go through a leaderlessReadsKV. The first holds "k" for 1 s.
func expiringStores(t *testing.T) (a, b *Store, kv *leaderlessReadsKV, held lease.Lease, js jetstream.JetStream) {
	t.Helper()
	srv := natstest.Start(t)
	open := func() *Store {
		s, err := Dial(t.Context(), DialOptions{URLs: []string{srv.ClientURL()}}, Config{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		require.Equal(t, ExpiryServer, s.Expiry())
		return s
	}
	a, b = open(), open()
	kv = &leaderlessReadsKV{keyValue: b.kv}
	b.kv = kv
	c := claim("k", "owner-a")
	c.TTL = time.Second
	got, err := a.Acquire(t.Context(), c)
	require.NoError(t, err)
	require.True(t, got.Acquired)
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err = jetstream.New(nc)
	require.NoError(t, err)
	return a, b, kv, got.Lease, js
}

// waitExpired waits for the watch's events to report "k" free.
func waitExpired(t *testing.T, events <-chan lease.Event) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Kind == lease.EventFree {
				return
			}
		case <-timeout:
			t.Fatal("the watch never reported the key's expiry")
		}
	}
}

// An expiry marker that a standby's watch delivered is acted on without a
// read, once the stream (asked on its own) shows no MaxAge: the write,
// expected at the marker's revision, takes the key. Reads need JetStream's
// meta leader; after a partition healed, a cluster answered them with 503
// for 3.5 s while its stream took writes, and a standby that had seen the
// expiry went on waiting (chaos: a stream-leader partition's workload gap
// ended 1.9 s after the stream's outage).
func TestWatchedExpiryNeedsNoRead(t *testing.T) {
	t.Parallel()
	a, b, kv, held, _ := expiringStores(t)
	events, err := b.Watch(t.Context(), "k")
	require.NoError(t, err)
	waitExpired(t, events)

	kv.down.Store(true)
	reads := kv.reads.Load()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	got, err := b.Acquire(ctx, claim("k", "owner-b"))
	require.NoError(t, err, "a read was needed")
	require.True(t, got.Acquired)
	assert.Greater(t, got.Lease.Token, held.Token)
	assert.Equal(t, reads, kv.reads.Load(), "the key was read")
	_, err = a.Renew(t.Context(), held)
	require.ErrorIs(t, err, lease.ErrLost, "the expired holder renewed")
}

// The write is what proves the marker current: a watch behind the key (the
// marker was overtaken by another acquisition) costs one refused write, and
// the key, read then, is held.
func TestWatchedExpiryOvertakenIsNotTaken(t *testing.T) {
	t.Parallel()
	_, b, kv, held, _ := expiringStores(t)
	var marker uint64
	require.Eventually(t, func() bool {
		m, err := b.read(t.Context(), time.Now().Add(time.Second), "k")
		if err == nil && expiryMarker(m.Header) {
			marker = m.Sequence
		}
		return marker != 0
	}, 10*time.Second, 20*time.Millisecond, "the server never expired the key")
	require.Greater(t, marker, held.Revision)

	c, err := Dial(t.Context(), DialOptions{URLs: []string{b.nc.ConnectedUrl()}}, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	taken, err := c.Acquire(t.Context(), claim("k", "owner-c"))
	require.NoError(t, err)
	require.True(t, taken.Acquired)

	// What b's watch would hold had it not delivered c's acquisition yet.
	b.keys.put("k", keyState{rev: marker, expired: true})
	writes := kv.writes.Load()
	got, err := b.Acquire(t.Context(), claim("k", "owner-b"))
	require.NoError(t, err)
	require.False(t, got.Acquired, "an overtaken expiry marker was taken for the key's state")
	assert.Equal(t, "owner-c", got.Holder.OwnerID)
	assert.Equal(t, writes+1, kv.writes.Load(), "the marker was not tried with a write")
}

// A marker delivered by the watch is trusted no more than one read: a
// stream edited to have a MaxAge (which writes the same marker when it
// removes a held value early) stops the store, reads or not.
func TestWatchedExpiryOfAnEditedBucketIsRefused(t *testing.T) {
	t.Parallel()
	_, b, kv, _, js := expiringStores(t)
	events, err := b.Watch(t.Context(), "k")
	require.NoError(t, err)
	waitExpired(t, events)

	st, err := js.Stream(t.Context(), "KV_"+b.Bucket())
	require.NoError(t, err)
	cfg := st.CachedInfo().Config
	cfg.MaxAge = time.Hour
	_, err = js.UpdateStream(t.Context(), cfg)
	require.NoError(t, err)
	kv.down.Store(true)
	require.Nil(t, b.broken.Load(), "the store stopped before Acquire: the test proves nothing")
	writes := kv.writes.Load()
	_, err = b.Acquire(t.Context(), claim("k", "owner-b"))
	require.ErrorIs(t, err, lease.ErrStoreConfig)
	require.ErrorContains(t, err, "MaxAge")
	assert.Equal(t, writes, kv.writes.Load(), "a write was sent")
}
