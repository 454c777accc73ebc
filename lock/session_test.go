package lock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

// Under a session, any number of locks cost one renewal per renew period:
// the session's. Each lock is written once, and keeps its own token.
func TestSessionLocksShareOneRenewal(t *testing.T) {
	const locks = 100
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{OwnerID: "node-a", TTL: 3 * time.Second, Session: true})
		guards := make([]*lock.Guard, locks)
		for i := range guards {
			var err error
			guards[i], err = r.locker.TryAcquire(t.Context(), fmt.Sprint("res.", i))
			require.NoError(t, err)
		}
		session := guards[0].Session()
		require.True(t, strings.HasPrefix(session, "session."), "%q", session)
		assert.Equal(t, locks, r.locker.Held())
		assert.Equal(t, locks+1, r.faults.Calls(leasetest.OpAcquire), "one write per lock, and the session's")

		time.Sleep(10*time.Second + 500*time.Millisecond)
		synctest.Wait()
		assert.Equal(t, 10, r.faults.Calls(leasetest.OpRenew), "only the session is renewed, every TTL/3")
		var last lease.Token
		for i, g := range guards {
			assert.Equal(t, session, g.Session())
			token, err := g.Token()
			require.NoError(t, err, "lock %d", i)
			assert.Greater(t, token, last, "every lock has a token of its own")
			last = token
			h, rev, ok := r.mem.Holder(g.Resource())
			require.True(t, ok)
			assert.Equal(t, uint64(token), rev, "never written again")
			assert.Equal(t, session, h.Session)
			assert.Equal(t, guards[0].ValidUntil(), g.ValidUntil(), "valid while the session is")
		}
		require.NoError(t, guards[0].Release(t.Context()))
		_, _, ok := r.mem.Holder(guards[0].Resource())
		assert.False(t, ok, "released")
		_, err := guards[1].Token()
		require.NoError(t, err, "the others are still held")
		assert.Equal(t, locks-1, r.locker.Held())
	})
}

// A lost session loses every lock under it at once; the next acquisition
// opens a new session.
func TestSessionLossLosesEveryLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{OwnerID: "node-a", TTL: 3 * time.Second, Session: true})
		var guards []*lock.Guard
		for i := range 3 {
			g, err := r.locker.TryAcquire(t.Context(), fmt.Sprint("res.", i))
			require.NoError(t, err)
			guards = append(guards, g)
		}
		ctx := guards[0].Context()
		first := guards[0].Session()
		r.faults.LoseRenewals(1)
		time.Sleep(time.Second + 100*time.Millisecond) // the session's first renewal is answered lost
		synctest.Wait()
		for _, g := range guards {
			assert.True(t, closed(g.Lost()))
			_, err := g.Token()
			var lost *lease.LostError
			require.ErrorAs(t, err, &lost)
			assert.Equal(t, lease.LossTaken, lost.Reason)
		}
		assert.ErrorIs(t, context.Cause(ctx), lease.ErrLost)
		assert.Zero(t, r.locker.Held())
		assert.Equal(t, 3, count[lock.LockPoisoned](r.rec), "one event per lock")
		require.ErrorIs(t, guards[0].Release(t.Context()), lease.ErrLost, "nothing of ours to release")

		g, err := r.locker.Acquire(t.Context(), "res.0")
		require.NoError(t, err, "the lock under the lost session is free for a new one")
		assert.NotEqual(t, first, g.Session(), "under a new session")
		token, err := g.Token()
		require.NoError(t, err)
		assert.Greater(t, token, guards[2].Tenure().Token)
	})
}

// Close releases the session (which frees every lock under it at once)
// and deletes the locks' keys.
func TestSessionClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		defer mem.Close()
		l, err := lock.New(mem, lock.Config{OwnerID: "node-a", TTL: 3 * time.Second, Session: true})
		require.NoError(t, err)
		var guards []*lock.Guard
		for i := range 5 {
			g, err := l.Acquire(t.Context(), fmt.Sprint("res.", i))
			require.NoError(t, err)
			guards = append(guards, g)
		}
		session := guards[0].Session()
		own, err := l.Acquire(t.Context(), "own", lock.WithOwnLease())
		require.NoError(t, err)
		require.NoError(t, l.Close(context.Background()))
		_, _, ok := mem.Holder(session)
		assert.False(t, ok, "the session is released")
		for _, g := range append(guards, own) {
			_, _, ok := mem.Holder(g.Resource())
			assert.False(t, ok, "%s is released", g.Resource())
			_, err := g.Token()
			assert.ErrorIs(t, err, lease.ErrReleased)
			assert.NoError(t, g.Release(t.Context()), "Close released it")
		}
		assert.Zero(t, l.Held())
	})
}

// Locks that must expire on their own, or be extended, keep a lease of
// their own under a session Locker.
func TestSessionOwnLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{OwnerID: "node-a", TTL: 3 * time.Second, Session: true})
		under, err := r.locker.Acquire(t.Context(), "under")
		require.NoError(t, err)
		require.ErrorIs(t, under.Extend(t.Context(), 10*time.Second), lease.ErrInvalid)
		own, err := r.locker.Acquire(t.Context(), "own", lock.WithOwnLease())
		require.NoError(t, err)
		assert.Empty(t, own.Session())
		require.NoError(t, own.Extend(t.Context(), 10*time.Second))
		assert.Equal(t, 10*time.Second, own.TTL())
		ttl, err := r.locker.Acquire(t.Context(), "ttl", lock.WithTTL(6*time.Second))
		require.NoError(t, err)
		assert.Empty(t, ttl.Session(), "WithTTL: a lease of its own")
		assert.Equal(t, 6*time.Second, ttl.TTL())
		h, _, ok := r.mem.Holder("own")
		require.True(t, ok)
		assert.Empty(t, h.Session)
		assert.Equal(t, 3, r.locker.Held())
	})
}

// A waiter for a lock held under another Locker's session is woken when
// that session ends, although the lock's key does not change.
func TestSessionEndWakesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		a := newRigOn(t, mem, lock.Config{OwnerID: "node-a", TTL: 6 * time.Second, Session: true})
		b := newRigOn(t, mem, lock.Config{OwnerID: "node-b", RetryInterval: time.Hour})
		ga, err := a.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		start := time.Now()
		a.faults.FailAll(leasetest.OpRenew, lease.ErrUnavailable) // A's session is no longer renewed

		gb, err := b.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		assert.Equal(t, start.Add(6*time.Second), time.Now(), "taken when the session expired, woken by its watch")
		assert.True(t, closed(ga.Lost()), "A gave up before its session expired")
		assert.Greater(t, gb.Tenure().Token, ga.Tenure().Token)
	})
}

// A store that cannot hold leases under a session cannot back a session
// Locker.
func TestSessionNeedsASessionStore(t *testing.T) {
	mem := leasetest.NewMemStore()
	defer mem.Close()
	_, err := lock.New(pollOnly{mem}, lock.Config{Session: true})
	require.ErrorIs(t, err, lease.ErrInvalid)
}
