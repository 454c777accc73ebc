package natsstore

import (
	"context"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
)

// deposedThenCommittedKV refuses the first write to key as a deposed stream
// leader does, and commits it all the same as the new leader does, after
// the read that follows the refusal: that read still shows the key as it
// was. Meanwhile another lease of the same store renews (other), so the
// store has seen a revision above the first write's before it sends its
// second.
type deposedThenCommittedKV struct {
	keyValue
	key   string
	other func()

	mu      sync.Mutex
	refused *nats.Msg
	done    bool
}

func (k *deposedThenCommittedKV) PublishMsg(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	k.mu.Lock()
	first := m.Subject == k.key && k.refused == nil
	if first {
		k.refused = m
	}
	k.mu.Unlock()
	if first {
		return nil, &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant,
			Description: "wrong last sequence"}
	}
	return k.keyValue.PublishMsg(ctx, m)
}

func (k *deposedThenCommittedKV) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	m, err := k.keyValue.GetLastMsgForSubject(ctx, subject)
	k.mu.Lock()
	commit := subject == k.key && k.refused != nil && !k.done
	k.done = k.done || commit
	refused := k.refused
	k.mu.Unlock()
	if commit {
		if _, err := k.keyValue.PublishMsg(ctx, refused); err != nil {
			return nil, err
		}
		k.other()
	}
	return m, err
}

// guarantees.md: a write refused by a deposed leader and committed by the
// new one is recognised by its nonce on a later attempt, and checked against
// the highest revision seen before the attempt that sent it. Checked against
// the latest attempt's, it looked like a write landing below a revision
// seen: "the server lost acknowledged writes", and the store stopped.
func TestWriteOfAnEarlierAttemptIsCheckedAgainstThatAttempt(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"acquire", "renew", "release"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t)
			s, err := Dial(t.Context(), DialOptions{URLs: []string{srv.ClientURL()}}, Config{})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, s.Close()) })
			other, err := s.Acquire(t.Context(), claim("other", "owner-o"))
			require.NoError(t, err)
			job := claim("job", "owner-a")
			var held lease.Lease
			if op != "acquire" {
				a, err := s.Acquire(t.Context(), job)
				require.NoError(t, err)
				held = a.Lease
			} else {
				// A key the store must write at a known revision, so that
				// the refused write is followed by a read.
				a, err := s.Acquire(t.Context(), claim("job", "owner-z"))
				require.NoError(t, err)
				require.NoError(t, s.Release(t.Context(), a.Lease))
			}
			s.kv = &deposedThenCommittedKV{keyValue: s.kv, key: s.putPrefix + "job", other: func() {
				other.Lease, err = s.Renew(t.Context(), other.Lease)
				require.NoError(t, err)
			}}

			switch op {
			case "acquire":
				a, err := s.Acquire(t.Context(), job)
				require.NoError(t, err)
				assert.True(t, a.Acquired)
			case "renew":
				_, err = s.Renew(t.Context(), held)
				require.NoError(t, err)
			case "release":
				require.NoError(t, s.Release(t.Context(), held))
			}
			require.NoError(t, s.Err(), "the store stopped on its own write")
		})
	}
}
