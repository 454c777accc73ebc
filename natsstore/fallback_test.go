package natsstore

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
)

// ttlIgnoringKV makes the server look like one that accepts a Nats-TTL
// header and ignores it (nats-server before 2.11): writes are stored without
// a TTL, and reads show the header.
type ttlIgnoringKV struct{ keyValue }

func (k ttlIgnoringKV) PublishMsg(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	if _, ok := m.Header[jetstream.MsgTTLHeader]; ok { // the expected sequence only (see writeHeader)
		c := *m
		c.Header = maps.Clone(m.Header)
		delete(c.Header, jetstream.MsgTTLHeader)
		m = &c
	}
	return k.keyValue.PublishMsg(ctx, m)
}

func (k ttlIgnoringKV) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	m, err := k.keyValue.GetLastMsgForSubject(ctx, subject)
	if err == nil && m.Header.Get(hdrOperation) == "" {
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(jetstream.MsgTTLHeader, "1s")
	}
	return m, err
}

// A held key that the server never expires (it accepts the per-message TTL
// and ignores it) in server-expiry mode: a contender takes it once it has
// seen it unchanged for its TTL, as it takes any key, without waiting for
// the server and without switching the store to observed expiry.
func TestKeyNeverExpiredByTheServerIsTakenAtItsTTL(t *testing.T) {
	srv := natstest.Start(t)
	var (
		mu        sync.Mutex
		fallbacks []ExpiryFallback
	)
	open := func() *Store {
		s, err := Dial(t.Context(), DialOptions{URLs: []string{srv.ClientURL()}}, Config{OnEvent: func(ev Event) {
			if f, ok := ev.(ExpiryFallback); ok {
				mu.Lock()
				defer mu.Unlock()
				fallbacks = append(fallbacks, f)
			}
		}})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		require.Equal(t, ExpiryServer, s.Expiry())
		s.kv = ttlIgnoringKV{s.kv}
		return s
	}
	a, b := open(), open()
	c := claim("k", "owner-a")
	c.TTL = time.Second
	_, err := a.Acquire(t.Context(), c)
	require.NoError(t, err)
	start := time.Now()
	for {
		got, err := b.Acquire(t.Context(), lease.Claim{LeaseID: "k", OwnerID: "owner-b", Term: "term-b", TTL: time.Second})
		require.NoError(t, err)
		if got.Acquired {
			break
		}
		require.Positive(t, got.ExpiresIn, "a contender is told when to try again")
		require.LessOrEqual(t, got.ExpiresIn, c.TTL)
		require.Less(t, time.Since(start), 10*time.Second, "a key the server never expires is held forever")
		time.Sleep(50 * time.Millisecond)
	}
	require.GreaterOrEqual(t, time.Since(start), c.TTL)
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, fallbacks)
	require.Equal(t, ExpiryServer, b.Expiry())
}
