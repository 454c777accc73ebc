package leasetest_test

import (
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newMemStore(t *testing.T) lease.Store {
	s := leasetest.NewMemStore()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestMemStore(t *testing.T) {
	leasetest.Run(t, newMemStore, leasetest.InVirtualTime(), leasetest.WithTTL(10*time.Second))
}

func TestMemStoreRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time run of the suite; the virtual-time run covers the same cases")
	}
	leasetest.Run(t, newMemStore, leasetest.WithTTL(200*time.Millisecond), leasetest.WithRounds(5))
}

func TestMemStoreInjectedClock(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := leasetest.NewMemStore(leasetest.WithClock(func() time.Time { return now }))
	defer s.Close()
	ctx := t.Context()
	a, err := s.Acquire(ctx, lease.Claim{LeaseID: "clock", OwnerID: "a", Term: "term-a", TTL: time.Minute})
	require.NoError(t, err)
	require.True(t, a.Acquired)

	now = now.Add(59 * time.Second)
	b, err := s.Acquire(ctx, lease.Claim{LeaseID: "clock", OwnerID: "b", Term: "term-b", TTL: time.Minute})
	require.NoError(t, err)
	assert.False(t, b.Acquired, "a 1-minute lease is held after 59 s")

	now = now.Add(time.Second)
	b, err = s.Acquire(ctx, lease.Claim{LeaseID: "clock", OwnerID: "b", Term: "term-b", TTL: time.Minute})
	require.NoError(t, err)
	assert.True(t, b.Acquired, "a 1-minute lease expires after 60 s")
	assert.Greater(t, b.Lease.Token, a.Lease.Token)
}

// A watch opened on a lease that has expired before its expiry timer ran
// (the store's clock is past it; under load the timer's goroutine runs
// late): opening it expires the lease, and the watch reports it free, once.
// (Watch once expired the lease after registering the watch, so that the
// expiry filled the watch's buffer and the first event blocked Watch with
// the store's lock held: every later call hung. In the bubble, that is a
// deadlock synctest reports.)
func TestMemStoreWatchOpenedOnAnExpiredLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var skew atomic.Int64 // how far the store's clock runs ahead of the timers'
		s := leasetest.NewMemStore(leasetest.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
		defer s.Close()
		a, err := s.Acquire(t.Context(), lease.Claim{LeaseID: "expired", OwnerID: "a", Term: "term-a", TTL: time.Minute})
		require.NoError(t, err)
		require.True(t, a.Acquired)
		skew.Store(int64(2 * time.Minute))

		ch, err := s.Watch(t.Context(), "expired")
		require.NoError(t, err)
		first := <-ch
		assert.Equal(t, lease.EventFree, first.Kind)
		synctest.Wait()
		select {
		case ev := <-ch:
			t.Errorf("a second event with nothing changed: %+v", ev)
		default:
		}
		b, err := s.Acquire(t.Context(), lease.Claim{LeaseID: "expired", OwnerID: "b", Term: "term-b", TTL: time.Second})
		require.NoError(t, err)
		assert.True(t, b.Acquired, "the store still answers")
	})
}

func TestMemStoreClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := leasetest.NewMemStore()
		events, err := s.Watch(t.Context(), "closing")
		require.NoError(t, err)
		first := <-events
		assert.Equal(t, lease.EventFree, first.Kind, "the current state first: a key never written is free")
		require.NoError(t, s.Close())
		require.NoError(t, s.Close(), "Close is idempotent")
		_, ok := <-events
		assert.False(t, ok, "Close closes watches")
		_, err = s.Acquire(t.Context(), lease.Claim{LeaseID: "closing", OwnerID: "a", Term: "term-a", TTL: time.Second})
		assert.ErrorIs(t, err, lease.ErrClosed)
		_, err = s.Watch(t.Context(), "closing")
		assert.ErrorIs(t, err, lease.ErrClosed)
	})
}

func TestMemStoreTamper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := leasetest.NewMemStore()
		defer s.Close()
		a, err := s.Acquire(t.Context(), lease.Claim{LeaseID: "tamper", OwnerID: "a", Term: "term-a", TTL: time.Minute})
		require.NoError(t, err)
		s.Tamper("tamper", "operator", time.Minute)
		_, err = s.Renew(t.Context(), a.Lease)
		require.ErrorIs(t, err, lease.ErrLost, "an overwritten key is lost to its owner")
		h, _, ok := s.Holder("tamper")
		require.True(t, ok)
		assert.Equal(t, "operator", h.OwnerID)
		operator, err := s.Acquire(t.Context(), lease.Claim{LeaseID: "tamper", OwnerID: "operator", Term: "tampered", TTL: time.Minute})
		require.NoError(t, err)
		require.True(t, operator.Acquired)

		start := time.Now()
		s.Tamper("tamper", "", 0)
		_, err = s.Renew(t.Context(), operator.Lease)
		require.ErrorIs(t, err, lease.ErrLost, "a deleted key is lost to its owner")
		b, err := s.Acquire(t.Context(), lease.Claim{LeaseID: "tamper", OwnerID: "b", Term: "term-b", TTL: time.Minute})
		require.NoError(t, err)
		assert.False(t, b.Acquired, "a key deleted by hand stays blocked while its former owner may act")
		assert.Empty(t, b.Holder.OwnerID, "the owner is unknown")

		time.Sleep(time.Minute - time.Since(start))
		b, err = s.Acquire(t.Context(), lease.Claim{LeaseID: "tamper", OwnerID: "b", Term: "term-b", TTL: time.Minute})
		require.NoError(t, err)
		assert.True(t, b.Acquired, "free once the former owner's TTL has run out")
		assert.Greater(t, b.Lease.Token, operator.Lease.Token)
	})
}

// The suite must be able to fail: run it against deliberately broken stores
// in a subprocess and expect the named subtests to fail.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	for kind, wantFailing := range map[string][]string{
		"reuse-tokens": {"TokensStrictlyIncrease", "ReacquireAfterOwnReleaseGetsLargerToken"},
		"two-owners":   {"StandbyWhileHeld", "ConcurrentAcquirers"},
		"no-expiry":    {"TakeoverAfterExpiry"},
		"blind-cas":    {"ReleaseByNonOwnerIsNoop", "StaleReleaseIsNoop"},
		// The store of the first release, which took an Acquire by the same
		// OwnerID for a re-acquisition whatever its term.
		"owner-not-term": {"SameOwnerOtherTermIsHeld"},
	} {
		t.Run(kind, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStoreHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "LEASETEST_BROKEN="+kind)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the suite passed a store that %s:\n%s", kind, out)
			for _, name := range wantFailing {
				assert.Contains(t, string(out), "--- FAIL: TestBrokenStoreHelper/"+name, "output:\n%s", out)
			}
		})
	}
}

// TestBrokenStoreHelper runs the suite against a broken store when
// TestSuiteCatchesBrokenStores asks it to, and does nothing otherwise.
func TestBrokenStoreHelper(t *testing.T) {
	kind := os.Getenv("LEASETEST_BROKEN")
	if kind == "" {
		return
	}
	leasetest.Run(t, func(t *testing.T) lease.Store {
		return newBrokenStore(t, kind)
	}, leasetest.InVirtualTime(), leasetest.WithTTL(10*time.Second), leasetest.WithRounds(5))
}

func newMemSessionStore(t *testing.T) lease.SessionStore {
	s := leasetest.NewMemStore()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestMemStoreSessions(t *testing.T) {
	leasetest.RunSessions(t, newMemSessionStore, leasetest.InVirtualTime(), leasetest.WithTTL(10*time.Second))
}
