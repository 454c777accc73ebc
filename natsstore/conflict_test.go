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

// refusingKV answers publishes with "wrong last sequence" without writing,
// as an isolated stream leader does for a write after one of its proposals
// failed to commit, while reads show the key unchanged.
type refusingKV struct {
	keyValue
	refuse    atomic.Bool
	published atomic.Int32
}

func (r *refusingKV) PublishMsg(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	r.published.Add(1)
	if r.refuse.Load() {
		return nil, &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant,
			Description: "wrong last sequence"}
	}
	return r.keyValue.PublishMsg(ctx, m)
}

// Conflicts on a key that does not change are not contention: the stream
// cannot take writes (no quorum). Say so, instead of "the key kept
// changing".
func TestConflictOnAnUnchangedKeyIsUnavailable(t *testing.T) {
	srv := natstest.Start(t)
	s, err := Dial(t.Context(), DialOptions{URLs: []string{srv.ClientURL()}}, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	r := &refusingKV{keyValue: s.kv}
	s.kv = r

	a, err := s.Acquire(t.Context(), claim("k", "owner-a"))
	require.NoError(t, err)
	r.refuse.Store(true)
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"renew", func() error { _, err := s.Renew(t.Context(), a.Lease); return err }},
		{"release", func() error { return s.Release(t.Context(), a.Lease) }},
		{"acquire", func() error { _, err := s.Acquire(t.Context(), claim("fresh", "owner-b")); return err }},
	} {
		r.published.Store(0)
		err := op.call()
		require.ErrorIs(t, err, lease.ErrUnavailable, op.name)
		require.NotErrorIs(t, err, lease.ErrLost, op.name)
		assert.NotContains(t, err.Error(), "kept changing", op.name)
		assert.Contains(t, err.Error(), "the stream cannot take writes now", op.name)
		assert.LessOrEqual(t, r.published.Load(), int32(maxAttempts), op.name)
	}
	r.refuse.Store(false)
	_, err = s.Renew(t.Context(), a.Lease)
	require.NoError(t, err)
}
