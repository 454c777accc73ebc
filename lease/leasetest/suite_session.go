package leasetest

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// RunSessions checks that the stores made by newStore keep the
// lease.SessionStore contract: leases acquired under a session are held
// while the session is renewed and freed when it ends, whichever way it
// ends, with tokens that keep increasing. It takes the options of Run, and
// complements it: run both on a SessionStore.
func RunSessions(t *testing.T, newStore func(t *testing.T) lease.SessionStore, opts ...Option) {
	s := &suite{ttl: time.Second, rounds: 25}
	for _, o := range opts {
		o(s)
	}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, lease.SessionStore)
	}{
		{"AcquireUnder", s.acquireUnder},
		{"HeldWhileTheSessionIsRenewed", s.heldWhileRenewed},
		{"ReleaseFrees", s.underReleaseFrees},
		{"SessionReleaseFreesItsLeases", s.sessionReleaseFrees},
		{"SessionExpiryFreesItsLeases", s.sessionExpiryFrees},
		{"SessionHeldByAnotherTermFreesItsLeases", s.sessionOtherTerm},
		{"SameTermReacquireUnderGetsNewToken", s.sameTermReacquireUnder},
		{"TokensIncreaseAcrossKinds", s.tokensAcrossKinds},
		{"ConcurrentAcquirersUnderSessions", s.concurrentUnder},
		{"InvalidUnder", s.invalidUnder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s.virtual {
				synctest.Test(t, func(t *testing.T) { tc.fn(t, newStore(t)) })
				return
			}
			tc.fn(t, newStore(t))
		})
	}
}

// session acquires a session lease of its own for owner.
func (s *suite) session(t *testing.T, st lease.Store, owner string) lease.Lease {
	t.Helper()
	return mustAcquire(t, st, s.claim(s.id(t)+".session", owner))
}

func mustAcquireUnder(t *testing.T, st lease.SessionStore, c lease.Claim, session lease.Lease) lease.Lease {
	t.Helper()
	a, err := st.AcquireUnder(ctxT(t), c, session)
	require.NoError(t, err)
	require.True(t, a.Acquired, "%s should acquire %s under %s, but %q holds it", c.OwnerID, c.LeaseID, session.ID, a.Holder.OwnerID)
	return a.Lease
}

func (s *suite) acquireUnder(t *testing.T, st lease.SessionStore) {
	id := s.id(t)
	sess := s.session(t, st, "owner-a")
	l := mustAcquireUnder(t, st, s.claim(id, "owner-a"), sess)
	assert.Equal(t, id, l.ID)
	assert.Equal(t, "owner-a", l.OwnerID)
	assert.Equal(t, "term-of-owner-a", l.Term)
	assert.Equal(t, sess.TTL, l.TTL, "a lease under a session has the session's TTL")
	assert.Equal(t, uint64(l.Token), l.Revision, "the token is the revision of the acquiring write")
	assert.Greater(t, l.Token, sess.Token)

	a, err := st.Acquire(ctxT(t), s.claim(id, "owner-b"))
	require.NoError(t, err)
	require.False(t, a.Acquired, "a lease held under a live session is held")
	assert.Equal(t, "owner-a", a.Holder.OwnerID)
	assert.Equal(t, l.Token, a.Holder.Token)
	assert.Equal(t, sess.ID, a.Holder.Session, "the holder names its session")

	other := s.session(t, st, "owner-b")
	a, err = st.AcquireUnder(ctxT(t), s.claim(id, "owner-b"), other)
	require.NoError(t, err)
	require.False(t, a.Acquired, "under another session too")
	assert.Equal(t, sess.ID, a.Holder.Session)
}

func (s *suite) heldWhileRenewed(t *testing.T, st lease.SessionStore) {
	id := s.id(t)
	sess := s.session(t, st, "owner-a")
	mustAcquireUnder(t, st, s.claim(id, "owner-a"), sess)
	// The lease under the session is never written again; the session is
	// renewed, and for three of its TTLs nobody can take the lease.
	for range 5 {
		time.Sleep(s.ttl * 6 / 10)
		var err error
		sess, err = st.Renew(ctxT(t), sess)
		require.NoError(t, err)
		mustStandby(t, st, s.claim(id, "owner-b"), "owner-a")
	}
}

func (s *suite) underReleaseFrees(t *testing.T, st lease.SessionStore) {
	id := s.id(t)
	sess := s.session(t, st, "owner-a")
	l := mustAcquireUnder(t, st, s.claim(id, "owner-a"), sess)
	require.NoError(t, st.Release(ctxT(t), l))
	require.ErrorIs(t, st.Release(ctxT(t), l), lease.ErrLost, "a second release finds nothing to release")
	b := mustAcquire(t, st, s.claim(id, "owner-b"))
	assert.Greater(t, b.Token, l.Token)
	_, err := st.Renew(ctxT(t), sess)
	require.NoError(t, err, "releasing a lease leaves its session alone")
}

func (s *suite) sessionReleaseFrees(t *testing.T, st lease.SessionStore) {
	id1, id2 := s.id(t), s.id(t)
	sess := s.session(t, st, "owner-a")
	l1 := mustAcquireUnder(t, st, s.claim(id1, "owner-a"), sess)
	l2 := mustAcquireUnder(t, st, s.claim(id2, "owner-a"), sess)
	require.NoError(t, st.Release(ctxT(t), sess))
	b1 := mustAcquire(t, st, s.claim(id1, "owner-b"))
	b2 := mustAcquireUnder(t, st, s.claim(id2, "owner-b"), s.session(t, st, "owner-b"))
	assert.Greater(t, b1.Token, l1.Token)
	assert.Greater(t, b2.Token, l2.Token)
	require.ErrorIs(t, st.Release(ctxT(t), l1), lease.ErrLost, "the former holder's release changes nothing")
	mustStandby(t, st, s.claim(id1, "owner-c"), "owner-b")
	mustStandby(t, st, s.claim(id2, "owner-c"), "owner-b")
}

func (s *suite) sessionExpiryFrees(t *testing.T, st lease.SessionStore) {
	id := s.id(t)
	start := time.Now()
	sess := s.session(t, st, "owner-a")
	l := mustAcquireUnder(t, st, s.claim(id, "owner-a"), sess)
	mustStandby(t, st, s.claim(id, "owner-b"), "owner-a")
	b := s.awaitAcquire(t, st, s.claim(id, "owner-b"), s.expiryLimit())
	assert.GreaterOrEqual(t, time.Since(start), s.ttl, "taken over before the session's TTL ran out")
	assert.Greater(t, b.Token, l.Token)
	require.ErrorIs(t, st.Release(ctxT(t), l), lease.ErrLost, "the former holder's release changes nothing")
	mustStandby(t, st, s.claim(id, "owner-c"), "owner-b")
}

// A session key that another term holds (the session ended, and its key
// was taken) no longer holds the leases that name the former term.
func (s *suite) sessionOtherTerm(t *testing.T, st lease.SessionStore) {
	id := s.id(t)
	sess := s.session(t, st, "owner-a")
	l := mustAcquireUnder(t, st, s.claim(id, "owner-a"), sess)
	require.NoError(t, st.Release(ctxT(t), sess))
	mustAcquire(t, st, s.claim(sess.ID, "owner-c"))
	b := mustAcquire(t, st, s.claim(id, "owner-b"))
	assert.Greater(t, b.Token, l.Token)
}

func (s *suite) sameTermReacquireUnder(t *testing.T, st lease.SessionStore) {
	id := s.id(t)
	sess := s.session(t, st, "owner-a")
	first := mustAcquireUnder(t, st, s.claim(id, "owner-a"), sess)
	second := mustAcquireUnder(t, st, s.claim(id, "owner-a"), sess)
	require.Greater(t, second.Token, first.Token, "re-acquiring must fence off the earlier acquisition")
	require.ErrorIs(t, st.Release(ctxT(t), first), lease.ErrLost, "the superseded acquisition's release")
	require.NoError(t, st.Release(ctxT(t), second))
}

func (s *suite) tokensAcrossKinds(t *testing.T, st lease.SessionStore) {
	id := s.id(t)
	var last lease.Token
	check := func(l lease.Lease, how string) {
		t.Helper()
		require.Greater(t, l.Token, last, "token after %s", how)
		last = l.Token
	}
	l := mustAcquire(t, st, s.claim(id, "owner-a"))
	check(l, "a plain acquisition")
	require.NoError(t, st.Release(ctxT(t), l))
	sess := s.session(t, st, "owner-b")
	l = mustAcquireUnder(t, st, s.claim(id, "owner-b"), sess)
	check(l, "an acquisition under a session")
	require.NoError(t, st.Release(ctxT(t), sess))
	l = mustAcquireUnder(t, st, s.claim(id, "owner-c"), s.session(t, st, "owner-c"))
	check(l, "the session's end and an acquisition under another")
	require.NoError(t, st.Release(ctxT(t), l))
	l = mustAcquire(t, st, s.claim(id, "owner-a"))
	check(l, "a release and a plain acquisition")
}

func (s *suite) concurrentUnder(t *testing.T, st lease.SessionStore) {
	sessions := make([]lease.Lease, contenders)
	for i := range sessions {
		sessions[i] = s.session(t, st, ownerName(i))
	}
	for round := range max(s.rounds/5, 2) {
		id := s.id(t)
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			won []lease.Lease
		)
		for i := range contenders {
			wg.Go(func() {
				a, err := st.AcquireUnder(ctxT(t), s.claim(id, ownerName(i)), sessions[i])
				if !assert.NoError(t, err) {
					return
				}
				if a.Acquired {
					mu.Lock()
					won = append(won, a.Lease)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Len(t, won, 1, "round %d: exactly one contender acquires", round)
	}
}

func ownerName(i int) string { return "owner-" + string(rune('a'+i%26)) + string(rune('a'+i/26)) }

func (s *suite) invalidUnder(t *testing.T, st lease.SessionStore) {
	id := s.id(t)
	sess := s.session(t, st, "owner-a")
	_, err := st.AcquireUnder(ctxT(t), s.claim(sess.ID, "owner-a"), sess)
	require.ErrorIs(t, err, lease.ErrInvalid, "a lease under itself")
	bad := sess
	bad.Token = 0
	_, err = st.AcquireUnder(ctxT(t), s.claim(id, "owner-a"), bad)
	require.ErrorIs(t, err, lease.ErrInvalid, "a session that is not a held lease")
	_, err = st.AcquireUnder(ctxT(t), lease.Claim{LeaseID: id, OwnerID: "owner-a", TTL: s.ttl}, sess)
	require.ErrorIs(t, err, lease.ErrInvalid, "a claim without a term")
}
