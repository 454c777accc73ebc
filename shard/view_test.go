package shard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/asterforge/aster/lease"
)

func held(id, owner string, rev uint64) lease.Event {
	return lease.Event{LeaseID: id, Kind: lease.EventHeld, Holder: lease.Holder{OwnerID: owner, Term: "t-" + owner, TTL: time.Second}, Revision: rev}
}

func free(id string, rev uint64) lease.Event {
	return lease.Event{LeaseID: id, Kind: lease.EventFree, Revision: rev}
}

// TestViewsConverge: two instances whose watches delivered different
// parts of one history (a watch coalesces, a new instance sees only the
// present) hold the same inputs for placement once they have seen the
// latest event of every lease. Otherwise a free shard could be placed, in
// every view, on some other member, and run nowhere.
func TestViewsConverge(t *testing.T) {
	id := ShardKey("fleet", "tenant/1")
	history := []lease.Event{held(id, "a", 1), free(id, 2), held(id, "b", 3), free(id, 4)}
	now := time.Now()

	all := newView("fleet", time.Second)
	for _, ev := range history {
		all.apply(ev, now)
	}
	coalesced := newView("fleet", time.Second)
	coalesced.apply(history[0], now)
	coalesced.apply(history[3], now)
	fresh := newView("fleet", time.Second)
	fresh.reset(nil, now)
	fresh.apply(history[3], now)

	assert.Equal(t, all.holders(), coalesced.holders())
	assert.Equal(t, all.holders(), fresh.holders())
}

func TestViewMembers(t *testing.T) {
	now := time.Now()
	v := newView("fleet", time.Second)
	ch := v.reset([]lease.Event{held(MemberKey("fleet", "a"), "a", 1), held(MemberKey("fleet", "b"), "b", 2),
		held(ShardKey("fleet", "s"), "a", 3), held("other.members.c", "c", 4)}, now)
	assert.True(t, ch.members)
	assert.True(t, ch.holders)
	assert.Equal(t, []string{"a", "b"}, v.memberIDs())
	assert.Equal(t, map[string]string{"s": "a"}, v.holders())

	assert.Equal(t, change{members: true}, v.apply(held(MemberKey("fleet", "a"), "a", 5), now),
		"the first write seen after a snapshot proves the member alive")
	assert.Equal(t, change{}, v.apply(held(MemberKey("fleet", "a"), "a", 6), now), "a renewal changes nothing")
	assert.Equal(t, change{}, v.apply(held(MemberKey("fleet", "a"), "a", 4), now), "an older event is ignored")
	assert.Equal(t, change{members: true}, v.apply(free(MemberKey("fleet", "b"), 6), now))
	assert.Equal(t, []string{"a"}, v.memberIDs())

	// A snapshot after a re-created watch: what it does not list is free.
	ch = v.reset([]lease.Event{held(MemberKey("fleet", "a"), "a", 7)}, now)
	assert.Equal(t, change{holders: true}, ch)
	assert.Empty(t, v.holders())
}

// TestViewAges: a lease not written for longer than its TTL, while the
// watch goes on reporting others, is free; a silent watch freezes the view.
func TestViewAges(t *testing.T) {
	now := time.Now()
	v := newView("fleet", time.Second)
	v.reset([]lease.Event{held(MemberKey("fleet", "a"), "a", 1), held(MemberKey("fleet", "b"), "b", 2)}, now)
	assert.Equal(t, change{}, v.age(), "however long the watch is silent")
	v.apply(held(MemberKey("fleet", "a"), "a", 3), now.Add(1500*time.Millisecond)) // a renews; b does not
	assert.Equal(t, change{members: true}, v.age())
	assert.Equal(t, []string{"a"}, v.memberIDs())
}

// TestViewPlaceable: a member seen only in a snapshot, never written
// since, that holds no shard counts for placement only unprovenFor after
// the snapshot: it may be the key of a crashed member, which the store
// keeps for a while. It counts again once it is written or holds a shard;
// the Host itself always counts, and Assess counts every held key.
func TestViewPlaceable(t *testing.T) {
	now := time.Now()
	later := now.Add(unprovenFor)
	v := newView("fleet", 10*time.Second)
	v.reset([]lease.Event{held(MemberKey("fleet", "a"), "a", 1), held(MemberKey("fleet", "b"), "b", 2),
		held(MemberKey("fleet", "c"), "c", 3), held(MemberKey("fleet", "d"), "d", 4),
		held(ShardKey("fleet", "s"), "a", 5)}, now)
	ids, recheck := v.placeable("d", now)
	assert.Equal(t, []string{"a", "b", "c", "d"}, ids)
	assert.Equal(t, later, recheck)
	ids, recheck = v.placeable("d", later)
	assert.Equal(t, []string{"a", "d"}, ids, "b and c hold nothing and were not written")
	assert.True(t, recheck.IsZero())
	assert.Equal(t, []string{"a", "b", "c", "d"}, v.memberIDs())
	assert.True(t, v.unproven("b"))

	assert.Equal(t, change{members: true}, v.apply(held(MemberKey("fleet", "b"), "b", 6), later), "b renews")
	assert.Equal(t, change{holders: true}, v.apply(held(ShardKey("fleet", "t"), "c", 7), later), "c takes a shard")
	ids, _ = v.placeable("d", later)
	assert.Equal(t, []string{"a", "b", "c", "d"}, ids)
	assert.False(t, v.unproven("b"))

	// A member that was written, aged out, and is listed again by a
	// re-created watch at the same revision has not been written since.
	w := newView("fleet", time.Second)
	w.reset(nil, now)
	w.apply(held(MemberKey("fleet", "e"), "e", 8), now)
	w.apply(held(MemberKey("fleet", "f"), "f", 9), now.Add(2*time.Second))
	assert.Equal(t, change{members: true}, w.age())
	w.reset([]lease.Event{held(MemberKey("fleet", "e"), "e", 8), held(MemberKey("fleet", "f"), "f", 9)}, now.Add(2*time.Second))
	ids, _ = w.placeable("f", now.Add(2*time.Second+unprovenFor))
	assert.Equal(t, []string{"f"}, ids)
}
