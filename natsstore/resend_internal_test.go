package natsstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// firstUnansweredKV leaves its first read unanswered, as a stream without a
// leader does, and answers the others.
type firstUnansweredKV struct {
	keyValue
	mu            sync.Mutex
	calls         int
	firstGaveUpAt time.Time
}

func (k *firstUnansweredKV) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	k.mu.Lock()
	k.calls++
	first := k.calls == 1
	k.mu.Unlock()
	if first {
		<-ctx.Done()
		k.mu.Lock()
		k.firstGaveUpAt = time.Now()
		k.mu.Unlock()
		return nil, ctx.Err()
	}
	return &jetstream.RawStreamMsg{Subject: subject, Sequence: 7}, nil
}

// guarantees.md: a read the store acts on without a write is confirmed with
// the stream leader, which must have led since the read was sent. A read
// sent again is confirmed against the request that was answered: were it
// marked by the first, unanswered one, an answer given after an election
// would be refused (a leader elected after the read), and one given before
// could be judged by a later time than it was asked at.
func TestResentReadIsMarkedByTheRequestAnswered(t *testing.T) {
	t.Parallel()
	nc := serverConn(t)
	kv := &firstUnansweredKV{}
	s := &Store{
		storeConn:    storeConn{kv: kv, nc: nc},
		openedBucket: openedBucket{replicas: 3},
		keyBook:      keyBook{keys: newKeyCache(time.Now)},
	}
	s.writes = writesOf(s)
	s.keys.put("job", heldAt(7, "a", time.Minute))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, mark, err := s.writes.getLast(ctx, "$KV.b.job")
	require.NoError(t, err)
	assert.Equal(t, uint64(7), m.Sequence)
	assert.Equal(t, 2, kv.calls, "the unanswered read was sent again")
	assert.False(t, mark.sent.Before(kv.firstGaveUpAt),
		"the mark is the first request's, sent %v before it was given up", kv.firstGaveUpAt.Sub(mark.sent))
	assert.Equal(t, time.Minute, s.keys.expiresIn("job"),
		"a request unanswered: the holder may not have renewed either, and the count starts again")
}
