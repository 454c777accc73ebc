package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
	"github.com/asterforge/aster/natsstore"
)

// natsRig is an in-process server with a raw JetStream connection for
// checks, and stores opened on it.
type natsRig struct {
	srv *natstest.Server
	js  jetstream.JetStream
}

func newNATSRig(t *testing.T) *natsRig {
	t.Helper()
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return &natsRig{srv: srv, js: js}
}

// store opens a natsstore on bucket "locks", closed when the test ends.
func (r *natsRig) store(t *testing.T) *natsstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{r.srv.ClientURL()},
		ReconnectWait: 20 * time.Millisecond}, natsstore.Config{Bucket: "locks"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

// locker opens a Locker on store, closed when the test ends.
func (r *natsRig) locker(t *testing.T, store lease.Store, cfg lock.Config) *lock.Locker {
	t.Helper()
	l, err := lock.New(store, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close(context.Background())) })
	return l
}

// last returns the last message stored for a lock's key: its revision and
// the per-message TTL the server keeps it for.
func (r *natsRig) last(t *testing.T, resource string) (rev uint64, ttl string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := r.js.Stream(ctx, "KV_locks")
	require.NoError(t, err)
	m, err := st.GetLastMsgForSubject(ctx, "$KV.locks."+resource)
	require.NoError(t, err)
	return m.Sequence, m.Header.Get(jetstream.MsgTTLHeader)
}

func TestExtendOnNATS(t *testing.T) {
	r := newNATSRig(t)
	renewed := make(chan lock.LockRenewed, 16)
	l := r.locker(t, r.store(t), lock.Config{OwnerID: "node-a", TTL: 2 * time.Second, OnEvent: func(ev lock.Event) {
		if e, ok := ev.(lock.LockRenewed); ok {
			select {
			case renewed <- e:
			default:
			}
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := l.Acquire(ctx, "res")
	require.NoError(t, err)
	token, _ := g.Token()
	rev, ttl := r.last(t, "res")
	assert.Equal(t, uint64(token), rev)
	assert.Equal(t, "4s", ttl, "the server keeps it for its TTL and a grace of one TTL")

	require.NoError(t, g.Extend(ctx, 6*time.Second))
	<-renewed // the renewal Extend made
	_, ttl = r.last(t, "res")
	assert.Equal(t, "12s", ttl, "Extend renewed with the new TTL")
	for range 2 { // and the watchdog keeps renewing with it
		e := <-renewed
		assert.Equal(t, 6*time.Second, e.TTL)
		assert.Equal(t, token, e.Token)
	}
	rev, ttl = r.last(t, "res")
	assert.Equal(t, "12s", ttl)
	assert.Greater(t, rev, uint64(token))
	_, err = g.Token()
	require.NoError(t, err)
	require.NoError(t, g.Release(ctx))
}

// The store's floor is not known to the Watchdog: a TTL that fits the
// lease margins but not natsstore (below 1 s) passes the Watchdog's check,
// the store refuses the renewal as invalid, and the Watchdog poisons the
// guard, as it does for every answer that retrying cannot fix. This test
// pins that behaviour; see Guard.Extend.
func TestExtendBelowTheStoreFloorOnNATS(t *testing.T) {
	r := newNATSRig(t)
	l := r.locker(t, r.store(t), lock.Config{OwnerID: "node-a", TTL: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := l.Acquire(ctx, "res")
	require.NoError(t, err)
	before := g.ValidUntil()
	// The store refuses the TTL (natsstore: under 1 s): the Extend fails,
	// and the lock is kept with its previous TTL.
	err = g.Extend(ctx, 500*time.Millisecond)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	assert.NotErrorIs(t, err, lease.ErrLost)
	assert.False(t, closed(g.Lost()))
	require.NoError(t, g.Err())
	assert.Equal(t, 2*time.Second, g.TTL())
	_, err = g.Token()
	require.NoError(t, err)
	require.Eventually(t, func() bool { return g.ValidUntil().After(before) }, 10*time.Second, 10*time.Millisecond,
		"still renewed")
	require.NoError(t, g.Err())

	// The per-lock TTL option, by contrast, is checked by the store at once.
	_, err = l.TryAcquire(ctx, "other", lock.WithTTL(500*time.Millisecond))
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

func TestHandoverOnNATSIsWokenByTheWatch(t *testing.T) {
	r := newNATSRig(t)
	a := r.locker(t, r.store(t), lock.Config{OwnerID: "node-a"})
	// Polls would come after minutes: only the watch can wake B in time.
	bStore := leasetest.NewFaultStore(r.store(t)) // to see B's attempts
	b := r.locker(t, bStore, lock.Config{OwnerID: "node-b", RetryInterval: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ga, err := a.Acquire(ctx, "res")
	require.NoError(t, err)
	got := make(chan *lock.Guard, 1)
	go func() {
		g, err := b.Acquire(ctx, "res")
		assert.NoError(t, err)
		got <- g
	}()
	require.Eventually(t, func() bool { return bStore.Calls(leasetest.OpAcquire) >= 1 }, 10*time.Second, time.Millisecond,
		"B has started its first attempt")
	assert.Empty(t, got, "B did not acquire a held lock")
	ta, _ := ga.Token()
	require.NoError(t, ga.Release(ctx))
	gb := <-got
	require.NotNil(t, gb)
	// B acquired well before its first poll (an eighth of an hour): its
	// first attempt found the key held and the watch woke it, or (a race
	// this test does not control) the first attempt came after the release.
	assert.LessOrEqual(t, bStore.Calls(leasetest.OpAcquire), 2)
	tb, err := gb.Token()
	require.NoError(t, err)
	assert.Greater(t, tb, ta)
}

func TestReleaseAfterLossOnNATS(t *testing.T) {
	r := newNATSRig(t)
	faults := leasetest.NewFaultStore(r.store(t))
	a := r.locker(t, faults, lock.Config{OwnerID: "node-a", TTL: time.Second})
	b := r.locker(t, r.store(t), lock.Config{OwnerID: "node-b"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ga, err := a.Acquire(ctx, "res")
	require.NoError(t, err)
	faults.FailAll(leasetest.OpRenew, lease.ErrUnavailable) // A is cut off from the store

	gb, err := b.Acquire(ctx, "res") // once A's key has expired at the server
	require.NoError(t, err)
	assert.True(t, closed(ga.Lost()), "A gave up before its key expired")
	tb, _ := gb.Token()
	rev, _ := r.last(t, "res")
	assert.Equal(t, uint64(tb), rev)

	faults.Heal() // A can reach the store again, and releases
	assert.ErrorIs(t, ga.Release(ctx), lease.ErrLost)
	rev2, _ := r.last(t, "res")
	assert.Equal(t, rev, rev2, "B's key is untouched")
	_, err = gb.Token()
	require.NoError(t, err)
	require.NoError(t, gb.Release(ctx))
}

// A lock lost at its renew deadline because the server was down: the
// server, back after more than the TTL since the last renewal, still holds
// the key (it keeps a value for its TTL and a grace, and a restarted server
// expires nothing at once), and the waiters' observation started again
// when their attempts failed. The Locker gives the key back once the server
// answers, no earlier than the TTL after the last renewal, so that a waiter
// need not wait a TTL more; the waiter then takes it. Under a session, the
// session's key is given back, which frees the locks under it.
func TestLostLockKeyIsGivenBackAfterAnOutageOnNATS(t *testing.T) {
	for _, session := range []bool{false, true} {
		t.Run(fmt.Sprintf("session=%v", session), func(t *testing.T) {
			r := newNATSRig(t)
			sa := r.store(t)
			renewed := make(chan lock.LockRenewed, 64)
			a := r.locker(t, sa, lock.Config{OwnerID: "node-a", TTL: 2 * time.Second, Session: session,
				OnEvent: func(ev lock.Event) {
					if e, ok := ev.(lock.LockRenewed); ok {
						select {
						case renewed <- e:
						default:
						}
					}
				}})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ga, err := a.Acquire(ctx, "res")
			require.NoError(t, err)
			tokenA, _ := ga.Token()
			if !session { // a session was written when it opened, just now
				select {
				case <-renewed:
				case <-ctx.Done():
					t.Fatal("no renewal")
				}
			}
			r.srv.Shutdown() // right after a write
			time.Sleep(3 * time.Second)
			require.True(t, closed(ga.Lost()), "lost at its renew deadline")
			r.srv.Restart(t)

			// The key (or the session's) is released by A: not expired, not
			// taken over.
			require.Eventually(t, func() bool {
				infos, err := sa.Leases(ctx)
				if err != nil {
					return false
				}
				for _, i := range infos {
					if (i.LeaseID == "res") != session && i.State == natsstore.KeyReleased && i.Holder.OwnerID == "node-a" {
						return true
					}
				}
				return false
			}, 10*time.Second, 20*time.Millisecond, "the lost lock's key was not given back")
			assert.ErrorIs(t, ga.Release(ctx), lease.ErrLost, "nothing of A's is left to release")

			b := r.locker(t, r.store(t), lock.Config{OwnerID: "node-b", TTL: 2 * time.Second})
			gb, err := b.Acquire(ctx, "res")
			require.NoError(t, err)
			tb, _ := gb.Token()
			assert.Greater(t, tb, tokenA)
			require.NoError(t, gb.Release(ctx))
		})
	}
}
