package shard_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/shard"
	"github.com/asterforge/aster/shard/shardtest"
)

// graceDir is a Directory that keeps a crashed member's key, as a NATS
// store does: the server removes a lease a grace of one TTL after it
// expired (natsstore.Config.ExpiryGrace), so that a watch opened meanwhile
// lists it as held, at its last revision. Those already watching saw its
// last write, and age it out after its TTL.
type graceDir struct {
	*shardtest.MemStore
	mu    sync.Mutex
	kept  []lease.Event // the keys of crashed members
	until time.Time     // when the server would remove them
}

// keep makes new watches list the lease's last write until until.
func (d *graceDir) keep(t *testing.T, leaseID string, until time.Time) {
	h, rev, ok := d.Holder(leaseID)
	require.True(t, ok, "%s is held", leaseID)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.kept = append(d.kept, lease.Event{LeaseID: leaseID, Kind: lease.EventHeld, Holder: h, Revision: rev})
	d.until = until
}

func (d *graceDir) WatchPrefix(ctx context.Context, prefix string) ([]lease.Event, <-chan lease.Event, error) {
	current, changes, err := d.MemStore.WatchPrefix(ctx, prefix)
	if err != nil {
		return nil, nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if time.Now().Before(d.until) {
		for _, ev := range d.kept {
			if !slices.ContainsFunc(current, func(c lease.Event) bool { return c.LeaseID == ev.LeaseID }) {
				current = append(current, ev)
			}
		}
	}
	return current, changes, nil
}

// TestJoinAfterACrash: an instance that joins while a crashed member's key
// is still kept by the store (its shards already taken by the others)
// takes every shard the others hand it, within a second of its start, at
// TTL 10 s. It used to count the crashed member, place some of those shards
// on it, and leave them free until the key aged out of its view: about a
// TTL (8.1 s in examples/shards).
func TestJoinAfterACrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 16)
		dir := &graceDir{MemStore: r.mem}
		r.tune = func(c *shard.Config) { c.Directory = dir }
		for i := range 3 {
			r.start(fmt.Sprintf("node-%d", i))
		}
		r.awaitBalance(time.Now(), time.Second)
		time.Sleep(4 * time.Second) // renewals are under way

		victim := "node-1"
		dir.keep(t, shard.MemberKey(prefix, victim), time.Now().Add(2*r.lc.TTL))
		r.crash(victim)
		took := r.awaitBalance(time.Now(), r.lc.TTL+time.Second)
		t.Logf("balanced %v after the crash (TTL %v)", took, r.lc.TTL)
		time.Sleep(time.Second)

		mark := r.check.mark()
		start := time.Now()
		n := r.start("node-3")
		took = r.awaitBalance(start, time.Second)
		t.Logf("balanced %v after the join", took)
		assert.Len(t, since[shard.ShardStarted](r.check, mark), 5, "the newcomer's share, and nothing else, moved")
		var members []string
		for _, m := range n.host.Status().Members {
			members = append(members, m.OwnerID)
		}
		assert.Equal(t, []string{"node-0", "node-2", "node-3"}, members)
		left := since[shard.MemberLeft](r.check, mark)
		require.Len(t, left, 1, "the newcomer counted the crashed member only until it saw that it holds nothing")
		assert.Equal(t, victim, left[0].OwnerID)
		r.check.safe(t)
	})
}
