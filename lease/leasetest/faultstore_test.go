package leasetest_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

func TestFaultStorePassesTheSuiteWhenHealthy(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Store {
		return leasetest.NewFaultStore(newMemStore(t))
	}, leasetest.InVirtualTime(), leasetest.WithTTL(10*time.Second))
}

func faultRig(t *testing.T) (*leasetest.MemStore, *leasetest.FaultStore, lease.Lease) {
	mem := leasetest.NewMemStore()
	t.Cleanup(func() { _ = mem.Close() })
	fs := leasetest.NewFaultStore(mem)
	a, err := fs.Acquire(t.Context(), lease.Claim{LeaseID: "f", OwnerID: "a", Term: "term-a", TTL: 10 * time.Second})
	require.NoError(t, err)
	require.True(t, a.Acquired)
	return mem, fs, a.Lease
}

func TestFaultStoreFailNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, fs, l := faultRig(t)
		fs.FailRenewals(2)
		for range 2 {
			_, err := fs.Renew(t.Context(), l)
			require.ErrorIs(t, err, lease.ErrUnavailable)
			require.ErrorIs(t, err, leasetest.ErrInjected)
		}
		l, err := fs.Renew(t.Context(), l)
		require.NoError(t, err)
		fs.LoseRenewals(1)
		_, err = fs.Renew(t.Context(), l)
		require.ErrorIs(t, err, lease.ErrLost)
		assert.Equal(t, 4, fs.Calls(leasetest.OpRenew))
		assert.Equal(t, 5, fs.Calls(leasetest.OpAll))
	})
}

func TestFaultStoreFailAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, fs, l := faultRig(t)
		fs.FailAll(leasetest.OpAll, lease.ErrUnavailable)
		for range 3 {
			_, err := fs.Renew(t.Context(), l)
			require.ErrorIs(t, err, lease.ErrUnavailable)
		}
		_, err := fs.Acquire(t.Context(), lease.Claim{LeaseID: "g", OwnerID: "a", Term: "term-a", TTL: time.Second})
		require.ErrorIs(t, err, lease.ErrUnavailable)
		require.ErrorIs(t, fs.Release(t.Context(), l), lease.ErrUnavailable)
		_, err = fs.Watch(t.Context(), "f")
		require.ErrorIs(t, err, lease.ErrUnavailable)
		fs.FailAll(leasetest.OpAll, nil)
		_, err = fs.Renew(t.Context(), l)
		require.NoError(t, err)
	})
}

func TestFaultStoreDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, fs, l := faultRig(t)
		fs.Delay(leasetest.OpRenew, 3*time.Second)
		start := time.Now()
		l2, err := fs.Renew(t.Context(), l)
		require.NoError(t, err)
		assert.Equal(t, 3*time.Second, time.Since(start))

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err = fs.Renew(ctx, l2)
		require.ErrorIs(t, err, lease.ErrUnavailable)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		_, rev, ok := mem.Holder("f")
		require.True(t, ok)
		assert.Equal(t, l2.Revision, rev, "a call cut short by its context never reaches the store")
		fs.Heal()
		_, err = fs.Renew(t.Context(), l2)
		require.NoError(t, err)
	})
}

func TestFaultStoreDropAfterApply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, fs, l := faultRig(t)
		fs.DropAfterApply(leasetest.OpRenew|leasetest.OpRelease, 1)
		_, err := fs.Renew(t.Context(), l)
		require.ErrorIs(t, err, lease.ErrUnavailable)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		_, rev, ok := mem.Holder("f")
		require.True(t, ok)
		assert.Greater(t, rev, l.Revision, "the write landed")
		l.Revision = rev
		require.ErrorIs(t, fs.Release(t.Context(), l), lease.ErrUnavailable)
		_, _, ok = mem.Holder("f")
		assert.False(t, ok, "the release landed")
	})
}

func TestFaultStoreWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, fs, l := faultRig(t)
		ctx, cancel := context.WithCancel(t.Context())
		ch, err := fs.Watch(ctx, "f")
		require.NoError(t, err)
		fs.SilenceWatch(true)
		quiet, err := fs.Watch(ctx, "f")
		require.NoError(t, err)
		require.NoError(t, fs.Release(t.Context(), l))
		ev := <-ch
		assert.Equal(t, lease.EventFree, ev.Kind)
		synctest.Wait()
		select {
		case ev := <-quiet:
			t.Fatalf("a silenced watch delivered %v", ev)
		default:
		}
		cancel()
		_, open := <-quiet
		assert.False(t, open, "a silenced watch closes with its context")

		noWatch := leasetest.NewFaultStore(struct{ lease.Store }{fs})
		_, err = noWatch.Watch(t.Context(), "f")
		require.ErrorIs(t, err, lease.ErrUnavailable)
	})
}
