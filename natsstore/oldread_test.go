package natsstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lock"
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

// lockers has a holder Locker take lock "job" under its session, and
// returns a contender Locker over another store, with its own clock, and
// the session's key.
func lockers(t *testing.T) (gA *lock.Guard, contender *natsstore.Store, b *lock.Locker, clock *testClock, kv jetstream.KeyValue) {
	t.Helper()
	holder, contender, kv, _ := twoStores(t, natsstore.Config{MaxTTL: 2 * sessionTTL})
	clock = newTestClock()
	natsstore.SetClock(contender, clock.now)
	newLocker := func(s *natsstore.Store, owner string) *lock.Locker {
		l, err := lock.New(s, lock.Config{OwnerID: owner, Session: true, TTL: sessionTTL})
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		return l
	}
	a := newLocker(holder, "owner-a")
	gA, err := a.Acquire(ctxT(t), "job")
	require.NoError(t, err)
	return gA, contender, newLocker(contender, "owner-b"), clock, kv
}

// sessionTTL is the session TTL of the Locker tests: the holder's watchdog
// renews every second.
const sessionTTL = 2 * time.Second

// renewed waits, in real time, until the session's key has moved past rev.
func renewed(t *testing.T, kv jetstream.KeyValue, key string, rev uint64) uint64 {
	t.Helper()
	var now uint64
	require.Eventually(t, func() bool {
		e, err := kv.Get(context.Background(), key)
		if err == nil {
			now = e.Revision()
		}
		return now > rev
	}, 5*sessionTTL, 10*time.Millisecond, "the holder's watchdog did not renew its session")
	return now
}

// checkLockers fails when both Lockers hold the lock.
func checkLockers(t *testing.T, gA, gB *lock.Guard, err error) {
	t.Helper()
	if gB != nil {
		tokB, _ := gB.Token()
		_, errA := gA.Token()
		require.Error(t, errA, "both guards hold the lock: the contender took it (token %d) on an old read of a live session", tokB)
	}
	require.ErrorIs(t, err, lock.ErrHeld)
	_, errA := gA.Token()
	require.NoError(t, errA)
}

func TestSessionLockIsNotTakenByALockerOnALateSessionRead(t *testing.T) {
	t.Parallel()
	gA, contender, b, clock, kv := lockers(t)
	_, err := b.TryAcquire(ctxT(t), "job") // the contender's first sight of the session
	require.ErrorIs(t, err, lock.ErrHeld)

	var late sync.Once
	natsstore.AnswerReads(contender, gA.Session(), func(m *jetstream.RawStreamMsg, err error) (*jetstream.RawStreamMsg, error) {
		late.Do(func() { // answered now, seen after a renewal and 2.5 TTL
			renewed(t, kv, gA.Session(), m.Sequence)
			clock.advance(5 * sessionTTL / 2)
		})
		return m, err
	})
	gB, err := b.TryAcquire(ctxT(t), "job")
	checkLockers(t, gA, gB, err)
}

func TestSessionLockIsNotTakenByALockerOnAStaleSessionRead(t *testing.T) {
	t.Parallel()
	gA, contender, b, clock, kv := lockers(t)
	var mu sync.Mutex
	var frozen *jetstream.RawStreamMsg // a deposed stream leader's state
	natsstore.AnswerReads(contender, gA.Session(), func(m *jetstream.RawStreamMsg, err error) (*jetstream.RawStreamMsg, error) {
		mu.Lock()
		defer mu.Unlock()
		if frozen == nil && err == nil {
			frozen = m
		}
		if frozen != nil {
			return frozen, nil
		}
		return m, err
	})
	_, err := b.TryAcquire(ctxT(t), "job")
	require.ErrorIs(t, err, lock.ErrHeld)
	rev := frozen.Sequence
	for range 3 {
		rev = renewed(t, kv, gA.Session(), rev)
		clock.advance(2 * sessionTTL)
		gB, err := b.TryAcquire(ctxT(t), "job")
		checkLockers(t, gA, gB, err)
	}
}
