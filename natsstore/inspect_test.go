package natsstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

func acquire(t *testing.T, s *natsstore.Store, id, owner string, ttl time.Duration, meta map[string]string) lease.Lease {
	t.Helper()
	a, err := s.Acquire(ctxT(t), lease.Claim{LeaseID: id, OwnerID: owner, Term: lease.NewTerm(), TTL: ttl, Meta: meta})
	require.NoError(t, err)
	require.True(t, a.Acquired, "%s is free", id)
	return a.Lease
}

// next waits for the next observation, for at most 10 s.
func next(t *testing.T, ch <-chan lease.Observation) lease.Observation {
	t.Helper()
	select {
	case o, ok := <-ch:
		require.True(t, ok, "the observation channel closed")
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("no observation within 10 s")
		return lease.Observation{}
	}
}

// quiet reports whether ch has nothing to receive once the store has
// answered a round trip after the last write (a watch delivers in order).
func quiet(t *testing.T, s *natsstore.Store, ch <-chan lease.Observation, probe string) bool {
	t.Helper()
	pc, err := lease.Observe(ctxT(t), s, probe)
	require.NoError(t, err)
	next(t, pc) // the probe's watch was created after the last write and has reported its state
	select {
	case o := <-ch:
		t.Logf("unexpected observation: %+v", o)
		return false
	default:
		return true
	}
}

func TestLeasesListsEveryKeyWithItsState(t *testing.T) {
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "inspect"})
	_, js := conn(t, srv.ClientURL())
	kv := bucket(t, js, "inspect")

	empty, err := s.Leases(ctxT(t))
	require.NoError(t, err)
	assert.Empty(t, empty)

	before := time.Now().Add(-time.Millisecond)
	held := acquire(t, s, "billing.outbox", "pod-a", 10*time.Second, map[string]string{"addr": "10.0.0.7:8080"})
	held, err = s.Renew(ctxT(t), held)
	require.NoError(t, err)
	released := acquire(t, s, "reports.daily", "pod-b", 10*time.Second, nil)
	require.NoError(t, s.Release(ctxT(t), released))
	acquire(t, s, "deleted.by.hand", "pod-c", 10*time.Second, nil)
	require.NoError(t, kv.Delete(ctxT(t), "deleted.by.hand"))
	acquire(t, s, "purged.by.hand", "pod-c", 10*time.Second, nil)
	require.NoError(t, kv.Purge(ctxT(t), "purged.by.hand"))
	_, err = kv.PutString(ctxT(t), "not.a.lease", "hello")
	require.NoError(t, err)

	// One lease expires at the server (per-message TTLs are whole seconds).
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	expiring := acquire(t, s, "expiring", "pod-d", time.Second, nil)
	obs, err := lease.Observe(ctx, s, "expiring")
	require.NoError(t, err)
	require.True(t, next(t, obs).Held)
	require.False(t, next(t, obs).Held, "expired")
	after := time.Now()

	infos, err := s.Leases(ctxT(t))
	require.NoError(t, err)
	byID := map[string]natsstore.LeaseInfo{}
	var ids []string
	for _, i := range infos {
		byID[i.LeaseID] = i
		ids = append(ids, i.LeaseID)
	}
	assert.Equal(t, []string{"billing.outbox", "deleted.by.hand", "expiring", "not.a.lease", "purged.by.hand", "reports.daily"}, ids,
		"every key, sorted")

	h := byID["billing.outbox"]
	assert.Equal(t, natsstore.KeyHeld, h.State)
	assert.Equal(t, lease.Holder{OwnerID: "pod-a", Term: held.Term, Token: held.Token, TTL: 10 * time.Second,
		Meta: map[string]string{"addr": "10.0.0.7:8080"}}, h.Holder)
	assert.Equal(t, held.Revision, h.Revision, "the renewal's revision")
	assert.WithinRange(t, h.Acquired, before.Truncate(time.Millisecond), after)
	assert.WithinRange(t, h.Written, before, after)
	assert.Equal(t, h.Written.Add(10*time.Second), h.ExpiresAt())

	r := byID["reports.daily"]
	assert.Equal(t, natsstore.KeyReleased, r.State)
	assert.Equal(t, lease.Holder{OwnerID: "pod-b", Term: released.Term, Token: released.Token}, r.Holder,
		"who released it")
	assert.False(t, r.Acquired.IsZero())
	assert.Zero(t, r.ExpiresAt(), "only a held lease expires")

	assert.Equal(t, natsstore.KeyDeleted, byID["deleted.by.hand"].State)
	assert.Equal(t, natsstore.KeyPurged, byID["purged.by.hand"].State)
	e := byID["expiring"]
	assert.Equal(t, natsstore.KeyExpired, e.State)
	assert.Greater(t, e.Revision, uint64(expiring.Token))
	c := byID["not.a.lease"]
	assert.Equal(t, natsstore.KeyCorrupt, c.State)
	assert.Equal(t, "not an aster lease record", c.Problem)
	assert.Zero(t, c.Holder)

	// Read agrees with the listing.
	for id, want := range map[string]bool{"billing.outbox": true, "reports.daily": false, "deleted.by.hand": false,
		"purged.by.hand": false, "expiring": false, "not.a.lease": true, "never.written": false} {
		o, err := s.Read(ctxT(t), id)
		require.NoError(t, err, id)
		assert.Equal(t, want, o.Held, id)
		assert.Equal(t, byID[id].Revision, o.Revision, id)
		if want {
			assert.Equal(t, byID[id].Holder.Term, o.Holder.Term, id)
		} else {
			assert.Zero(t, o.Holder, id)
		}
	}

	require.NoError(t, s.Close())
	_, err = s.Leases(ctxT(t))
	assert.ErrorIs(t, err, lease.ErrClosed)
	_, err = s.Read(ctxT(t), "billing.outbox")
	assert.ErrorIs(t, err, lease.ErrClosed)
}

func TestKeyStateNames(t *testing.T) {
	for st, want := range map[natsstore.KeyState]string{
		natsstore.KeyUnknown: "unknown", natsstore.KeyHeld: "held", natsstore.KeyReleased: "released",
		natsstore.KeyExpired: "expired", natsstore.KeyDeleted: "deleted", natsstore.KeyPurged: "purged",
		natsstore.KeyCorrupt: "corrupt", natsstore.KeyState(99): "KeyState(99)",
	} {
		assert.Equal(t, want, st.String())
		b, err := st.MarshalText()
		require.NoError(t, err)
		assert.Equal(t, want, string(b))
	}
}

// lease.Leader and lease.Observe over a natsstore watch, which reports the
// key's current state first.
func TestLeaderAndObserveOverNATS(t *testing.T) {
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "observe"})
	other := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "observe"})
	_, js := conn(t, srv.ClientURL())
	kv := bucket(t, js, "observe")

	_, held, err := lease.Leader(ctxT(t), s, "billing.outbox")
	require.NoError(t, err)
	assert.False(t, held, "never written")

	meta := map[string]string{"addr": "10.0.0.7:8080", "pod": "billing-7"}
	a := acquire(t, other, "billing.outbox", "pod-a", 10*time.Second, meta)
	h, held, err := lease.Leader(ctxT(t), s, "billing.outbox")
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, lease.Holder{OwnerID: "pod-a", Term: a.Term, Token: a.Token, TTL: 10 * time.Second, Meta: meta}, h)

	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	ch, err := lease.Observe(ctx, s, "billing.outbox")
	require.NoError(t, err)
	o := next(t, ch)
	assert.True(t, o.Held, "the current state first")
	assert.Equal(t, a.Token, o.Holder.Token)
	assert.Equal(t, meta, o.Holder.Meta)

	for range 3 {
		a, err = other.Renew(ctxT(t), a)
		require.NoError(t, err)
	}
	assert.True(t, quiet(t, s, ch, "probe.renewals"), "renewals are not reported")

	require.NoError(t, other.Release(ctxT(t), a))
	o = next(t, ch)
	assert.False(t, o.Held)
	b := acquire(t, other, "billing.outbox", "pod-b", 10*time.Second, nil)
	o = next(t, ch)
	assert.True(t, o.Held)
	assert.Equal(t, "pod-b", o.Holder.OwnerID)
	assert.Equal(t, b.Token, o.Holder.Token)
	assert.Equal(t, b.Token, lease.Token(o.Revision))

	// A value that is not a lease.
	_, err = kv.PutString(ctxT(t), "billing.outbox", "hello")
	require.NoError(t, err)
	o = next(t, ch)
	assert.True(t, o.Held)
	assert.Empty(t, o.Holder.OwnerID)
	_, held, err = lease.Leader(ctxT(t), s, "billing.outbox")
	assert.ErrorIs(t, err, lease.ErrCorrupt)
	assert.True(t, held)

	// The store closes: the observation ends although ctx is not done.
	require.NoError(t, s.Close())
	select {
	case _, ok := <-ch:
		assert.False(t, ok)
	case <-time.After(10 * time.Second):
		t.Fatal("the observation did not end with the store")
	}
}
