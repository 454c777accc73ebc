package natsstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// A contender judges a lock held under a session by reading the session's
// key. These tests give it old answers for that key while the session's
// holder renews it: a late answer (the server answered before a renewal
// landed, the contender read it after) and a stale one (a deposed stream
// leader answers from a state that no longer moves). Neither may free the
// lock: a take rests on a write that proves what was read (guarantees.md,
// "Every take is proved by a write").

// testClock is a contender's clock, moved by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Now()} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sessionLock has a holder store take a session and a lock "job" under it,
// and returns a contender store on the same server with its own clock.
func sessionLock(t *testing.T, mode natsstore.ExpiryMode) (holder, contender *natsstore.Store, clock *testClock, sess, lock lease.Lease) {
	t.Helper()
	holder, contender, _, _ = twoStores(t, natsstore.Config{Expiry: mode, MaxTTL: 2 * ttl})
	clock = newTestClock()
	natsstore.SetClock(contender, clock.now)
	sess = mustAcquire(t, holder, claim("session.a", "owner-a"))
	lock = acquireUnder(t, holder, claim("job", "owner-a"), sess)
	return holder, contender, clock, sess, lock
}

// checkOneOwner fails when the contender's acquisition and the holder's
// session both stand: the holder renews its session once more, which
// must report ErrLost if the lock was taken.
func checkOneOwner(t *testing.T, holder *natsstore.Store, sess lease.Lease, got lease.Acquisition) {
	t.Helper()
	_, err := holder.Renew(ctxT(t), sess)
	if got.Acquired {
		require.ErrorIs(t, err, lease.ErrLost,
			"the lock was taken (token %d) while its session's holder still renews it: two owners", got.Lease.Token)
		return
	}
	require.NoError(t, err)
}

func TestSessionLockIsNotTakenOnALateSessionRead(t *testing.T) {
	t.Parallel()
	for _, mode := range []natsstore.ExpiryMode{natsstore.ExpiryServer, natsstore.ExpiryObserved} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			holder, contender, clock, sess, _ := sessionLock(t, mode)
			got, err := contender.Acquire(ctxT(t), claim("job", "owner-b"))
			require.NoError(t, err)
			require.False(t, got.Acquired, "taken while its session is held")

			// The next read of the session's key is answered before the
			// holder's renewal lands, and reaches the contender 2.5 TTL
			// later.
			var late sync.Once
			natsstore.AnswerReads(contender, "session.a", func(m *jetstream.RawStreamMsg, err error) (*jetstream.RawStreamMsg, error) {
				late.Do(func() {
					var rerr error
					sess, rerr = holder.Renew(ctxT(t), sess)
					require.NoError(t, rerr)
					clock.advance(5 * ttl / 2)
				})
				return m, err
			})
			got, err = contender.Acquire(ctxT(t), claim("job", "owner-b"))
			require.NoError(t, err)
			checkOneOwner(t, holder, sess, got)
			assert.False(t, got.Acquired, "taken on a late read of its session's key")
		})
	}
}

func TestSessionLockIsNotTakenOnAStaleSessionRead(t *testing.T) {
	t.Parallel()
	for _, mode := range []natsstore.ExpiryMode{natsstore.ExpiryServer, natsstore.ExpiryObserved} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			holder, contender, clock, sess, _ := sessionLock(t, mode)
			// A deposed stream leader answers every read of the session's
			// key with the state it had.
			var frozen *jetstream.RawStreamMsg
			natsstore.AnswerReads(contender, "session.a", func(m *jetstream.RawStreamMsg, err error) (*jetstream.RawStreamMsg, error) {
				if frozen == nil && err == nil {
					frozen = m
				}
				if frozen != nil {
					return frozen, nil
				}
				return m, err
			})
			for i := range 4 {
				got, err := contender.Acquire(ctxT(t), claim("job", "owner-b"))
				require.NoError(t, err)
				if i == 0 {
					require.False(t, got.Acquired, "taken at its first sight")
				}
				checkOneOwner(t, holder, sess, got)
				require.False(t, got.Acquired, "taken on a stale read of its session's key, attempt %d", i)
				sess, err = holder.Renew(ctxT(t), sess)
				require.NoError(t, err)
				clock.advance(ttl)
			}
		})
	}
}
