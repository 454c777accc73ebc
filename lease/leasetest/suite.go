package leasetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// Option tunes Run for a store.
type Option func(*suite)

// WithTTL sets the TTL of the leases the suite takes (default 1 s). Stores
// with coarse TTLs, such as NATS with whole seconds, need at least 1 s.
func WithTTL(ttl time.Duration) Option { return func(s *suite) { s.ttl = ttl } }

// InVirtualTime runs every subtest inside a testing/synctest bubble, so that
// waiting for a TTL costs no real time. The store must be created by newStore
// inside the bubble and must not depend on anything outside it.
func InVirtualTime() Option { return func(s *suite) { s.virtual = true } }

// WithRounds sets how many rounds the concurrent-acquirers test runs
// (default 25).
func WithRounds(n int) Option { return func(s *suite) { s.rounds = n } }

// WithoutExpiryEvents says the store's watch cannot report an expiry (for
// example a NATS server without per-message TTLs); the suite then checks
// only that a release is reported.
func WithoutExpiryEvents() Option { return func(s *suite) { s.noExpiryEvents = true } }

type suite struct {
	newStore       func(t *testing.T) lease.Store
	ttl            time.Duration
	virtual        bool
	rounds         int
	noExpiryEvents bool
	seq            atomic.Uint64
}

// Concurrent acquirers per round in the concurrency test.
const contenders = 16

// Run checks that the stores made by newStore keep the lease.Store contract.
// newStore is called once per subtest; it may return the same backend each
// time, because every subtest uses lease IDs of its own.
func Run(t *testing.T, newStore func(t *testing.T) lease.Store, opts ...Option) {
	s := &suite{newStore: newStore, ttl: time.Second, rounds: 25}
	for _, o := range opts {
		o(s)
	}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, lease.Store)
	}{
		{"AcquireEmpty", s.acquireEmpty},
		{"StandbyWhileHeld", s.standbyWhileHeld},
		{"RenewExtends", s.renewExtends},
		{"RenewByNonOwnerIsLost", s.renewByNonOwner},
		{"RenewWithStaleTokenIsLost", s.renewStale},
		{"ReleaseByNonOwnerIsNoop", s.releaseByNonOwner},
		{"StaleReleaseIsNoop", s.staleRelease},
		{"ReleaseFrees", s.releaseFrees},
		{"TakeoverAfterExpiry", s.takeoverAfterExpiry},
		{"TokensStrictlyIncrease", s.tokensIncrease},
		{"ReacquireAfterOwnReleaseGetsLargerToken", s.reacquireAfterRelease},
		{"SameTermReacquireGetsNewToken", s.sameTermReacquire},
		{"SameOwnerOtherTermIsHeld", s.sameOwnerOtherTerm},
		{"RenewByOtherTermIsLost", s.renewByOtherTerm},
		{"HolderIsReported", s.holderReported},
		{"LeasesAreIndependent", s.independent},
		{"ConcurrentAcquirers", s.concurrent},
		{"CancelledContext", s.cancelled},
		{"InvalidInput", s.invalidInput},
		{"WatchSeesRelease", s.watchRelease},
		{"WatchSeesExpiry", s.watchExpiry},
		{"WatchClosesWithContext", s.watchCloses},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s.virtual {
				synctest.Test(t, func(t *testing.T) { tc.fn(t, s.newStore(t)) })
				return
			}
			tc.fn(t, s.newStore(t))
		})
	}
}

// id returns a lease ID unique to this run of the suite.
func (s *suite) id(t *testing.T) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, t.Name())
	return fmt.Sprintf("leasetest.%s.%d.%d", name, time.Now().UnixNano(), s.seq.Add(1))
}

// claim returns a claim of owner on id. Each owner name stands for one
// term here: two claims with the same owner name are the same tenure.
func (s *suite) claim(id, owner string) lease.Claim {
	return lease.Claim{LeaseID: id, OwnerID: owner, Term: "term-of-" + owner, TTL: s.ttl}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, st lease.Store, c lease.Claim) lease.Lease {
	t.Helper()
	a, err := st.Acquire(ctxT(t), c)
	require.NoError(t, err)
	require.True(t, a.Acquired, "%s should acquire %s, but %q holds it", c.OwnerID, c.LeaseID, a.Holder.OwnerID)
	return a.Lease
}

func mustStandby(t *testing.T, st lease.Store, c lease.Claim, owner string) {
	t.Helper()
	a, err := st.Acquire(ctxT(t), c)
	require.NoError(t, err)
	require.False(t, a.Acquired, "%s acquired %s while %s held it (token %d)", c.OwnerID, c.LeaseID, owner, a.Lease.Token)
	require.Equal(t, owner, a.Holder.OwnerID)
}

// awaitAcquire retries until c is acquired, for at most limit.
func (s *suite) awaitAcquire(t *testing.T, st lease.Store, c lease.Claim, limit time.Duration) lease.Lease {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		a, err := st.Acquire(ctxT(t), c)
		require.NoError(t, err)
		if a.Acquired {
			return a.Lease
		}
		require.True(t, time.Now().Before(deadline), "%s not acquired within %v; held by %q", c.LeaseID, limit, a.Holder.OwnerID)
		time.Sleep(s.ttl / 20)
	}
}

// expiryLimit bounds how long an expiry may take to be visible: a store may
// round TTLs up and check expiry periodically.
func (s *suite) expiryLimit() time.Duration { return 3*s.ttl + 2*time.Second }

func (s *suite) acquireEmpty(t *testing.T, st lease.Store) {
	c := s.claim(s.id(t), "owner-a")
	l := mustAcquire(t, st, c)
	assert.Equal(t, c.LeaseID, l.ID)
	assert.Equal(t, c.OwnerID, l.OwnerID)
	assert.Equal(t, c.Term, l.Term)
	assert.Equal(t, c.TTL, l.TTL)
	assert.NotZero(t, l.Token)
	assert.Equal(t, uint64(l.Token), l.Revision, "the token is the revision of the acquiring write")
}

func (s *suite) standbyWhileHeld(t *testing.T, st lease.Store) {
	id := s.id(t)
	mustAcquire(t, st, s.claim(id, "owner-a"))
	mustStandby(t, st, s.claim(id, "owner-b"), "owner-a")
	mustStandby(t, st, s.claim(id, "owner-c"), "owner-a")
}

func (s *suite) renewExtends(t *testing.T, st lease.Store) {
	// The waits are real time (a real server may be under test): a round
	// whose second owner came more than a TTL after the last renewal was
	// sent proves nothing, and is made again, never counted as passed.
	for range 5 {
		if s.renewExtendsOnce(t, st) {
			return
		}
	}
	t.Fatal("5 rounds in a row ran more than a TTL late: the machine is too slow to check that a renewal extends")
}

// renewExtendsOnce renews a lease three times, 0.6 TTL apart, and checks that
// a second owner finds it held 0.6 TTL after the last renewal. It reports
// false, with no verdict, when the check came a TTL or more after the last
// renewal was sent.
func (s *suite) renewExtendsOnce(t *testing.T, st lease.Store) bool {
	id := s.id(t)
	l := mustAcquire(t, st, s.claim(id, "owner-a"))
	var sent time.Time
	for range 3 {
		time.Sleep(s.ttl * 6 / 10)
		sent = time.Now()
		renewed, err := st.Renew(ctxT(t), l)
		require.NoError(t, err)
		assert.Equal(t, l.Token, renewed.Token, "renewal must not change the token")
		assert.Greater(t, renewed.Revision, l.Revision)
		l = renewed
	}
	// 1.8 TTL after acquiring and 0.6 TTL after the last renewal: still held.
	time.Sleep(s.ttl * 6 / 10)
	a, err := st.Acquire(ctxT(t), s.claim(id, "owner-b"))
	require.NoError(t, err)
	if late := time.Since(sent); late >= s.ttl {
		t.Logf("the check came %v after the last renewal was sent (TTL %v): made again", late, s.ttl)
		if a.Acquired {
			require.NoError(t, st.Release(ctxT(t), a.Lease))
		}
		return false
	}
	require.False(t, a.Acquired, "owner-b acquired %s while owner-a held it (token %d)", id, a.Lease.Token)
	require.Equal(t, "owner-a", a.Holder.OwnerID)
	return true
}

func (s *suite) renewByNonOwner(t *testing.T, st lease.Store) {
	id := s.id(t)
	l := mustAcquire(t, st, s.claim(id, "owner-a"))
	forged := l
	forged.OwnerID = "owner-b"
	_, err := st.Renew(ctxT(t), forged)
	require.ErrorIs(t, err, lease.ErrLost)
	_, err = st.Renew(ctxT(t), l)
	require.NoError(t, err, "the owner can still renew")
}

func (s *suite) renewStale(t *testing.T, st lease.Store) {
	id := s.id(t)
	first := mustAcquire(t, st, s.claim(id, "owner-a"))
	require.NoError(t, st.Release(ctxT(t), first))
	second := mustAcquire(t, st, s.claim(id, "owner-a"))
	_, err := st.Renew(ctxT(t), first)
	require.ErrorIs(t, err, lease.ErrLost, "a renewal with the token of an earlier acquisition")
	future := second
	future.Revision += 1000
	_, err = st.Renew(ctxT(t), future)
	require.ErrorIs(t, err, lease.ErrLost, "a renewal with a revision the store never wrote")
	_, err = st.Renew(ctxT(t), second)
	require.NoError(t, err)
}

func (s *suite) releaseByNonOwner(t *testing.T, st lease.Store) {
	id := s.id(t)
	l := mustAcquire(t, st, s.claim(id, "owner-a"))
	forged := l
	forged.OwnerID = "owner-b"
	require.ErrorIs(t, st.Release(ctxT(t), forged), lease.ErrLost)
	mustStandby(t, st, s.claim(id, "owner-c"), "owner-a")
	_, err := st.Renew(ctxT(t), l)
	require.NoError(t, err, "a non-owner's release must change nothing")
}

func (s *suite) staleRelease(t *testing.T, st lease.Store) {
	id := s.id(t)
	first := mustAcquire(t, st, s.claim(id, "owner-a"))
	require.NoError(t, st.Release(ctxT(t), first))
	second := mustAcquire(t, st, s.claim(id, "owner-b"))
	require.ErrorIs(t, st.Release(ctxT(t), first), lease.ErrLost, "release of an earlier acquisition")
	mustStandby(t, st, s.claim(id, "owner-c"), "owner-b")
	_, err := st.Renew(ctxT(t), second)
	require.NoError(t, err, "a stale release must leave the new owner's key intact")
}

func (s *suite) releaseFrees(t *testing.T, st lease.Store) {
	id := s.id(t)
	l := mustAcquire(t, st, s.claim(id, "owner-a"))
	require.NoError(t, st.Release(ctxT(t), l))
	require.ErrorIs(t, st.Release(ctxT(t), l), lease.ErrLost, "a second release finds nothing to release")
	_, err := st.Renew(ctxT(t), l)
	require.ErrorIs(t, err, lease.ErrLost, "a released lease cannot be renewed")
	mustAcquire(t, st, s.claim(id, "owner-b"))
}

func (s *suite) takeoverAfterExpiry(t *testing.T, st lease.Store) {
	id := s.id(t)
	start := time.Now()
	a := mustAcquire(t, st, s.claim(id, "owner-a"))
	b := s.awaitAcquire(t, st, s.claim(id, "owner-b"), s.expiryLimit())
	assert.GreaterOrEqual(t, time.Since(start), s.ttl, "taken over before the TTL ran out")
	assert.Greater(t, b.Token, a.Token)
	_, err := st.Renew(ctxT(t), a)
	require.ErrorIs(t, err, lease.ErrLost, "the expired owner's renewal")
	require.ErrorIs(t, st.Release(ctxT(t), a), lease.ErrLost, "the expired owner's release")
	mustStandby(t, st, s.claim(id, "owner-c"), "owner-b")
}

func (s *suite) tokensIncrease(t *testing.T, st lease.Store) {
	id := s.id(t)
	var last lease.Token
	check := func(l lease.Lease, how string) {
		t.Helper()
		require.Greater(t, l.Token, last, "token after %s", how)
		last = l.Token
	}
	l := mustAcquire(t, st, s.claim(id, "owner-a"))
	check(l, "first acquisition")
	l, err := st.Renew(ctxT(t), l)
	require.NoError(t, err)
	require.NoError(t, st.Release(ctxT(t), l))
	l = mustAcquire(t, st, s.claim(id, "owner-b"))
	check(l, "release and acquisition by another owner")
	l = s.awaitAcquire(t, st, s.claim(id, "owner-a"), s.expiryLimit())
	check(l, "expiry and takeover")
	require.NoError(t, st.Release(ctxT(t), l))
	l = mustAcquire(t, st, s.claim(id, "owner-a"))
	check(l, "release and re-acquisition by the same owner")
}

func (s *suite) reacquireAfterRelease(t *testing.T, st lease.Store) {
	id := s.id(t)
	first := mustAcquire(t, st, s.claim(id, "owner-a"))
	require.NoError(t, st.Release(ctxT(t), first))
	second := mustAcquire(t, st, s.claim(id, "owner-a"))
	require.Greater(t, second.Token, first.Token)
}

// An Acquire by the term that holds the lease (its earlier Acquire landed
// without the caller learning it) takes it over with a new write.
func (s *suite) sameTermReacquire(t *testing.T, st lease.Store) {
	id := s.id(t)
	first := mustAcquire(t, st, s.claim(id, "owner-a"))
	second := mustAcquire(t, st, s.claim(id, "owner-a"))
	require.Greater(t, second.Token, first.Token, "re-acquiring a held lease must fence off the earlier acquisition")
	_, err := st.Renew(ctxT(t), first)
	require.ErrorIs(t, err, lease.ErrLost, "the superseded acquisition's renewal")
	_, err = st.Renew(ctxT(t), second)
	require.NoError(t, err)
}

// Two terms of one OwnerID (one instance's two supervisors, or two
// processes configured with the same pod name) are two owners: the second
// is told the lease is held, and cannot renew or release the first's.
func (s *suite) sameOwnerOtherTerm(t *testing.T, st lease.Store) {
	id := s.id(t)
	c := s.claim(id, "owner-a")
	held := mustAcquire(t, st, c)
	other := c
	other.Term = "another-term"
	a, err := st.Acquire(ctxT(t), other)
	require.NoError(t, err)
	require.False(t, a.Acquired, "a second term of owner-a acquired a lease the first term holds (token %d)", a.Lease.Token)
	assert.Equal(t, "owner-a", a.Holder.OwnerID)
	assert.Equal(t, c.Term, a.Holder.Term)
	_, err = st.Renew(ctxT(t), held)
	require.NoError(t, err, "the first term keeps its lease")
}

func (s *suite) renewByOtherTerm(t *testing.T, st lease.Store) {
	id := s.id(t)
	l := mustAcquire(t, st, s.claim(id, "owner-a"))
	forged := l
	forged.Term = "another-term"
	_, err := st.Renew(ctxT(t), forged)
	require.ErrorIs(t, err, lease.ErrLost)
	require.ErrorIs(t, st.Release(ctxT(t), forged), lease.ErrLost)
	mustStandby(t, st, s.claim(id, "owner-b"), "owner-a")
	_, err = st.Renew(ctxT(t), l)
	require.NoError(t, err, "the holding term can still renew")
}

// A contender learns who holds the lease: owner, term, token, TTL and the
// holder's metadata, which renewals keep.
func (s *suite) holderReported(t *testing.T, st lease.Store) {
	id := s.id(t)
	c := s.claim(id, "owner-a")
	c.Meta = map[string]string{"addr": "10.0.0.7:8080", "version": "1.4.2 (abc)"}
	l := mustAcquire(t, st, c)
	assert.Equal(t, c.Meta, l.Meta)
	l, err := st.Renew(ctxT(t), l)
	require.NoError(t, err)
	a, err := st.Acquire(ctxT(t), s.claim(id, "owner-b"))
	require.NoError(t, err)
	require.False(t, a.Acquired)
	assert.Equal(t, lease.Holder{OwnerID: "owner-a", Term: c.Term, Token: l.Token, TTL: s.ttl, Meta: c.Meta}, a.Holder)
}

func (s *suite) independent(t *testing.T, st lease.Store) {
	x, y := s.id(t), s.id(t)
	lx := mustAcquire(t, st, s.claim(x, "owner-a"))
	ly := mustAcquire(t, st, s.claim(y, "owner-b"))
	require.NoError(t, st.Release(ctxT(t), lx))
	mustStandby(t, st, s.claim(y, "owner-c"), "owner-b")
	_, err := st.Renew(ctxT(t), ly)
	require.NoError(t, err)
}

func (s *suite) concurrent(t *testing.T, st lease.Store) {
	id := s.id(t)
	var last lease.Token
	for round := range s.rounds {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []lease.Lease
			errs    []error
		)
		start := make(chan struct{})
		for i := range contenders {
			wg.Go(func() {
				<-start
				a, err := st.Acquire(ctxT(t), s.claim(id, fmt.Sprintf("owner-%02d", i)))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				} else if a.Acquired {
					winners = append(winners, a.Lease)
				}
			})
		}
		close(start)
		wg.Wait()
		require.Empty(t, errs, "round %d", round)
		require.Len(t, winners, 1, "round %d: exactly one of %d contenders must win", round, contenders)
		require.Greater(t, winners[0].Token, last, "round %d", round)
		last = winners[0].Token
		require.NoError(t, st.Release(ctxT(t), winners[0]))
	}
}

// returnsWithin fails the test if fn does not return within a generous
// bound: a store must not hang on a done context.
func returnsWithin(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return within 5s of its context being done", what)
		<-done
	}
}

func (s *suite) cancelled(t *testing.T, st lease.Store) {
	id := s.id(t)
	held := mustAcquire(t, st, s.claim(id, "owner-a"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	returnsWithin(t, "Acquire", func() {
		_, err := st.Acquire(ctx, s.claim(s.id(t), "owner-b"))
		assert.ErrorIs(t, err, context.Canceled)
	})
	returnsWithin(t, "Renew", func() {
		_, err := st.Renew(ctx, held)
		assert.ErrorIs(t, err, context.Canceled)
	})
	returnsWithin(t, "Release", func() {
		assert.ErrorIs(t, st.Release(ctx, held), context.Canceled)
	})
	if w, ok := st.(lease.Watcher); ok {
		returnsWithin(t, "Watch", func() {
			_, err := w.Watch(ctx, id)
			assert.ErrorIs(t, err, context.Canceled)
		})
	}
	_, err := st.Renew(ctxT(t), held)
	require.NoError(t, err, "the held lease survives cancelled calls")
}

func (s *suite) invalidInput(t *testing.T, st lease.Store) {
	id := s.id(t)
	held := mustAcquire(t, st, s.claim(id, "owner-a"))
	for _, c := range []lease.Claim{
		{LeaseID: "", OwnerID: "o", Term: "t", TTL: s.ttl},
		{LeaseID: "has space", OwnerID: "o", Term: "t", TTL: s.ttl},
		{LeaseID: "wild.*", OwnerID: "o", Term: "t", TTL: s.ttl},
		{LeaseID: "wild.>", OwnerID: "o", Term: "t", TTL: s.ttl},
		{LeaseID: "a..b", OwnerID: "o", Term: "t", TTL: s.ttl},
		{LeaseID: ".a", OwnerID: "o", Term: "t", TTL: s.ttl},
		{LeaseID: strings.Repeat("x", 300), OwnerID: "o", Term: "t", TTL: s.ttl},
		{LeaseID: id, OwnerID: "", Term: "t", TTL: s.ttl},
		{LeaseID: id, OwnerID: "has space", Term: "t", TTL: s.ttl},
		{LeaseID: id, OwnerID: "o", Term: "t", TTL: 0},
		{LeaseID: id, OwnerID: "o", Term: "t", TTL: -time.Second},
		{LeaseID: id, OwnerID: "o", Term: "", TTL: s.ttl},
		{LeaseID: id, OwnerID: "o", Term: "has space", TTL: s.ttl},
		{LeaseID: id, OwnerID: "o", Term: "t", TTL: s.ttl, Meta: map[string]string{"bad key": "v"}},
		{LeaseID: id, OwnerID: "o", Term: "t", TTL: s.ttl, Meta: map[string]string{"k": strings.Repeat("v", 600)}},
	} {
		_, err := st.Acquire(ctxT(t), c)
		assert.ErrorIs(t, err, lease.ErrInvalid, "Acquire(%+v)", c)
	}
	bad := []lease.Lease{{}, held, held, held, held}
	bad[1].Token = 0
	bad[2].ID = "bad key"
	bad[3].TTL = 0
	bad[4].Term = ""
	for _, l := range bad {
		_, err := st.Renew(ctxT(t), l)
		assert.ErrorIs(t, err, lease.ErrInvalid, "Renew(%+v)", l)
		assert.ErrorIs(t, st.Release(ctxT(t), l), lease.ErrInvalid, "Release(%+v)", l)
	}
	if w, ok := st.(lease.Watcher); ok {
		_, err := w.Watch(ctxT(t), "bad key")
		assert.ErrorIs(t, err, lease.ErrInvalid, "Watch")
	}
	mustStandby(t, st, s.claim(id, "owner-b"), "owner-a")
}

// awaitFree waits for an EventFree on events, for at most limit.
func awaitFree(t *testing.T, events <-chan lease.Event, limit time.Duration) lease.Event {
	t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "watch closed before the lease became free")
			if ev.Kind == lease.EventFree {
				return ev
			}
		case <-timeout:
			t.Fatalf("no free event within %v", limit)
		}
	}
}

func (s *suite) watcher(t *testing.T, st lease.Store) lease.Watcher {
	w, ok := st.(lease.Watcher)
	if !ok {
		t.Skipf("%T has no Watch capability", st)
	}
	return w
}

func (s *suite) watchRelease(t *testing.T, st lease.Store) {
	w := s.watcher(t, st)
	id := s.id(t)
	l := mustAcquire(t, st, s.claim(id, "owner-a"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, err := w.Watch(ctx, id)
	require.NoError(t, err)
	require.NoError(t, st.Release(ctxT(t), l))
	ev := awaitFree(t, events, 5*time.Second)
	assert.Equal(t, id, ev.LeaseID)
	b := mustAcquire(t, st, s.claim(id, "owner-b"))
	ev = awaitHeld(t, events, 5*time.Second)
	assert.Equal(t, lease.Holder{OwnerID: "owner-b", Term: b.Term, Token: b.Token, TTL: s.ttl}, ev.Holder,
		"a held event names its holder")
}

// awaitHeld waits for an EventHeld on events, for at most limit.
func awaitHeld(t *testing.T, events <-chan lease.Event, limit time.Duration) lease.Event {
	t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "watch closed before the lease was taken")
			if ev.Kind == lease.EventHeld {
				return ev
			}
		case <-timeout:
			t.Fatalf("no held event within %v", limit)
		}
	}
}

func (s *suite) watchExpiry(t *testing.T, st lease.Store) {
	w := s.watcher(t, st)
	if s.noExpiryEvents {
		t.Skip("store declared WithoutExpiryEvents")
	}
	id := s.id(t)
	mustAcquire(t, st, s.claim(id, "owner-a"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, err := w.Watch(ctx, id)
	require.NoError(t, err)
	awaitFree(t, events, s.expiryLimit())
	mustAcquire(t, st, s.claim(id, "owner-b"))
}

func (s *suite) watchCloses(t *testing.T, st lease.Store) {
	w := s.watcher(t, st)
	ctx, cancel := context.WithCancel(t.Context())
	events, err := w.Watch(ctx, s.id(t))
	require.NoError(t, err)
	cancel()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("watch channel not closed within 5s of its context being done")
		}
	}
}
