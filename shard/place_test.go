package shard

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// names returns prefix0 … prefix<n-1>.
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// counts returns how many shards each member gets.
func counts(p map[string]string) map[string]int {
	c := map[string]int{}
	for _, m := range p {
		c[m]++
	}
	return c
}

func TestPlaceTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		shards  []string
		members []string
		holders map[string]string
		want    map[string]string
	}{
		{name: "no members", shards: names("s", 3), want: map[string]string{}},
		{name: "no shards", members: []string{"a"}, want: map[string]string{}},
		{name: "one member takes all", shards: names("s", 3), members: []string{"a"},
			want: map[string]string{"s0": "a", "s1": "a", "s2": "a"}},
		{name: "holders within their share keep their shards", shards: names("s", 4), members: []string{"a", "b"},
			holders: map[string]string{"s0": "b", "s1": "b", "s2": "a", "s3": "a"},
			want:    map[string]string{"s0": "b", "s1": "b", "s2": "a", "s3": "a"}},
		{name: "a member that left frees its shards", shards: names("s", 4), members: []string{"a", "b"},
			holders: map[string]string{"s0": "c", "s1": "c", "s2": "a", "s3": "a"},
			want:    map[string]string{"s0": "b", "s1": "b", "s2": "a", "s3": "a"}},
		{name: "a member above its share sheds to the one below", shards: names("s", 4), members: []string{"a", "b"},
			holders: map[string]string{"s0": "a", "s1": "a", "s2": "a", "s3": "b"},
			want:    map[string]string{"s0": "a", "s1": "a", "s2": "b", "s3": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Place(tc.shards, tc.members, tc.holders)
			if tc.name == "a member above its share sheds to the one below" {
				// Which of a's shards moves depends on the hash; check the shape.
				assert.Equal(t, map[string]int{"a": 2, "b": 2}, counts(got))
				assert.Equal(t, "b", got["s3"])
				assert.Equal(t, 1, Moves(got, tc.members, tc.holders))
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestPlaceIsPinned pins the hash: instances of two versions of this
// package must compute the same placement during a rolling upgrade.
func TestPlaceIsPinned(t *testing.T) {
	got := Place(names("tenant/", 8), []string{"node-a", "node-b", "node-c"}, nil)
	assert.Equal(t, map[string]string{
		"tenant/0": "node-a", "tenant/1": "node-b", "tenant/2": "node-c", "tenant/3": "node-c",
		"tenant/4": "node-c", "tenant/5": "node-a", "tenant/6": "node-b", "tenant/7": "node-b",
	}, got)
}

// fleet draws shard and member names and a holders map, with holders that
// are members, holders that are not, and free shards.
type fleet struct {
	shards, members []string
	holders         map[string]string
}

func drawFleet(t *rapid.T) fleet {
	ns := rapid.IntRange(0, 70).Draw(t, "shards")
	nm := rapid.IntRange(0, 9).Draw(t, "members")
	f := fleet{shards: names("tenant/", ns), members: names("m", nm), holders: map[string]string{}}
	gone := []string{"x0", "x1"} // members that left
	for _, s := range f.shards {
		switch k := rapid.IntRange(0, 9).Draw(t, "holder kind"); {
		case k == 0: // free
		case k == 1:
			f.holders[s] = rapid.SampledFrom(gone).Draw(t, "gone")
		case nm > 0:
			// Skewed towards the first members, as after a join.
			i := min(rapid.IntRange(0, nm-1).Draw(t, "member"), rapid.IntRange(0, nm-1).Draw(t, "skew"))
			f.holders[s] = f.members[i]
		}
	}
	return f
}

func TestPlaceDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := drawFleet(t)
		want := Place(f.shards, f.members, f.holders)
		shards, members := slices.Clone(f.shards), slices.Clone(f.members)
		r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
		r.Shuffle(len(shards), func(i, j int) { shards[i], shards[j] = shards[j], shards[i] })
		r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		if len(members) > 0 {
			members = append(members, members[0]) // a duplicate
		}
		require.Equal(t, want, Place(shards, members, maps.Clone(f.holders)))
	})
}

func TestPlaceBalanced(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := drawFleet(t)
		p := Place(f.shards, f.members, f.holders)
		if len(f.members) == 0 {
			require.Empty(t, p)
			return
		}
		require.Len(t, p, len(f.shards), "every shard is placed")
		floor, extra := len(f.shards)/len(f.members), len(f.shards)%len(f.members)
		c := counts(p)
		larger := 0
		for _, m := range f.members {
			switch c[m] {
			case floor:
			case floor + 1:
				larger++
			default:
				t.Fatalf("member %s gets %d shards, not %d or %d", m, c[m], floor, floor+1)
			}
		}
		require.Equal(t, extra, larger)
		for _, m := range p {
			require.Contains(t, f.members, m)
		}
	})
}

func TestPlaceMovesTheLeast(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := drawFleet(t)
		p := Place(f.shards, f.members, f.holders)
		require.Equal(t, MinMoves(f.shards, f.members, f.holders), Moves(p, f.members, f.holders))
		for s, h := range f.holders {
			if slices.Contains(f.members, h) && p[s] != h {
				require.Greater(t, counts(mapHeld(f.holders, f.members))[h], counts(p)[h],
					"a shard moves only from a member above its share")
			}
		}
	})
}

// mapHeld keeps the holders that are members.
func mapHeld(holders map[string]string, members []string) map[string]string {
	out := map[string]string{}
	for s, h := range holders {
		if slices.Contains(members, h) {
			out[s] = h
		}
	}
	return out
}

// TestPlaceIsStableWhileItsMovesAreMade: any part of the planned moves,
// each shard released or taken over, gives the same placement.
func TestPlaceIsStableWhileItsMovesAreMade(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := drawFleet(t)
		p := Place(f.shards, f.members, f.holders)
		now := maps.Clone(f.holders)
		for _, s := range f.shards {
			if p[s] == f.holders[s] {
				continue
			}
			switch rapid.IntRange(0, 2).Draw(t, "progress") {
			case 1: // released, not taken yet
				delete(now, s)
			case 2: // taken by its new member
				now[s] = p[s]
			}
		}
		require.Equal(t, p, Place(f.shards, f.members, now))
	})
}

// TestPlaceStickinessOverAFleetsLife runs the goal's sequence (1 → 4 → 8
// → 3 members, one join or leave at a time, 64 shards) and others, and
// checks that each step moves exactly the least number of shards.
func TestPlaceStickinessOverAFleetsLife(t *testing.T) {
	shards := names("tenant/", 64)
	r := rand.New(rand.NewPCG(7, 7))
	var members []string
	holders := map[string]string{}
	next := 0
	total, least := 0, 0
	step := func(to int) {
		for len(members) != to {
			if len(members) < to {
				members = append(members, fmt.Sprintf("runtime-%02d", next))
				next++
			} else {
				i := r.IntN(len(members))
				members = slices.Delete(members, i, i+1)
			}
			p := Place(shards, members, holders)
			moved, minimum := Moves(p, members, holders), MinMoves(shards, members, holders)
			require.Equal(t, minimum, moved)
			total += moved
			least += minimum
			holders = p
			require.Equal(t, p, Place(shards, members, holders), "a fixed point")
		}
	}
	for _, n := range []int{1, 4, 8, 3, 5, 12, 2} {
		step(n)
	}
	t.Logf("moves %d, least %d", total, least)
}
