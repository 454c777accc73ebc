package lock_test

import (
	"context"
	"errors"
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

func TestAcquireAndRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{OwnerID: "node-a", TTL: 10 * time.Second})
		g, err := r.locker.Acquire(t.Context(), "invoice.42")
		require.NoError(t, err)

		token, err := g.Token()
		require.NoError(t, err)
		owner, rev, ok := r.holder("invoice.42")
		require.True(t, ok)
		assert.Equal(t, g.OwnerID(), owner)
		assert.Equal(t, uint64(token), rev, "the token is the revision of the acquiring write")
		assert.Equal(t, "node-a", g.OwnerID())
		assert.NoError(t, lease.ValidateTerm(g.Term()))
		assert.Equal(t, "invoice.42", g.Resource())
		assert.Equal(t, 9*time.Second, g.Remaining(), "TTL 10 s - safety margin 1 s")
		assert.Equal(t, 10*time.Second, g.TTL())
		assert.NoError(t, g.Err())
		assert.False(t, closed(g.Lost()))
		assert.Equal(t, 1, r.locker.Held())

		require.NoError(t, g.Release(t.Context()))
		_, _, ok = r.holder("invoice.42")
		assert.False(t, ok, "the key is deleted")
		_, err = g.Token()
		assert.ErrorIs(t, err, lease.ErrReleased)
		assert.True(t, closed(g.Lost()))
		assert.ErrorIs(t, context.Cause(g.Context()), lease.ErrReleased)
		assert.Zero(t, g.Remaining())
		assert.NoError(t, g.Release(t.Context()), "Release is idempotent")
		assert.Equal(t, 1, r.faults.Calls(leasetest.OpRelease), "one store release")
		synctest.Wait()
		assert.Zero(t, r.locker.Held())

		acquired, _ := all[lock.LockAcquired](r.rec)
		require.Len(t, acquired, 1)
		assert.Equal(t, token, acquired[0].Token)
		assert.Equal(t, 1, count[lock.LockReleased](r.rec))
	})
}

// Every guard is a term of its own: two guards never share an identity,
// across Lockers with one OwnerID (a restart) and within one Locker.
func TestTermsAreNeverShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		a := newRigOn(t, mem, lock.Config{OwnerID: "node"})
		b := newRigOn(t, mem, lock.Config{OwnerID: "node"}) // a restart with the same owner ID
		seen := map[string]bool{}
		for _, r := range []*rig{a, b} {
			for _, res := range []string{"x", "y"} {
				g, err := r.locker.TryAcquire(t.Context(), res)
				require.NoError(t, err)
				assert.Equal(t, "node", g.OwnerID())
				assert.False(t, seen[g.Term()], "term %s used twice", g.Term())
				seen[g.Term()] = true
				require.NoError(t, g.Release(t.Context()))
			}
		}
		// The same Locker acquiring the same resource again is a new term.
		g1, err := a.locker.Acquire(t.Context(), "z")
		require.NoError(t, err)
		require.NoError(t, g1.Release(t.Context()))
		g2, err := a.locker.Acquire(t.Context(), "z")
		require.NoError(t, err)
		assert.NotEqual(t, g1.Term(), g2.Term())
		t1, _ := g1.Token()
		t2, err := g2.Token()
		require.NoError(t, err)
		assert.Greater(t, t2, t1)

		// Two guards of one Locker: the second waits for the first.
		_, err = a.locker.TryAcquire(t.Context(), "z")
		assert.ErrorIs(t, err, lock.ErrHeld, "a second guard of the same process does not share the lock")
		// Nor does a Locker of another process with the same owner ID.
		_, err = b.locker.TryAcquire(t.Context(), "z")
		var held *lock.HeldError
		require.ErrorAs(t, err, &held)
		assert.Equal(t, "node", held.Owner)
		assert.Equal(t, g2.Term(), held.Term)
	})
}

func TestDefaultOwnerID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{})
		assert.True(t, strings.HasPrefix(r.locker.OwnerID(), lease.OwnerIDPrefix))
		g, err := r.locker.Acquire(t.Context(), "r")
		require.NoError(t, err)
		assert.Equal(t, r.locker.OwnerID(), g.OwnerID())
	})
}

func TestTryAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		a := newRigOn(t, mem, lock.Config{OwnerID: "node-a"})
		b := newRigOn(t, mem, lock.Config{OwnerID: "node-b"})
		ga, err := a.locker.TryAcquire(t.Context(), "res")
		require.NoError(t, err)

		start := time.Now()
		_, err = b.locker.TryAcquire(t.Context(), "res")
		var held *lock.HeldError
		require.ErrorAs(t, err, &held)
		assert.ErrorIs(t, err, lock.ErrHeld)
		assert.Equal(t, "res", held.Resource)
		assert.Equal(t, ga.OwnerID(), held.Owner)
		assert.Equal(t, ga.Term(), held.Term)
		assert.Contains(t, err.Error(), ga.OwnerID())
		assert.Equal(t, start, time.Now(), "TryAcquire does not wait")
		assert.Equal(t, 2, a.faults.Calls(leasetest.OpAcquire)+b.faults.Calls(leasetest.OpAcquire))

		require.NoError(t, ga.Release(t.Context()))
		gb, err := b.locker.TryAcquire(t.Context(), "res")
		require.NoError(t, err)
		ta, _ := ga.Token()
		tb, err := gb.Token()
		require.NoError(t, err)
		assert.Greater(t, tb, ta)
		assert.Zero(t, b.faults.Calls(leasetest.OpWatch), "TryAcquire opens no watch")

		// A store failure is returned, not retried.
		b.faults.FailNext(leasetest.OpAcquire, 1, lease.ErrUnavailable)
		_, err = b.locker.TryAcquire(t.Context(), "other")
		assert.ErrorIs(t, err, lease.ErrUnavailable)
	})
}

func TestAcquireIsWokenByTheWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		a := newRigOn(t, mem, lock.Config{OwnerID: "node-a"})
		b := newRigOn(t, mem, lock.Config{OwnerID: "node-b", RetryInterval: time.Minute})
		ga, err := a.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)

		got := make(chan *lock.Guard, 1)
		go func() {
			g, err := b.locker.Acquire(t.Context(), "res")
			assert.NoError(t, err)
			got <- g
		}()
		time.Sleep(7 * time.Second)
		synctest.Wait()
		require.Empty(t, got, "B waits while A holds")
		polls := b.faults.Calls(leasetest.OpAcquire)

		releasedAt := time.Now()
		require.NoError(t, ga.Release(t.Context()))
		gb := <-got
		assert.Equal(t, releasedAt, time.Now(), "handover at once, not after a poll")
		assert.Equal(t, polls+1, b.faults.Calls(leasetest.OpAcquire), "one attempt after the release")
		owner, _, _ := mem.Holder("res")
		assert.Equal(t, gb.OwnerID(), owner.OwnerID)
		acquired, _ := all[lock.LockAcquired](b.rec)
		require.Len(t, acquired, 1)
		assert.True(t, acquired[0].Handover, "B saw another owner first")
	})
}

func TestAcquireIsWokenByExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		a := newRigOn(t, mem, lock.Config{OwnerID: "node-a", TTL: 10 * time.Second})
		b := newRigOn(t, mem, lock.Config{OwnerID: "node-b", RetryInterval: time.Minute})
		ga, err := a.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		start := time.Now()
		a.faults.FailAll(leasetest.OpRenew, lease.ErrUnavailable) // A can no longer renew

		gb, err := b.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		assert.Equal(t, start.Add(10*time.Second), time.Now(), "taken over when the key expired")
		assert.True(t, closed(ga.Lost()), "A gave up before its key expired")
		_, err = gb.Token()
		require.NoError(t, err)
	})
}

func TestAcquirePollsWhenTheWatchIsSilent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(r *rig) lease.Store
	}{
		{"silent watch", func(r *rig) lease.Store { r.faults.SilenceWatch(true); return r.faults }},
		{"no watcher", func(r *rig) lease.Store { return pollOnly{r.mem} }},
		{"watch fails", func(r *rig) lease.Store { r.faults.FailAll(leasetest.OpWatch, lease.ErrUnavailable); return r.faults }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := leasetest.NewMemStore()
				a := newRigOn(t, mem, lock.Config{OwnerID: "node-a"})
				b := &rig{mem: mem, faults: leasetest.NewFaultStore(mem)}
				retry := 4 * time.Second
				lb, err := lock.New(tc.store(b), lock.Config{OwnerID: "node-b", RetryInterval: retry})
				require.NoError(t, err)
				defer lb.Close(context.Background())

				ga, err := a.locker.Acquire(t.Context(), "res")
				require.NoError(t, err)
				got := make(chan *lock.Guard, 1)
				go func() {
					g, err := lb.Acquire(t.Context(), "res")
					assert.NoError(t, err)
					got <- g
				}()
				time.Sleep(61 * time.Second) // polls back off to the retry interval; not at a renewal
				synctest.Wait()
				releasedAt := time.Now()
				require.NoError(t, ga.Release(t.Context()))
				g := <-got
				waited := time.Since(releasedAt)
				assert.Positive(t, waited, "no watch: found by a poll")
				assert.LessOrEqual(t, waited, retry, "within the retry interval")
				require.NoError(t, g.Release(t.Context()))
			})
		})
	}
}

func TestAcquireRespectsTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		a := newRigOn(t, mem, lock.Config{OwnerID: "node-a"})
		b := newRigOn(t, mem, lock.Config{OwnerID: "node-b"})
		_, err := a.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)

		// A deadline.
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 12*time.Second)
		g, err := b.locker.Acquire(ctx, "res")
		cancel()
		assert.Nil(t, g)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, start.Add(12*time.Second), time.Now(), "returns at the deadline")

		// A cancellation with a cause.
		cause := errors.New("shutting down")
		ctx, cancelCause := context.WithCancelCause(t.Context())
		time.AfterFunc(3*time.Second, func() { cancelCause(cause) })
		start = time.Now()
		_, err = b.locker.Acquire(ctx, "res")
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, cause)
		assert.Equal(t, start.Add(3*time.Second), time.Now())

		// An ended context makes no attempt.
		calls := b.faults.Calls(leasetest.OpAcquire)
		_, err = b.locker.Acquire(ctx, "free")
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, calls, b.faults.Calls(leasetest.OpAcquire))
		_, _, ok := mem.Holder("free")
		assert.False(t, ok)

		synctest.Wait()
		assert.Zero(t, b.locker.Held())
	})
}

func TestAcquireRetriesTransientErrorsAndStopsOnFatalOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{OwnerID: "node-a", RetryInterval: time.Second})
		r.faults.FailNext(leasetest.OpAcquire, 3, lease.ErrUnavailable)
		g, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		assert.Equal(t, 4, r.faults.Calls(leasetest.OpAcquire))
		require.NoError(t, g.Release(t.Context()))

		r.faults.FailNext(leasetest.OpAcquire, 1, lease.ErrCorrupt)
		_, err = r.locker.Acquire(t.Context(), "res")
		assert.ErrorIs(t, err, lease.ErrCorrupt, "waiting cannot fix a corrupt key")
	})
}

// An Acquire whose time runs out while the store fails says why it waited:
// ctx's error, with the last attempt's error in its text (not in its chain:
// the call failed because ctx ended).
func TestAcquireTimeoutNamesTheLastStoreError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{OwnerID: "node-a", RetryInterval: time.Second})
		refused := errors.New("refused for the test")
		r.faults.FailNext(leasetest.OpAcquire, 100, fmt.Errorf("%w: %w", lease.ErrUnavailable, refused))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := r.locker.Acquire(ctx, "res")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, lease.ErrUnavailable)
		assert.ErrorContains(t, err, "(the last attempt failed: ")
		assert.ErrorContains(t, err, "refused for the test)")
	})
}

func TestAcquireValidates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{SafetyMargin: 2 * time.Second})
		for name, call := range map[string]func() error{
			"bad resource": func() error { _, err := r.locker.Acquire(t.Context(), "a b"); return err },
			"empty":        func() error { _, err := r.locker.TryAcquire(t.Context(), ""); return err },
			"negative TTL": func() error { _, err := r.locker.Acquire(t.Context(), "r", lock.WithTTL(-time.Second)); return err },
			"TTL too short for the margin": func() error {
				_, err := r.locker.Acquire(t.Context(), "r", lock.WithTTL(2*time.Second))
				return err
			},
			"negative retry": func() error {
				_, err := r.locker.Acquire(t.Context(), "r", lock.WithRetryInterval(-1))
				return err
			},
		} {
			assert.ErrorIs(t, call(), lease.ErrInvalid, name)
		}
		assert.Zero(t, r.faults.Calls(leasetest.OpAcquire), "nothing reached the store")
	})
}

func TestNewValidates(t *testing.T) {
	mem := leasetest.NewMemStore()
	defer mem.Close()
	for name, cfg := range map[string]lock.Config{
		"owner with space": {OwnerID: "a b"},
		"owner too long":   {OwnerID: strings.Repeat("n", 256)},
		"prefix":           {Prefix: "a b"},
		"prefix with dots": {Prefix: ".x"},
		"margin":           {TTL: time.Second, SafetyMargin: time.Second},
		"retry":            {RetryInterval: -time.Second},
	} {
		_, err := lock.New(mem, cfg)
		assert.ErrorIs(t, err, lease.ErrInvalid, name)
	}
	_, err := lock.New(nil, lock.Config{})
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

func TestPrefixAndPerLockTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{Prefix: "lock.", TTL: 30 * time.Second})
		g, err := r.locker.Acquire(t.Context(), "job.7", lock.WithTTL(6*time.Second))
		require.NoError(t, err)
		assert.Equal(t, "job.7", g.Resource())
		owner, _, ok := r.holder("lock.job.7")
		require.True(t, ok)
		assert.Equal(t, g.OwnerID(), owner)
		assert.Equal(t, 6*time.Second, g.TTL())
		assert.Equal(t, 6*time.Second-600*time.Millisecond, g.Remaining())
		time.Sleep(61 * time.Second) // not at a renewal tick (helpers_test.go)
		_, err = g.Token()
		require.NoError(t, err, "renewed all along")
	})
}
