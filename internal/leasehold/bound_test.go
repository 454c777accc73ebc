package leasehold

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// bind acquires id under the rig's lease, as a session, and returns its Bound.
func (r *watchdogRig) bind(t *testing.T, id string) *Bound {
	t.Helper()
	a, err := r.mem.AcquireUnder(t.Context(), lease.Claim{LeaseID: id, OwnerID: "owner-a", Term: lease.NewTerm(),
		TTL: r.cfg.EffectiveTTL()}, r.hold.Lease())
	require.NoError(t, err)
	require.True(t, a.Acquired)
	b, err := NewBound(r.hold, a.Lease)
	require.NoError(t, err)
	return b
}

func TestBoundIsValidWhileItsSessionIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 3 * time.Second, RenewInterval: time.Second})
		b := r.bind(t, "test.bound")
		token, err := b.Token()
		require.NoError(t, err)
		assert.Equal(t, b.Lease().Token, token)
		assert.Greater(t, token, r.hold.Lease().Token)
		for range 10 { // the session's renewals keep it valid; the lease is never written
			time.Sleep(time.Second)
			synctest.Wait()
			_, err := b.Token()
			require.NoError(t, err)
			assert.Equal(t, r.hold.ValidUntil(), b.ValidUntil())
			assert.Equal(t, r.hold.Remaining(), b.Remaining())
		}
		assert.Equal(t, uint64(token), b.Lease().Revision)
		assert.Nil(t, b.Err())
		select {
		case <-b.Lost():
			t.Fatal("Lost is closed while held")
		default:
		}
	})
}

func TestBoundEndsWithItsSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		early := r.bind(t, "test.bound.early")
		lost := early.Lost() // a context made before the session ends
		late := r.bind(t, "test.bound.late")
		r.faults.LoseRenewals(1)
		<-r.poison
		for _, b := range []*Bound{early, late} {
			_, err := b.Token()
			var le *lease.LostError
			require.ErrorAs(t, err, &le, "the session's poison ends every lease under it")
			assert.Equal(t, lease.LossTaken, le.Reason)
			assert.ErrorIs(t, b.Err(), lease.ErrLost)
			assert.ErrorIs(t, context.Cause(b.Context()), lease.ErrLost, "a context made after the end is cancelled too")
			assert.Zero(t, b.Remaining())
			assert.False(t, b.MarkReleased(), "already ended")
			assert.ErrorIs(t, ReleaseBound(t.Context(), r.mem, b), lease.ErrLost, "nothing is released")
		}
		select {
		case <-lost:
		default:
			t.Fatal("Lost is not closed")
		}
	})
}

func TestBoundReleaseLeavesItsSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		a, b := r.bind(t, "test.bound.a"), r.bind(t, "test.bound.b")
		ctx := a.Context()
		require.NoError(t, ReleaseBound(t.Context(), r.mem, a))
		_, err := a.Token()
		assert.ErrorIs(t, err, lease.ErrReleased)
		assert.ErrorIs(t, context.Cause(ctx), lease.ErrReleased)
		_, _, held := r.mem.Holder("test.bound.a")
		assert.False(t, held, "released at the store")
		assert.ErrorIs(t, ReleaseBound(t.Context(), r.mem, a), lease.ErrLost, "a second release finds nothing")

		_, err = b.Token()
		require.NoError(t, err, "the other lease under the session is still held")
		_, err = r.hold.Token()
		require.NoError(t, err, "the session is still held")
		time.Sleep(5 * time.Second)
		_, err = b.Token()
		require.NoError(t, err)
	})
}

func TestBoundExpiresWithItsSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		b := r.bind(t, "test.bound")
		require.NoError(t, r.sys.Root.StopFuture(r.dog).Wait()) // the session is no longer renewed
		time.Sleep(9 * time.Second)                             // past the session's validity (TTL - margin)
		_, err := b.Token()
		assert.ErrorIs(t, err, lease.ErrExpired)
		assert.Nil(t, b.Err(), "expiry is not an end")
		assert.ErrorIs(t, ReleaseBound(t.Context(), r.mem, b), lease.ErrExpired, "never released after the validity")
	})
}

func TestNewBoundValidates(t *testing.T) {
	_, err := NewBound(nil, lease.Lease{ID: "x", OwnerID: "o", Term: "t", TTL: time.Second})
	require.ErrorIs(t, err, lease.ErrInvalid)
}
