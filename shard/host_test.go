package shard_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/shard"
)

// TestFleetFollowsJoinsAndLeaves runs the goal's sequence: 64 shards, 1 →
// 4 → 8 → 3 members, one graceful join or leave at a time. After each
// change the fleet is balanced within a second (of virtual time), the
// shards that moved are exactly those the new shares require, and no shard
// ever ran twice at once.
func TestFleetFollowsJoinsAndLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 64)
		next := 0
		total, least := 0, 0
		var worst time.Duration
		step := func(join bool) {
			before := r.holders()
			mark := r.check.mark()
			start := time.Now()
			if join {
				r.start(fmt.Sprintf("node-%02d", next))
				next++
			} else {
				r.leave(r.names()[0])
			}
			took := r.awaitBalance(start, time.Second)
			worst = max(worst, took)
			time.Sleep(time.Second) // and it stays so
			require.True(t, r.balanced())
			moved := 0
			for _, ev := range since[shard.ShardStarted](r.check, mark) {
				if ev.From != "" {
					moved++
				}
			}
			acquired := len(since[shard.ShardStarted](r.check, mark))
			changes := len(since[shard.PlacementChanged](r.check, mark))
			assert.LessOrEqual(t, changes, len(r.names())+1, "one placement change per member: the moves do not change it")
			need := shard.MinMoves(r.shards, r.names(), before)
			orphans := 0
			for _, o := range before {
				if !contains(r.names(), o) {
					orphans++
				}
			}
			t.Logf("%d members: balanced in %v; %d shards moved (least %d), %d acquired (least %d)",
				len(r.names()), took, moved, need+orphans, acquired, need+orphans)
			if len(before) > 0 {
				assert.Equal(t, need+orphans, acquired, "every acquisition is a move the new shares require")
			}
			if len(before) > 0 {
				total += acquired
				least += need + orphans
			}
		}
		step(true) // 1
		for range 3 {
			step(true) // 4
		}
		for range 4 {
			step(true) // 8
		}
		for range 5 {
			step(false) // 3
		}
		t.Logf("moves %d, least %d; slowest balance %v", total, least, worst)
		r.check.safe(t)
	})
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestFleetSurvivesACrash: a member that stops renewing (a killed process)
// loses its shards once their TTL has run out; the others take exactly
// those, within TTL + 1 s.
func TestFleetSurvivesACrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 64)
		for i := range 4 {
			r.start(fmt.Sprintf("node-%d", i))
		}
		r.awaitBalance(time.Now(), time.Second)
		time.Sleep(4 * time.Second) // renewals are under way
		before := r.holders()
		mark := r.check.mark()
		start := time.Now()
		r.crash("node-2")
		took := r.awaitBalance(start, r.lc.TTL+time.Second)
		t.Logf("balanced %v after the crash (TTL %v)", took, r.lc.TTL)
		orphans := 0
		for _, o := range before {
			if o == "node-2" {
				orphans++
			}
		}
		started := since[shard.ShardStarted](r.check, mark)
		assert.Len(t, started, orphans, "only the crashed member's shards moved")
		for _, ev := range started {
			assert.Equal(t, "node-2", ev.From)
		}
		left := since[shard.MemberLeft](r.check, mark)
		assert.NotEmpty(t, left)
		r.check.safe(t)
	})
}

// TestFleetSurvivesAPartition: a member cut from the store stops its
// workloads before their leases can be taken (the singleton's rule, per
// shard); the others take its shards after their TTL; when it is back, it
// joins again and the fleet rebalances. No shard ever runs twice.
func TestFleetSurvivesAPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 30)
		for i := range 3 {
			r.start(fmt.Sprintf("node-%d", i))
		}
		r.awaitBalance(time.Now(), time.Second)
		time.Sleep(2 * time.Second)

		cut := r.hosts["node-1"]
		cut.faults.FailAll(leasetest.OpAll, lease.ErrUnavailable)
		start := time.Now()
		delete(r.hosts, "node-1") // the fleet balances without it
		took := r.awaitBalance(start, r.lc.TTL+time.Second)
		t.Logf("the others balanced %v after the partition", took)
		r.check.safe(t)

		cut.faults.Heal()
		r.hosts["node-1"] = cut
		start = time.Now()
		took = r.awaitBalance(start, 2*time.Minute)
		t.Logf("balanced again %v after the partition healed", took)
		assert.Equal(t, map[string]int{"node-0": 10, "node-1": 10, "node-2": 10}, r.table())
		r.check.safe(t)
	})
}

// TestDrainHandsEveryShardOver: Drain releases the membership, hands every
// shard over (the workloads see actors.ErrResigned), and the others take
// them at once.
func TestDrainHandsEveryShardOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 16)
		a, b := r.start("node-a"), r.start("node-b")
		r.awaitBalance(time.Now(), time.Second)
		mark := r.check.mark()
		require.NoError(t, a.host.Drain(t.Context()))
		assert.Equal(t, shard.StateDrained, a.host.Status().State)
		assert.Zero(t, a.host.Status().Owned)
		for s, o := range r.holders() {
			assert.NotEqual(t, "node-a", o, "%s is still held by the drained member", s)
		}
		handed := since[shard.ShardHandedOver](r.check, mark)
		assert.Len(t, handed, 8)
		for _, ev := range handed {
			assert.NoError(t, ev.Err)
			assert.NotZero(t, ev.Token)
			assert.ErrorIs(t, r.check.cause("node-a", ev.Shard), actors.ErrResigned)
		}
		delete(r.hosts, "node-a")
		r.awaitBalance(time.Now(), time.Second)
		assert.Equal(t, 16, b.host.Status().Owned)
		require.NoError(t, a.host.Drain(t.Context()), "a second Drain returns at once")
		require.NoError(t, a.stop())
		assert.Equal(t, shard.StateStopped, a.host.Status().State)
		assert.ErrorIs(t, a.host.Drain(t.Context()), shard.ErrInactive)
		r.check.safe(t)
	})
}

// TestFleetUnderChurn: members join, leave, crash and come back at random
// moments, often while the last change is still being carried out. The
// fleet ends balanced, and no shard ever ran twice at once.
func TestFleetUnderChurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 48)
		rnd := rand.New(rand.NewPCG(11, 13))
		next := 0
		join := func() { r.start(fmt.Sprintf("node-%02d", next)); next++ }
		join()
		join()
		for range 40 {
			names := r.names()
			switch k := rnd.IntN(10); {
			case k < 4 || len(names) < 2:
				join()
			case k < 8:
				r.leave(names[rnd.IntN(len(names))])
			default:
				r.crash(names[rnd.IntN(len(names))])
			}
			time.Sleep(time.Duration(rnd.IntN(3000)) * time.Millisecond)
		}
		took := r.awaitBalance(time.Now(), r.lc.TTL+time.Second)
		t.Logf("%d members; balanced %v after the last change", len(r.names()), took)
		r.check.safe(t)
	})
}
