package natsstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// acquireUnder takes c under session, which must succeed.
func acquireUnder(t *testing.T, s *natsstore.Store, c lease.Claim, session lease.Lease) lease.Lease {
	t.Helper()
	a, err := s.AcquireUnder(ctxT(t), c, session)
	require.NoError(t, err)
	require.True(t, a.Acquired, "%s should acquire %s; %q holds it", c.OwnerID, c.LeaseID, a.Holder.OwnerID)
	return a.Lease
}

// An operator deletes a session's key: its holder's next renewal reports
// ErrLost (and the lock package then stops every lock under it), and a
// contender takes a lock under it only once the bucket's maximum TTL has
// passed, as for a deleted lease.
func TestSessionKeyDeletedByHandWaits(t *testing.T) {
	t.Parallel()
	for _, mode := range []natsstore.ExpiryMode{natsstore.ExpiryServer, natsstore.ExpiryObserved} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			var events eventLog
			a, b, kv, _ := twoStores(t, natsstore.Config{Expiry: mode, MaxTTL: 2 * ttl, OnEvent: events.add})
			sess := mustAcquire(t, a, claim("session.a", "owner-a"))
			held := acquireUnder(t, a, claim("job", "owner-a"), sess)
			require.NoError(t, kv.Delete(ctxT(t), "session.a"))

			start := time.Now()
			got, err := b.Acquire(ctxT(t), claim("job", "owner-b"))
			require.NoError(t, err)
			require.False(t, got.Acquired, "taken at once after its session's key was deleted, while its holder may act")
			assert.Equal(t, "session.a", got.Holder.Session)
			_, err = a.Renew(ctxT(t), sess)
			require.ErrorIs(t, err, lease.ErrLost, "the session's holder learns at its next renewal")

			l, _ := awaitAcquire(t, b, claim("job", "owner-b"))
			assert.GreaterOrEqual(t, time.Since(start), 2*ttl*9/10, "taken before the bucket's maximum TTL")
			assert.Greater(t, l.Token, held.Token)
		})
	}
}

// A stream purge empties a session's key without a marker. A contender
// that never saw the session cannot tell that from a session whose end is
// long past, but the lock naming it shows that it existed: it waits the
// bucket's maximum TTL before it takes the lock.
func TestSessionKeyPurgedWaitsForAContenderThatNeverSawIt(t *testing.T) {
	t.Parallel()
	for _, mode := range []natsstore.ExpiryMode{natsstore.ExpiryServer, natsstore.ExpiryObserved} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t)
			var events eventLog
			cfg := natsstore.Config{Expiry: mode, MaxTTL: 2 * ttl}
			a := dial(t, srv.ClientURL(), cfg)
			_, js := conn(t, srv.ClientURL())
			sess := mustAcquire(t, a, claim("session.a", "owner-a"))
			held := acquireUnder(t, a, claim("job", "owner-a"), sess)
			streamPurge(t, js, a.Bucket(), "session.a")

			cfg.OnEvent = events.add
			b := dial(t, srv.ClientURL(), cfg)
			start := time.Now()
			got, err := b.Acquire(ctxT(t), claim("job", "owner-b"))
			require.NoError(t, err)
			require.False(t, got.Acquired, "taken at once although its session may be alive")
			assert.Contains(t, events.all(), natsstore.Event(natsstore.KeyVanished{Bucket: b.Bucket(), Key: "session.a",
				Emptied: true}))

			l, _ := awaitAcquire(t, b, claim("job", "owner-b"))
			assert.GreaterOrEqual(t, time.Since(start), 2*ttl*9/10, "taken before the bucket's maximum TTL")
			assert.Greater(t, l.Token, held.Token)
		})
	}
}

// A lock under a session is reported with its session by watches, Read and
// Leases, which gives it no expiry of its own.
func TestSessionLeaseIsReportedWithItsSession(t *testing.T) {
	t.Parallel()
	a, b, _, _ := twoStores(t, natsstore.Config{})
	sess := mustAcquire(t, a, claim("session.a", "owner-a"))
	events, err := b.Watch(t.Context(), "job")
	require.NoError(t, err)
	held := acquireUnder(t, a, claim("job", "owner-a"), sess)
	for ev := range events {
		if ev.Kind == lease.EventHeld {
			assert.Equal(t, "session.a", ev.Holder.Session)
			assert.Equal(t, held.Token, ev.Holder.Token)
			break
		}
	}
	o, err := b.Read(ctxT(t), "job")
	require.NoError(t, err)
	assert.True(t, o.Held)
	assert.Equal(t, "session.a", o.Holder.Session)
	infos, err := b.Leases(ctxT(t))
	require.NoError(t, err)
	var found bool
	for _, info := range infos {
		if info.LeaseID == "job" {
			found = true
			assert.Equal(t, natsstore.KeyHeld, info.State)
			assert.Equal(t, "session.a", info.Holder.Session)
			assert.True(t, info.ExpiresAt().IsZero(), "held while its session is")
		}
	}
	assert.True(t, found)
}
