package natsstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/shard"
	"github.com/asterforge/aster/shard/shardtest"
)

// A Store is the Directory a fleet needs: natsstore does not import shard,
// so the assertion lives here.
var _ shard.Directory = (*natsstore.Store)(nil)

func TestWatchPrefixConformance(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{})
	require.Equal(t, natsstore.ExpiryServer, s.Expiry())
	shardtest.Run(t, func(*testing.T) shardtest.Store { return s }, shardtest.WithTTL(time.Second))
}

func TestWatchPrefixConformanceObservedExpiry(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{Bucket: "legacy", Expiry: natsstore.ExpiryObserved})
	shardtest.Run(t, func(*testing.T) shardtest.Store { return s }, shardtest.WithTTL(time.Second),
		shardtest.WithoutExpiryEvents())
}

func TestWatchPrefixConformanceCluster(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	s := dial(t, c.ClientURL(), natsstore.Config{Replicas: 3})
	shardtest.Run(t, func(*testing.T) shardtest.Store { return s }, shardtest.WithTTL(time.Second))
}

// longClaim is a claim that outlives any test step.
func longClaim(id, owner string) lease.Claim {
	return lease.Claim{LeaseID: id, OwnerID: owner, Term: "term-" + owner, TTL: time.Minute,
		Meta: map[string]string{"addr": owner + ":80"}}
}

// watchPrefix opens a prefix watch that ends with the test.
func watchPrefix(t *testing.T, s *natsstore.Store, prefix string) ([]lease.Event, <-chan lease.Event) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	current, changes, err := s.WatchPrefix(ctx, prefix)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); awaitClosed(t, changes) })
	return current, changes
}

// latest reads changes until want says the latest events seen are enough,
// for at most 10 s (well under the 19 s a watch that is not re-created
// stays silent after a server restart).
func latest(t *testing.T, changes <-chan lease.Event, want func(map[string]lease.Event) bool) map[string]lease.Event {
	t.Helper()
	seen := map[string]lease.Event{}
	timeout := time.After(10 * time.Second)
	for !want(seen) {
		select {
		case ev, ok := <-changes:
			require.True(t, ok, "the watch closed")
			seen[ev.LeaseID] = ev
		case <-timeout:
			t.Fatalf("the events expected did not arrive; the latest seen: %v", seen)
		}
	}
	return seen
}

// Every entry is translated as Store.Watch translates it: held leases of
// both record versions, releases, deletes and purges by hand, values that
// are not leases and values of a newer version.
func TestWatchPrefixTranslatesAsWatch(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s := dial(t, srv.ClientURL(), natsstore.Config{})
	_, js := conn(t, srv.ClientURL())
	kv := bucket(t, js, s.Bucket())
	_, changes := watchPrefix(t, s, "xlate.")

	revs := map[string]uint64{}
	put := func(key, value string) {
		rev, err := kv.Put(ctxT(t), key, []byte(value))
		require.NoError(t, err)
		revs[key] = rev
	}
	held := mustAcquire(t, s, longClaim("xlate.held", "owner-a"))
	revs["xlate.held"] = held.Revision
	released := mustAcquire(t, s, longClaim("xlate.released", "owner-b"))
	require.NoError(t, s.Release(ctxT(t), released))
	revs["xlate.released"] = released.Revision + 1
	put("xlate.v1", "aster.lease/1 held owner-v1 0 60000 1700000000000 0123456789abcdef")
	put("xlate.corrupt", "not a lease")
	put("xlate.newer", "aster.lease/9 held owner-z term-z 0 60000 1700000000000 0123456789abcdef - and more")
	put("xlate.deleted", "not a lease")
	require.NoError(t, kv.Delete(ctxT(t), "xlate.deleted"))
	revs["xlate.deleted"]++
	put("xlate.purged", "not a lease")
	require.NoError(t, kv.Purge(ctxT(t), "xlate.purged"))
	revs["xlate.purged"]++

	got := latest(t, changes, func(seen map[string]lease.Event) bool {
		for key, rev := range revs {
			if seen[key].Revision != rev {
				return false
			}
		}
		return true
	})
	for key := range revs {
		ctx, cancel := context.WithCancel(context.Background())
		events, err := s.Watch(ctx, key)
		require.NoError(t, err)
		want := <-events // the key's current state
		cancel()
		awaitClosed(t, events)
		assert.Equal(t, want, got[key], key)
	}
	assert.Equal(t, "owner-a", got["xlate.held"].Holder.OwnerID)
	assert.Equal(t, map[string]string{"addr": "owner-a:80"}, got["xlate.held"].Holder.Meta)
	assert.Equal(t, "owner-v1", got["xlate.v1"].Holder.OwnerID)
	assert.Equal(t, lease.EventFree, got["xlate.released"].Kind)
	assert.Equal(t, lease.Event{LeaseID: "xlate.corrupt", Kind: lease.EventHeld, Revision: revs["xlate.corrupt"]},
		got["xlate.corrupt"], "held by nobody known, as Watch reports it")

	// A watch opened now lists the held keys (values that are not leases
	// are held too) as its current state, sorted.
	current, _ := watchPrefix(t, s, "xlate.")
	var ids []string
	for _, ev := range current {
		require.Equal(t, lease.EventHeld, ev.Kind)
		assert.Equal(t, got[ev.LeaseID], ev)
		ids = append(ids, ev.LeaseID)
	}
	assert.Equal(t, []string{"xlate.corrupt", "xlate.held", "xlate.newer", "xlate.v1"}, ids)
}

// After a server restart the watch is re-created: it reports the current
// state of every key again, a key that vanished without a marker while it
// could not see it (a stream purge) as free, and the changes made since.
func TestWatchPrefixSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	watcher := dial(t, srv.ClientURL(), natsstore.Config{})
	owner := dial(t, srv.ClientURL(), natsstore.Config{})
	a := mustAcquire(t, owner, longClaim("fleet.shards.a", "owner-a"))
	b := mustAcquire(t, owner, longClaim("fleet.shards.b", "owner-b"))
	gone := mustAcquire(t, owner, longClaim("fleet.members.gone", "owner-g"))

	current, changes := watchPrefix(t, watcher, "fleet.")
	require.Len(t, current, 3)

	// No watch sees a stream purge: it leaves no marker.
	_, js := conn(t, srv.ClientURL())
	stream, err := js.Stream(ctxT(t), "KV_"+owner.Bucket())
	require.NoError(t, err)
	require.NoError(t, stream.Purge(ctxT(t), jetstream.WithPurgeSubject("$KV."+owner.Bucket()+"."+gone.ID)))

	srv.Restart(t)
	got := latest(t, changes, func(seen map[string]lease.Event) bool {
		return seen[a.ID].Revision == a.Revision && seen[b.ID].Revision == b.Revision && len(seen) == 3
	})
	assert.Equal(t, lease.Event{LeaseID: a.ID, Kind: lease.EventHeld, Revision: a.Revision,
		Holder: lease.Holder{OwnerID: "owner-a", Term: "term-owner-a", Token: a.Token, TTL: time.Minute,
			Meta: map[string]string{"addr": "owner-a:80"}}}, got[a.ID], "the current state, again")
	assert.Equal(t, lease.Event{LeaseID: gone.ID, Kind: lease.EventFree}, got[gone.ID],
		"a key gone from the new watch's state is reported free")

	c := awaitNoError(t, func() (lease.Lease, error) {
		a, err := owner.Acquire(ctxT(t), longClaim("fleet.shards.c", "owner-c"))
		if err == nil && !a.Acquired {
			t.Fatalf("held by %q", a.Holder.OwnerID)
		}
		return a.Lease, err
	})
	ev := awaitEvent(t, changes, lease.EventHeld, c.Revision)
	assert.Equal(t, c.ID, ev.LeaseID)
	assert.Equal(t, c.Token, ev.Holder.Token)
}

// One KV watch serves a prefix of 1,024 keys: one consumer, one
// subscription.
func TestWatchPrefixOneWatchFor1024Keys(t *testing.T) {
	t.Parallel()
	const n = 1024
	srv := natstest.Start(t)
	nc, js := conn(t, srv.ClientURL())
	s, err := natsstore.NewConn(ctxT(t), nc, natsstore.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	leases := make([]lease.Lease, n)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				a, err := s.Acquire(ctxT(t), longClaim(fmt.Sprintf("big.shards.s%d", i), "owner-a"))
				if assert.NoError(t, err) && assert.True(t, a.Acquired) {
					leases[i] = a.Lease
				}
			}
		})
	}
	wg.Wait()
	stream, err := js.Stream(ctxT(t), "KV_"+s.Bucket())
	require.NoError(t, err)
	consumers := func() int {
		info, err := stream.Info(ctxT(t))
		require.NoError(t, err)
		return info.State.Consumers
	}
	consumersBefore, subsBefore := consumers(), nc.NumSubscriptions()

	current, changes := watchPrefix(t, s, "big.")
	require.Len(t, current, n)
	for _, ev := range current {
		require.Equal(t, lease.EventHeld, ev.Kind)
		require.Equal(t, "owner-a", ev.Holder.OwnerID)
	}
	assert.Equal(t, consumersBefore+1, consumers(), "one consumer for the whole prefix")
	assert.Equal(t, subsBefore+1, nc.NumSubscriptions(), "one subscription for the whole prefix")

	for _, i := range []int{0, 511, 1023} {
		require.NoError(t, s.Release(ctxT(t), leases[i]))
		ev := awaitEvent(t, changes, lease.EventFree, leases[i].Revision+1)
		assert.Equal(t, leases[i].ID, ev.LeaseID)
	}
}

// Without permission for flow-control replies the server stops delivering
// to a watch after about 2 MiB; the liveness check of a prefix watch (a read
// of the last revision under the prefix) notices, and re-creates it.
func TestWatchPrefixSurvivesUnansweredFlowControl(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, natstest.WithUser("admin", "a"),
		natstest.WithRestrictedUser("standby", "s", watchPermissions(natsstore.DefaultBucket, true), []string{"_INBOX.>"}))
	dial(t, srv.ClientURL(), natsstore.Config{}, natsstore.DialOptions{User: "admin", Password: "a"}) // creates the bucket
	rec := newWatchEvents()
	standby := dial(t, srv.ClientURL(), natsstore.Config{OnEvent: rec.on},
		natsstore.DialOptions{User: "standby", Password: "s"})
	_, changes := watchPrefix(t, standby, "fc.")

	_, js := conn(t, srv.ClientURL(), nats.UserInfo("admin", "a"))
	kv := bucket(t, js, natsstore.DefaultBucket)
	value := []byte(strings.Repeat("x", 1024))
	var last uint64
	for i := range 3000 { // 3 MiB: the watch stalls after about 2
		var err error
		last, err = kv.Put(ctxT(t), fmt.Sprintf("fc.k%d", i%10), value)
		require.NoError(t, err)
	}
	awaitEvent(t, changes, lease.EventHeld, last)

	stalled := awaitStoreEvent[natsstore.WatchStalled](t, rec)
	assert.Equal(t, "fc.>", stalled.Key)
	assert.Contains(t, stalled.Cause, "$JS.FC.KV_"+natsstore.DefaultBucket+".>")
	recovered := awaitStoreEvent[natsstore.WatchRecovered](t, rec)
	assert.Equal(t, "fc.>", recovered.Key)
}

// Errors are clear and immediate: a server that is down, a closed store.
func TestWatchPrefixErrors(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	s, err := natsstore.Dial(ctxT(t), natsstore.DialOptions{URLs: []string{srv.ClientURL()}}, natsstore.Config{})
	require.NoError(t, err)
	_, changes, err := s.WatchPrefix(context.Background(), "fleet.")
	require.NoError(t, err)

	srv.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _, err = s.WatchPrefix(ctx, "other.")
	require.ErrorIs(t, err, lease.ErrUnavailable)
	require.NoError(t, ctx.Err(), "WatchPrefix waited for its deadline instead of failing fast")

	require.NoError(t, s.Close())
	awaitClosed(t, changes)
	_, _, err = s.WatchPrefix(context.Background(), "fleet.")
	require.ErrorIs(t, err, lease.ErrClosed)
}
