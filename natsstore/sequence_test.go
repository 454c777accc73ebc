package natsstore

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
)

// countingKV counts the requests a store makes.
type countingKV struct {
	keyValue
	writes, reads atomic.Int32
}

func (c *countingKV) PublishMsg(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	c.writes.Add(1)
	return c.keyValue.PublishMsg(ctx, m)
}

func (c *countingKV) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	c.reads.Add(1)
	return c.keyValue.GetLastMsgForSubject(ctx, subject)
}

// The first acquisition of a key never used stays one round trip: telling
// a purged key from a new one costs nothing there.
func TestFirstAcquisitionIsOneRoundTrip(t *testing.T) {
	srv := natstest.Start(t)
	s, err := Dial(t.Context(), DialOptions{URLs: []string{srv.ClientURL()}}, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	c := &countingKV{keyValue: s.kv}
	s.kv = c
	a, err := s.Acquire(t.Context(), claim("new", "owner-a"))
	require.NoError(t, err)
	require.True(t, a.Acquired)
	assert.Equal(t, int32(1), c.writes.Load())
	assert.Zero(t, c.reads.Load())
}

// A write acknowledged at or below a revision seen before, or stored in
// another stream, stops the store.
func TestAckBelowSeenRevisionStopsTheStore(t *testing.T) {
	for _, tc := range []struct {
		ack     jetstream.PubAck
		problem Problem
	}{
		{jetstream.PubAck{Stream: "KV_b", Sequence: 100}, ProblemSequenceRegression},
		{jetstream.PubAck{Stream: "KV_b", Sequence: 99}, ProblemSequenceRegression},
		{jetstream.PubAck{Stream: "KV_other", Sequence: 101}, ProblemBucketRecreated},
	} {
		s := &Store{
			log:          Config{}.logger(),
			openedBucket: openedBucket{bucket: "b"},
			keyBook:      keyBook{keys: newKeyCache(nil)},
		}
		s.writes = writesOf(s)
		s.bucketChecks = checksOf(s)
		s.sawRevision(100)
		err := s.bucketChecks.acked("k", &tc.ack, s.top.Load())
		require.ErrorIs(t, err, lease.ErrStoreConfig)
		var be *BucketError
		require.ErrorAs(t, s.Err(), &be)
		assert.Equal(t, tc.problem, be.Problem, "%+v", tc.ack)
	}
	s := &Store{
		log:          Config{}.logger(),
		openedBucket: openedBucket{bucket: "b"},
		keyBook:      keyBook{keys: newKeyCache(nil)},
	}
	s.writes = writesOf(s)
	s.bucketChecks = checksOf(s)
	s.sawRevision(100)
	require.NoError(t, s.bucketChecks.acked("k", &jetstream.PubAck{Stream: "KV_b", Sequence: 101}, 100))
	assert.Equal(t, uint64(101), s.top.Load())
}
