package shard_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/shard"
)

func heldBy(id, owner string, rev uint64) lease.Event {
	return lease.Event{LeaseID: id, Kind: lease.EventHeld, Revision: rev,
		Holder: lease.Holder{OwnerID: owner, Term: "t-" + owner, TTL: time.Second}}
}

func TestAssess(t *testing.T) {
	shards := shard.Range("s", 4)
	members := []lease.Event{heldBy(shard.MemberKey(prefix, "a"), "a", 1), heldBy(shard.MemberKey(prefix, "b"), "b", 2)}
	hold := func(owners ...string) []lease.Event {
		evs := append([]lease.Event(nil), members...)
		for i, o := range owners {
			if o != "" {
				evs = append(evs, heldBy(shard.ShardKey(prefix, shards[i]), o, uint64(10+i)))
			}
		}
		return evs
	}
	balanced := shard.Place(shards, []string{"a", "b"}, nil)
	var owners []string
	for _, s := range shards {
		owners = append(owners, balanced[s])
	}

	a := shard.Assess(prefix, shards, hold(owners...))
	assert.Equal(t, []string{"a", "b"}, a.Members)
	assert.Equal(t, balanced, a.Placement)
	assert.Equal(t, balanced, a.Holders)
	assert.True(t, a.Balanced)
	assert.Zero(t, a.Moving)

	// A shard released and not taken yet: unbalanced, nothing moves.
	free := hold(owners...)
	free = append(free, lease.Event{LeaseID: shard.ShardKey(prefix, shards[0]), Kind: lease.EventFree, Revision: 20})
	a = shard.Assess(prefix, shards, free)
	assert.False(t, a.Balanced)
	assert.NotContains(t, a.Holders, shards[0])
	assert.Equal(t, balanced, a.Placement, "the placement is stable while its moves are made")
	assert.Zero(t, a.Moving)

	// One member holds everything: half of it moves.
	a = shard.Assess(prefix, shards, hold("a", "a", "a", "a"))
	assert.False(t, a.Balanced)
	assert.Equal(t, 2, a.Moving)

	// A member that left (its lease freed) holds nothing in the placement;
	// leases of other fleets and other names count for nothing.
	gone := hold("a", "a", "b", "b")
	gone = append(gone, lease.Event{LeaseID: shard.MemberKey(prefix, "b"), Kind: lease.EventFree, Revision: 30},
		heldBy(shard.MemberKey("other", "c"), "c", 31), heldBy(prefix+".elsewhere", "d", 32))
	a = shard.Assess(prefix, shards, gone)
	assert.Equal(t, []string{"a"}, a.Members)
	assert.False(t, a.Balanced)
	for _, s := range shards {
		assert.Equal(t, "a", a.Placement[s])
	}

	// No members: nothing is placed.
	a = shard.Assess(prefix, shards, nil)
	assert.Empty(t, a.Placement)
	assert.False(t, a.Balanced)
}

// Assess over the leases a Directory reports agrees with what every Host
// of the fleet reports in its Status: the same balance verdict, the same
// target for every shard.
func TestAssessAgreesWithHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 24)
		for _, n := range []string{"node-a", "node-b", "node-c"} {
			r.start(n)
		}
		r.awaitBalance(time.Now(), 10*time.Second)
		time.Sleep(time.Second) // every view has settled
		ctx, cancel := context.WithCancel(context.Background())
		current, _, err := r.mem.WatchPrefix(ctx, prefix+".")
		require.NoError(t, err)
		cancel()
		a := shard.Assess(prefix, r.shards, current)
		assert.True(t, a.Balanced)
		assert.Equal(t, []string{"node-a", "node-b", "node-c"}, a.Members)
		for _, m := range r.hosts {
			st := m.host.Status()
			assert.True(t, st.Balanced, m.name)
			for _, ss := range st.Shards {
				assert.Equal(t, ss.Target, a.Placement[ss.Name], "%s: shard %s", m.name, ss.Name)
				assert.Equal(t, ss.Holder, a.Holders[ss.Name], "%s: shard %s", m.name, ss.Name)
			}
		}

		// A fourth member joins: before the moves are made (they wait for
		// the settle delay), Assess sees the fleet unbalanced and the moves
		// that node-d's share needs.
		r.start("node-d")
		time.Sleep(5 * time.Millisecond)
		ctx, cancel = context.WithCancel(context.Background())
		current, _, err = r.mem.WatchPrefix(ctx, prefix+".")
		require.NoError(t, err)
		cancel()
		a = shard.Assess(prefix, r.shards, current)
		assert.False(t, a.Balanced)
		assert.Equal(t, 6, a.Moving, "node-d's share comes from the others")
		r.awaitBalance(time.Now(), 10*time.Second)
	})
}
