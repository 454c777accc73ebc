package natsstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// A contender that finds a lock held under a session is told when the
// store will judge that session ended if its holder does not renew it
// (Acquisition.ExpiresIn): the session key's TTL counted from the first
// sighting of its revision, as for a lease with a TTL of its own. A waiting
// Locker tries again then; told nothing, it polls, and a killed holder's
// session locks were taken up to two TTLs after the kill.
func TestSessionLockExpiresInIsWhenItsSessionEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode  natsstore.ExpiryMode
		under bool // the contender claims under a session of its own
	}{
		{natsstore.ExpiryServer, false}, {natsstore.ExpiryObserved, false},
		{natsstore.ExpiryServer, true}, {natsstore.ExpiryObserved, true},
	} {
		name := tc.mode.String()
		if tc.under {
			name += "/under-a-session"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			holder, contender, clock, sess, _ := sessionLock(t, tc.mode)
			var own lease.Lease
			if tc.under {
				own = mustAcquire(t, contender, claim("session.b", "owner-b"))
			}
			try := func() lease.Acquisition {
				t.Helper()
				var got lease.Acquisition
				var err error
				if tc.under {
					got, err = contender.AcquireUnder(ctxT(t), claim("job", "owner-b"), own)
				} else {
					got, err = contender.Acquire(ctxT(t), claim("job", "owner-b"))
				}
				require.NoError(t, err)
				return got
			}

			got := try()
			require.False(t, got.Acquired, "taken at its session's first sight")
			require.Equal(t, sess.ID, got.Holder.Session)
			assert.Equal(t, ttl, got.ExpiresIn, "the session's whole TTL from its first sighting")

			clock.advance(ttl / 4)
			got = try()
			require.False(t, got.Acquired)
			assert.Equal(t, 3*ttl/4, got.ExpiresIn, "counted from the first sighting of the session's revision")

			// The holder renews its session: the count starts again when
			// the contender sees the new revision.
			var err error
			sess, err = holder.Renew(ctxT(t), sess)
			require.NoError(t, err)
			clock.advance(ttl / 2)
			got = try()
			require.False(t, got.Acquired, "taken after its session was renewed")
			assert.Equal(t, ttl, got.ExpiresIn, "a whole TTL from the renewal's sighting")

			clock.advance(ttl - time.Millisecond)
			got = try()
			require.False(t, got.Acquired, "taken before the session's TTL ran out")
			assert.Equal(t, time.Millisecond, got.ExpiresIn)

			// The holder stopped renewing: at ExpiresIn the lock is taken,
			// and the session has been ended by the contender's write.
			clock.advance(got.ExpiresIn)
			got = try()
			require.True(t, got.Acquired, "not taken once ExpiresIn had passed")
			_, err = holder.Renew(ctxT(t), sess)
			require.ErrorIs(t, err, lease.ErrLost, "the session's holder renews after its lock was taken")
		})
	}
}
