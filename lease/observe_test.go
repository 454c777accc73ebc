package lease_test

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

const observed = "billing.outbox"

func claim(owner string) lease.Claim {
	return lease.Claim{LeaseID: observed, OwnerID: owner, Term: lease.NewTerm(), TTL: 10 * time.Second,
		Meta: map[string]string{"pod": owner}}
}

// drain returns what the channel holds once every goroutine of the bubble
// is blocked.
func drain(ch <-chan lease.Observation) []lease.Observation {
	synctest.Wait()
	var out []lease.Observation
	for {
		select {
		case o, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, o)
		default:
			return out
		}
	}
}

func holders(obs []lease.Observation) []string {
	var out []string
	for _, o := range obs {
		switch {
		case !o.Held:
			out = append(out, "free")
		default:
			out = append(out, o.Holder.OwnerID)
		}
	}
	return out
}

func TestObserveReportsHandoversNotRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		defer store.Close()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ch, err := lease.Observe(ctx, store, observed)
		require.NoError(t, err)

		a, err := store.Acquire(ctx, claim("node-a"))
		require.NoError(t, err)
		got := drain(ch)
		require.Equal(t, []string{"node-a"}, holders(got))
		assert.Equal(t, a.Lease.Token, got[0].Holder.Token)
		assert.Equal(t, a.Lease.Term, got[0].Holder.Term)
		assert.Equal(t, map[string]string{"pod": "node-a"}, got[0].Holder.Meta)
		assert.Equal(t, uint64(a.Lease.Token), got[0].Revision)
		assert.True(t, got[0].Seen.Equal(time.Now()), "seen now")

		held := a.Lease
		for range 3 {
			time.Sleep(time.Second)
			held, err = store.Renew(ctx, held)
			require.NoError(t, err)
			assert.Empty(t, drain(ch), "a renewal is not a change of holder")
		}

		require.NoError(t, store.Release(ctx, held))
		assert.Equal(t, []string{"free"}, holders(drain(ch)))

		b, err := store.Acquire(ctx, claim("node-b"))
		require.NoError(t, err)
		got = drain(ch)
		require.Equal(t, []string{"node-b"}, holders(got))
		assert.Greater(t, got[0].Holder.Token, a.Lease.Token)

		// Expiry: node-b stops renewing.
		time.Sleep(11 * time.Second)
		assert.Equal(t, []string{"free"}, holders(drain(ch)))
		_ = b
	})
}

func TestObserveSlowReceiverGetsTheLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		defer store.Close()
		ch, err := lease.Observe(t.Context(), store, observed)
		require.NoError(t, err)
		for _, owner := range []string{"node-a", "node-b", "node-c"} {
			a, err := store.Acquire(t.Context(), claim(owner))
			require.NoError(t, err)
			synctest.Wait() // the observer has seen it, and nobody has read it
			require.NoError(t, store.Release(t.Context(), a.Lease))
			synctest.Wait()
		}
		c, err := store.Acquire(t.Context(), claim("node-d"))
		require.NoError(t, err)
		got := drain(ch)
		require.Equal(t, []string{"node-d"}, holders(got), "only the latest waits for a slow receiver")
		assert.Equal(t, c.Lease.Token, got[0].Holder.Token)
	})
}

func TestObserveClosesWithContextAndStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewMemStore()
		ctx, cancel := context.WithCancel(t.Context())
		ch, err := lease.Observe(ctx, store, observed)
		require.NoError(t, err)
		cancel()
		synctest.Wait()
		for range ch { // the current state may come first
		}
		_, ok := <-ch
		assert.False(t, ok, "closed when ctx is done")

		ch, err = lease.Observe(t.Context(), store, observed)
		require.NoError(t, err)
		require.NoError(t, store.Close())
		synctest.Wait()
		for range ch { // the current state may come first
		}
		_, ok = <-ch
		assert.False(t, ok, "closed when the store closes, although ctx is not done")

		_, err = lease.Observe(t.Context(), store, observed)
		assert.ErrorIs(t, err, lease.ErrClosed)
	})
}

func TestObserveAndLeaderRejectBadArguments(t *testing.T) {
	store := leasetest.NewMemStore()
	defer store.Close()
	_, err := lease.Observe(t.Context(), store, "billing.*")
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = lease.Observe(t.Context(), nil, observed)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, _, err = lease.Leader(t.Context(), store, "")
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, _, err = lease.Leader(t.Context(), nil, observed)
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

// scripted is a Watcher whose watch reports the events of script, in order,
// then stays open until ctx is done (or closes at once when closeAfter).
type scripted struct {
	script     []lease.Event
	closeAfter bool
}

func (s scripted) Watch(ctx context.Context, _ string) (<-chan lease.Event, error) {
	ch := make(chan lease.Event)
	go func() {
		defer close(ch)
		for _, ev := range s.script {
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
		if !s.closeAfter {
			<-ctx.Done()
		}
	}()
	return ch, nil
}

func TestLeader(t *testing.T) {
	holder := lease.Holder{OwnerID: "node-a", Term: "t1", Token: 7, TTL: 10 * time.Second, Meta: map[string]string{"addr": "10.0.0.7:80"}}
	held := lease.Event{LeaseID: observed, Kind: lease.EventHeld, Holder: holder, Revision: 9}
	free := lease.Event{LeaseID: observed, Kind: lease.EventFree, Revision: 10}
	corrupt := lease.Event{LeaseID: observed, Kind: lease.EventHeld, Revision: 11}

	t.Run("held", func(t *testing.T) {
		h, ok, err := lease.Leader(t.Context(), scripted{script: []lease.Event{held, free}}, observed)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, holder, h, "the first event is the current state")
	})
	t.Run("free", func(t *testing.T) {
		h, ok, err := lease.Leader(t.Context(), scripted{script: []lease.Event{free, held}}, observed)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Zero(t, h)
	})
	t.Run("not a lease", func(t *testing.T) {
		_, ok, err := lease.Leader(t.Context(), scripted{script: []lease.Event{corrupt}}, observed)
		assert.ErrorIs(t, err, lease.ErrCorrupt)
		assert.True(t, ok, "nobody can take it")
	})
	t.Run("watch ends", func(t *testing.T) {
		_, _, err := lease.Leader(t.Context(), scripted{closeAfter: true}, observed)
		assert.ErrorIs(t, err, lease.ErrClosed)
	})
	t.Run("context ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			_, _, err := lease.Leader(ctx, scripted{}, observed)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		})
	})
	t.Run("store closed", func(t *testing.T) {
		store := leasetest.NewMemStore()
		require.NoError(t, store.Close())
		_, _, err := lease.Leader(t.Context(), store, observed)
		assert.ErrorIs(t, err, lease.ErrClosed)
	})
}

// pushed is a Watcher whose one watch reports what the test sends on ch.
type pushed struct{ ch chan lease.Event }

func (p pushed) Watch(ctx context.Context, _ string) (<-chan lease.Event, error) {
	out := make(chan lease.Event)
	go func() {
		defer close(out)
		for {
			select {
			case ev := <-p.ch:
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func TestObserveSkipsARepeatedState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := lease.Holder{OwnerID: "node-a", Term: "t1", Token: 7, TTL: 10 * time.Second}
		renewed := h
		renewed.Meta = map[string]string{"pod": "a"} // the same tenure
		w := pushed{ch: make(chan lease.Event)}
		ch, err := lease.Observe(t.Context(), w, observed)
		require.NoError(t, err)
		for _, step := range []struct {
			ev   lease.Event
			want []string
		}{
			{lease.Event{LeaseID: observed, Kind: lease.EventHeld, Holder: h, Revision: 7}, []string{"node-a"}},
			{lease.Event{LeaseID: observed, Kind: lease.EventHeld, Holder: renewed, Revision: 8}, nil}, // a renewal
			{lease.Event{LeaseID: observed, Kind: lease.EventHeld, Holder: renewed, Revision: 8}, nil}, // again, after a reconnect
			{lease.Event{LeaseID: observed, Kind: lease.EventFree, Revision: 9}, []string{"free"}},
			{lease.Event{LeaseID: observed, Kind: lease.EventFree, Revision: 9}, nil},
			{lease.Event{LeaseID: observed, Kind: lease.EventHeld, Revision: 10}, []string{""}}, // not a lease
			{lease.Event{LeaseID: observed, Kind: lease.EventHeld, Revision: 11}, nil},
			// The same term with a new token is a new tenure.
			{lease.Event{LeaseID: observed, Kind: lease.EventHeld, Holder: lease.Holder{OwnerID: "node-a", Term: "t1", Token: 12}, Revision: 12}, []string{"node-a"}},
		} {
			w.ch <- step.ev
			got := drain(ch)
			require.Equal(t, step.want, holders(got), "after revision %d", step.ev.Revision)
			if len(got) > 0 {
				assert.Equal(t, step.ev.Revision, got[0].Revision)
				assert.Equal(t, step.ev.Kind == lease.EventHeld, got[0].Held)
			}
		}
	})
}

// readable is a Watcher that is also a Reader.
type readable struct {
	pushed
	state lease.Observation
	reads int
}

func (r *readable) Read(_ context.Context, leaseID string) (lease.Observation, error) {
	r.reads++
	o := r.state
	o.LeaseID, o.Seen = leaseID, time.Now()
	return o, nil
}

func TestLeaderAndObserveReadTheCurrentState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := lease.Holder{OwnerID: "node-a", Term: "ta", Token: 10, TTL: 10 * time.Second}
		b := lease.Holder{OwnerID: "node-b", Term: "tb", Token: 8, TTL: 10 * time.Second}
		r := &readable{pushed: pushed{ch: make(chan lease.Event)}, state: lease.Observation{Held: true, Holder: a, Revision: 10}}

		h, held, err := lease.Leader(t.Context(), r, observed)
		require.NoError(t, err)
		assert.True(t, held)
		assert.Equal(t, a, h, "read, not waited for")
		assert.Equal(t, 1, r.reads)

		ch, err := lease.Observe(t.Context(), r, observed)
		require.NoError(t, err)
		got := drain(ch)
		require.Equal(t, []string{"node-a"}, holders(got), "the state read comes first, before any event")
		assert.Equal(t, uint64(10), got[0].Revision)

		// The watch was opened before the read: what it reports may be older.
		r.ch <- lease.Event{LeaseID: observed, Kind: lease.EventHeld, Holder: b, Revision: 8}
		assert.Empty(t, drain(ch), "older than what was read")
		r.ch <- lease.Event{LeaseID: observed, Kind: lease.EventHeld, Holder: a, Revision: 10}
		assert.Empty(t, drain(ch), "what was read")
		r.ch <- lease.Event{LeaseID: observed, Kind: lease.EventFree, Revision: 11}
		assert.Equal(t, []string{"free"}, holders(drain(ch)))

		r.state = lease.Observation{Held: true, Revision: 12}
		_, held, err = lease.Leader(t.Context(), r, observed)
		assert.ErrorIs(t, err, lease.ErrCorrupt)
		assert.True(t, held)
	})
}
