package shardtest

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
	"github.com/asterforge/aster/shard"
)

// Store is what Run checks: a lease.Store whose leases a shard.Directory
// watches.
type Store interface {
	lease.Store
	shard.Directory
}

// Option tunes Run for a store.
type Option func(*suite)

// WithTTL sets the TTL of the leases the suite takes (default 1 s). NATS
// needs whole seconds.
func WithTTL(ttl time.Duration) Option { return func(s *suite) { s.ttl = ttl } }

// InVirtualTime runs every subtest inside a testing/synctest bubble. The
// store must be created by newStore inside the bubble.
func InVirtualTime() Option { return func(s *suite) { s.virtual = true } }

// WithoutExpiryEvents says the store's watch cannot report an expiry; the
// suite then does not check that one is reported.
func WithoutExpiryEvents() Option { return func(s *suite) { s.noExpiryEvents = true } }

type suite struct {
	newStore       func(t *testing.T) Store
	ttl            time.Duration
	virtual        bool
	noExpiryEvents bool
	seq            atomic.Uint64
}

// Run checks that the stores made by newStore keep the shard.Directory
// contract. newStore is called once per subtest; it may return the same
// backend each time, because every subtest uses a prefix of its own.
func Run(t *testing.T, newStore func(t *testing.T) Store, opts ...Option) {
	s := &suite{newStore: newStore, ttl: time.Second}
	for _, o := range opts {
		o(s)
	}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Store)
	}{
		{"CurrentListsHeldLeases", s.current},
		{"ChangesInOrder", s.changes},
		{"OnlyThePrefix", s.onlyPrefix},
		{"LatestOfEveryLease", s.latest},
		{"Expiry", s.expiry},
		{"ClosesWithContext", s.closes},
		{"InvalidPrefix", s.invalid},
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

// prefix returns a prefix unique to this run of the suite.
func (s *suite) prefix(t *testing.T) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, t.Name())
	return fmt.Sprintf("shardtest.%s-%d-%d.", name, time.Now().UnixNano(), s.seq.Add(1))
}

func (s *suite) claim(id, owner string) lease.Claim {
	return lease.Claim{LeaseID: id, OwnerID: owner, Term: "term-of-" + owner, TTL: s.ttl,
		Meta: map[string]string{"addr": owner + ":1"}}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func acquire(t *testing.T, st Store, c lease.Claim) lease.Lease {
	t.Helper()
	a, err := st.Acquire(ctxT(t), c)
	require.NoError(t, err)
	require.True(t, a.Acquired, "%s should acquire %s", c.OwnerID, c.LeaseID)
	return a.Lease
}

func watch(t *testing.T, st Store, prefix string) ([]lease.Event, <-chan lease.Event, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	current, ch, err := st.WatchPrefix(ctx, prefix)
	require.NoError(t, err)
	return current, ch, cancel
}

// next returns the next event of id, skipping those of other leases.
func next(t *testing.T, ch <-chan lease.Event, id string, limit time.Duration) lease.Event {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			require.True(t, ok, "the watch closed")
			if ev.LeaseID == id {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no event of %s within %v", id, limit)
		}
	}
}

func (s *suite) eventLimit() time.Duration { return 5 * time.Second }

func (s *suite) current(t *testing.T, st Store) {
	p := s.prefix(t)
	a := acquire(t, st, s.claim(p+"members.a", "owner-a"))
	b := acquire(t, st, s.claim(p+"shards.tenant/1", "owner-b"))
	freed := acquire(t, st, s.claim(p+"shards.tenant/2", "owner-b"))
	require.NoError(t, st.Release(ctxT(t), freed))
	acquire(t, st, s.claim(strings.TrimSuffix(p, ".")+"x.other", "owner-c")) // a sibling prefix

	current, _, _ := watch(t, st, p)
	held := map[string]lease.Event{}
	for _, ev := range current {
		require.True(t, strings.HasPrefix(ev.LeaseID, p), "%s is not under %s", ev.LeaseID, p)
		if ev.Kind == lease.EventHeld {
			held[ev.LeaseID] = ev
		}
	}
	require.Len(t, held, 2)
	for _, l := range []lease.Lease{a, b} {
		ev := held[l.ID]
		assert.Equal(t, l.OwnerID, ev.Holder.OwnerID)
		assert.Equal(t, l.Term, ev.Holder.Term)
		assert.Equal(t, l.Token, ev.Holder.Token)
		assert.Equal(t, l.TTL, ev.Holder.TTL)
		assert.Equal(t, l.Meta, ev.Holder.Meta)
		assert.NotZero(t, ev.Revision)
	}
}

func (s *suite) changes(t *testing.T, st Store) {
	p := s.prefix(t)
	id := p + "shards.s"
	_, ch, _ := watch(t, st, p)
	l := acquire(t, st, s.claim(id, "owner-a"))
	ev := next(t, ch, id, s.eventLimit())
	assert.Equal(t, lease.EventHeld, ev.Kind)
	assert.Equal(t, "owner-a", ev.Holder.OwnerID)
	assert.Equal(t, l.Token, ev.Holder.Token)
	first := ev.Revision

	l, err := st.Renew(ctxT(t), l)
	require.NoError(t, err)
	ev = next(t, ch, id, s.eventLimit())
	assert.Equal(t, lease.EventHeld, ev.Kind, "a renewal is a write")
	assert.Equal(t, l.Token, ev.Holder.Token)
	assert.Greater(t, ev.Revision, first)

	require.NoError(t, st.Release(ctxT(t), l))
	ev = next(t, ch, id, s.eventLimit())
	assert.Equal(t, lease.EventFree, ev.Kind)

	l2 := acquire(t, st, s.claim(id, "owner-b"))
	ev = next(t, ch, id, s.eventLimit())
	assert.Equal(t, lease.EventHeld, ev.Kind)
	assert.Equal(t, "owner-b", ev.Holder.OwnerID)
	assert.Greater(t, ev.Holder.Token, l.Token)
	assert.Equal(t, l2.Token, ev.Holder.Token)
}

func (s *suite) onlyPrefix(t *testing.T, st Store) {
	p := s.prefix(t)
	_, ch, _ := watch(t, st, p)
	acquire(t, st, s.claim(strings.TrimSuffix(p, ".")+"x.a", "owner-x")) // shares the prefix's characters, not its tokens
	acquire(t, st, s.claim(strings.TrimSuffix(p, "."), "owner-y"))       // the prefix's own name
	acquire(t, st, s.claim(p+"z", "owner-z"))                            // a marker
	// Events of different leases need not arrive in order: read for a while
	// after the marker.
	var quiet <-chan time.Time
	timer := time.NewTimer(s.eventLimit())
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			require.True(t, ok, "the watch closed")
			require.True(t, strings.HasPrefix(ev.LeaseID, p), "%s is not under %s", ev.LeaseID, p)
			if ev.LeaseID == p+"z" && quiet == nil {
				assert.Equal(t, "owner-z", ev.Holder.OwnerID)
				quiet = time.After(200 * time.Millisecond)
			}
		case <-quiet:
			return
		case <-timer.C:
			t.Fatalf("no event of %sz within %v", p, s.eventLimit())
		}
	}
}

func (s *suite) latest(t *testing.T, st Store) {
	const n = 40
	p := s.prefix(t)
	_, ch, _ := watch(t, st, p)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("%sshards.s%d", p, i)
			l, err := st.Acquire(ctxT(t), s.claim(id, "owner-a"))
			if assert.NoError(t, err) && i%2 == 0 {
				assert.NoError(t, st.Release(ctxT(t), l.Lease))
			}
		})
	}
	wg.Wait()
	last := map[string]lease.EventKind{}
	timer := time.NewTimer(s.eventLimit())
	defer timer.Stop()
	done := func() bool {
		if len(last) < n {
			return false
		}
		for i := range n {
			want := lease.EventHeld
			if i%2 == 0 {
				want = lease.EventFree
			}
			if last[fmt.Sprintf("%sshards.s%d", p, i)] != want {
				return false
			}
		}
		return true
	}
	for !done() {
		select {
		case ev := <-ch:
			last[ev.LeaseID] = ev.Kind
		case <-timer.C:
			t.Fatalf("the latest event of every lease did not arrive: %v", last)
		}
	}
}

func (s *suite) expiry(t *testing.T, st Store) {
	if s.noExpiryEvents {
		t.Skip("the store reports no expiry")
	}
	p := s.prefix(t)
	id := p + "members.gone"
	_, ch, _ := watch(t, st, p)
	acquire(t, st, s.claim(id, "owner-a"))
	require.Equal(t, lease.EventHeld, next(t, ch, id, s.eventLimit()).Kind)
	ev := next(t, ch, id, 3*s.ttl+2*time.Second)
	assert.Equal(t, lease.EventFree, ev.Kind, "the lease expired")
}

func (s *suite) closes(t *testing.T, st Store) {
	p := s.prefix(t)
	_, ch, cancel := watch(t, st, p)
	cancel()
	timer := time.NewTimer(s.eventLimit())
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatal("the watch did not close when its context ended")
		}
	}
}

func (s *suite) invalid(t *testing.T, st Store) {
	for _, p := range []string{"", "fleet", ".fleet.", "fleet..", "fl eet.", "fleet.>", "fleet.*."} {
		_, _, err := st.WatchPrefix(t.Context(), p)
		assert.ErrorIs(t, err, lease.ErrInvalid, "%q", p)
	}
}
