package natsstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
)

// fault says what faultKV does to the next publish.
type fault uint8

const (
	noFault      fault = iota
	lostAck            // the write lands, the caller sees a timeout
	dropped            // the write never lands, the caller sees a timeout
	delayed            // the write is held back (see land), the caller sees a timeout
	deposed            // the write lands, the caller sees a conflict (a deposed leader answered first)
	deposedTwice       // as deposed, and the next write is refused as the key moved on (by the first)
	refusedStale       // the write does not land, the caller sees a conflict
)

// faultKV injects timeouts after sending, the indeterminate outcome a store
// must resolve by reading the key back.
type faultKV struct {
	keyValue
	mu      sync.Mutex
	next    fault
	pending func() (*jetstream.PubAck, error)
}

func (f *faultKV) set(x fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = x
}

func (f *faultKV) PublishMsg(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	f.mu.Lock()
	x := f.next
	f.next = noFault
	f.mu.Unlock()
	switch x {
	case lostAck:
		if _, err := f.keyValue.PublishMsg(ctx, m); err != nil {
			return nil, err
		}
		return nil, nats.ErrTimeout
	case dropped:
		return nil, nats.ErrTimeout
	case deposed, deposedTwice:
		if _, err := f.keyValue.PublishMsg(ctx, m); err != nil {
			return nil, err
		}
		if x == deposedTwice {
			f.mu.Lock()
			f.next = refusedStale
			f.mu.Unlock()
		}
		return nil, &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence,
			Description: "wrong last sequence"}
	case refusedStale:
		return nil, &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence,
			Description: "wrong last sequence"}
	case delayed:
		f.mu.Lock()
		f.pending = func() (*jetstream.PubAck, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return f.keyValue.PublishMsg(ctx, m)
		}
		f.mu.Unlock()
		return nil, nats.ErrTimeout
	}
	return f.keyValue.PublishMsg(ctx, m)
}

// land makes the delayed write land now, as a write replayed after a
// reconnect would.
func (f *faultKV) land(t *testing.T) {
	f.mu.Lock()
	fn := f.pending
	f.pending = nil
	f.mu.Unlock()
	require.NotNil(t, fn, "no delayed write")
	_, err := fn()
	require.NoError(t, err)
}

func faultyStore(t *testing.T) (*Store, *faultKV) {
	t.Helper()
	srv := natstest.Start(t)
	s, err := Dial(t.Context(), DialOptions{URLs: []string{srv.ClientURL()}}, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	f := &faultKV{keyValue: s.kv}
	s.kv = f
	return s, f
}

// last reads the key's last revision and record directly.
func last(t *testing.T, s *Store, key string) (uint64, record) {
	t.Helper()
	m, err := s.writes.read(t.Context(), time.Now().Add(10*time.Second), key)
	require.NoError(t, err)
	r, _ := parseRecord(m.Data)
	return m.Sequence, r
}

func claim(id, owner string) lease.Claim {
	return lease.Claim{LeaseID: id, OwnerID: owner, Term: "term-" + owner, TTL: 5 * time.Second}
}

func TestIndeterminateAcquireThatLandedIsOurs(t *testing.T) {
	s, f := faultyStore(t)
	for _, id := range []string{"fresh", "known"} {
		if id == "known" {
			// The store knows the key: free at a release marker.
			a, err := s.Acquire(t.Context(), claim(id, "owner-a"))
			require.NoError(t, err)
			require.NoError(t, s.Release(t.Context(), a.Lease))
		}
		f.set(lostAck)
		a, err := s.Acquire(t.Context(), claim(id, "owner-a"))
		require.NoError(t, err, id)
		require.True(t, a.Acquired, id)
		rev, rec := last(t, s, id)
		assert.Equal(t, lease.Token(rev), a.Lease.Token, "%s: the token is the revision of the write that landed", id)
		assert.Equal(t, rev, a.Lease.Revision)
		assert.Equal(t, "owner-a", rec.Owner)
		_, err = s.Renew(t.Context(), a.Lease)
		require.NoError(t, err)
	}
}

func TestIndeterminateAcquireThatDidNotLandIsRetried(t *testing.T) {
	s, f := faultyStore(t)
	f.set(dropped)
	a, err := s.Acquire(t.Context(), claim("k", "owner-a"))
	require.NoError(t, err)
	require.True(t, a.Acquired, "the read-back shows the key free, so the store writes again")
	rev, _ := last(t, s, "k")
	assert.Equal(t, lease.Token(rev), a.Lease.Token)
}

func TestIndeterminateRenewThatLandedIsOurs(t *testing.T) {
	s, f := faultyStore(t)
	a, err := s.Acquire(t.Context(), claim("k", "owner-a"))
	require.NoError(t, err)
	f.set(lostAck)
	l, err := s.Renew(t.Context(), a.Lease)
	require.NoError(t, err)
	rev, rec := last(t, s, "k")
	assert.Equal(t, rev, l.Revision)
	assert.Equal(t, a.Lease.Token, l.Token)
	assert.Equal(t, uint64(a.Lease.Token), rec.Token)
}

func TestIndeterminateRenewThatDidNotLandIsUnavailable(t *testing.T) {
	s, f := faultyStore(t)
	a, err := s.Acquire(t.Context(), claim("k", "owner-a"))
	require.NoError(t, err)
	f.set(dropped)
	_, err = s.Renew(t.Context(), a.Lease)
	require.ErrorIs(t, err, lease.ErrUnavailable)
	require.NotErrorIs(t, err, lease.ErrLost, "nothing says the lease is lost")
	l, err := s.Renew(t.Context(), a.Lease)
	require.NoError(t, err, "a retry at the same revision")
	assert.Greater(t, l.Revision, a.Lease.Revision)
}

// A renewal the owner saw fail lands later (as a write buffered by a
// reconnecting client is replayed): the owner's next renewal, still at the
// old revision, recognises the landed write as its own.
func TestLateRenewalIsRecognised(t *testing.T) {
	s, f := faultyStore(t)
	a, err := s.Acquire(t.Context(), claim("k", "owner-a"))
	require.NoError(t, err)
	f.set(delayed)
	_, err = s.Renew(t.Context(), a.Lease)
	require.ErrorIs(t, err, lease.ErrUnavailable)
	f.land(t)
	landed, _ := last(t, s, "k")
	require.Greater(t, landed, a.Lease.Revision)

	l, err := s.Renew(t.Context(), a.Lease)
	require.NoError(t, err, "the late write is ours")
	assert.Equal(t, a.Lease.Token, l.Token)
	assert.Greater(t, l.Revision, landed)

	// A late write of ours does not make a superseded acquisition ours.
	b, err := s.Acquire(t.Context(), claim("k", "owner-a"))
	require.NoError(t, err)
	require.Greater(t, b.Lease.Token, a.Lease.Token)
	_, err = s.Renew(t.Context(), l)
	require.ErrorIs(t, err, lease.ErrLost)

	// The same holds for a store that never saw the writes (another
	// process): it reads the key first.
	other, err := Dial(t.Context(), DialOptions{URLs: []string{s.nc.ConnectedUrl()}}, Config{})
	require.NoError(t, err)
	defer other.Close()
	_, err = other.Renew(t.Context(), l)
	require.ErrorIs(t, err, lease.ErrLost)
	_, err = other.Renew(t.Context(), b.Lease)
	require.NoError(t, err)
}

func TestIndeterminateReleaseThatLandedIsDone(t *testing.T) {
	s, f := faultyStore(t)
	a, err := s.Acquire(t.Context(), claim("k", "owner-a"))
	require.NoError(t, err)
	f.set(lostAck)
	require.NoError(t, s.Release(t.Context(), a.Lease))
	b, err := s.Acquire(t.Context(), claim("k", "owner-b"))
	require.NoError(t, err)
	require.True(t, b.Acquired)
}

func TestLateRenewalThenRelease(t *testing.T) {
	s, f := faultyStore(t)
	a, err := s.Acquire(t.Context(), claim("k", "owner-a"))
	require.NoError(t, err)
	f.set(delayed)
	_, err = s.Renew(t.Context(), a.Lease)
	require.ErrorIs(t, err, lease.ErrUnavailable)
	f.land(t)
	require.NoError(t, s.Release(t.Context(), a.Lease), "the release deletes the late renewal of ours")
	b, err := s.Acquire(t.Context(), claim("k", "owner-b"))
	require.NoError(t, err)
	require.True(t, b.Acquired, "released, not waiting")
}

// Right after a partition heals, the stream leader it cut off may not know
// yet that it was deposed: it refuses a write at once (its state is stale)
// while the new leader commits it, and the first answer wins. A write of
// the call found in the key after a refusal is the call's own success: a
// release is done (a chaos run saw one reported "lost: released" by its own
// marker), a renewal renewed, an acquisition acquired with that token.
func TestRefusedWriteThatLandedIsOurs(t *testing.T) {
	for _, x := range []fault{deposed, deposedTwice} {
		name := map[fault]string{deposed: "refused", deposedTwice: "refused, then the retry refused"}[x]
		t.Run(name, func(t *testing.T) {
			s, f := faultyStore(t)
			a, err := s.Acquire(t.Context(), claim("k", "owner-a"))
			require.NoError(t, err)

			f.set(x)
			l, err := s.Renew(t.Context(), a.Lease)
			require.NoError(t, err)
			rev, rec := last(t, s, "k")
			assert.Equal(t, rev, l.Revision, "the renewal that landed")
			assert.Equal(t, uint64(a.Lease.Token), rec.Token)

			f.set(x)
			require.NoError(t, s.Release(t.Context(), l), "the release landed")
			m, err := s.writes.read(t.Context(), time.Now().Add(10*time.Second), "k")
			require.NoError(t, err)
			assert.Equal(t, opDelete, m.Header.Get(hdrOperation))

			f.set(x)
			b, err := s.Acquire(t.Context(), claim("k", "owner-b"))
			require.NoError(t, err)
			require.True(t, b.Acquired, "the acquisition landed")
			rev, rec = last(t, s, "k")
			assert.Equal(t, lease.Token(rev), b.Lease.Token, "its token is the revision of the write that landed")
			assert.Equal(t, "owner-b", rec.Owner)
			_, err = s.Renew(t.Context(), b.Lease)
			require.NoError(t, err)
		})
	}
}
