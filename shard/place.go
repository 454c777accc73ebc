package shard

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// Place computes where every shard should run: a pure function of the
// shards, the members, and who holds each shard now (holders maps a shard to
// its holder's OwnerID; shards it does not name, and holders that are not
// members, count as free). Every instance that sees the same members and
// holders computes the same placement, whatever the order of its inputs;
// duplicates are ignored. It returns shard → member, with every shard
// placed, or an empty map when there are no members.
//
// The placement is balanced (every member gets S/N or S/N+1 of S shards
// over N members), sticky (only shards of members above their share move,
// the fewest any balanced placement needs: Moves counts them) and stable
// (with any part of its moves made, Place returns the same placement).
// docs/sharding.md gives the algorithm.
func Place(shards, members []string, holders map[string]string) map[string]string {
	p := newPlanner(shards, members)
	return p.place(holders)
}

// Moves counts the shards that a placement moves: those whose holder is a
// member and that the placement gives to another member.
func Moves(placement map[string]string, members []string, holders map[string]string) int {
	isMember := make(map[string]bool, len(members))
	for _, m := range members {
		isMember[m] = true
	}
	n := 0
	for s, to := range placement {
		if h, ok := holders[s]; ok && isMember[h] && h != to {
			n++
		}
	}
	return n
}

// MinMoves is the least number of shards that any balanced placement of
// len(shards) shards over members must move away from their holders: the
// shards of members above their share, with the larger shares given to the
// members that hold the most. Place never moves more (see Moves).
func MinMoves(shards, members []string, holders map[string]string) int {
	shards, members = unique(shards), unique(members)
	if len(members) == 0 {
		return 0
	}
	isMember := make(map[string]int, len(members))
	for i, m := range members {
		isMember[m] = i
	}
	counts := make([]int, len(members))
	for _, s := range shards {
		if i, ok := isMember[holders[s]]; ok {
			counts[i]++
		}
	}
	slices.SortFunc(counts, func(a, b int) int { return b - a })
	floor, extra := len(shards)/len(members), len(shards)%len(members)
	n := 0
	for i, c := range counts {
		share := floor
		if i < extra {
			share++
		}
		n += max(c-share, 0)
	}
	return n
}

// planner holds the hashed inputs of one placement.
type planner struct {
	shards  []string // sorted, unique
	members []string // sorted, unique
	sh, mh  []uint64 // their hashes
}

func newPlanner(shards, members []string) *planner {
	p := &planner{shards: unique(shards), members: unique(members)}
	p.sh = make([]uint64, len(p.shards))
	for i, s := range p.shards {
		p.sh[i] = hashString(s)
	}
	p.mh = make([]uint64, len(p.members))
	for i, m := range p.members {
		p.mh[i] = mix(hashString(m) ^ memberSalt)
	}
	return p
}

// score is the rendezvous score of shard i on member j. Ties (which a
// 64-bit hash makes vanishingly rare) are broken by names in better.
func (p *planner) score(i, j int) uint64 { return mix(p.sh[i] ^ p.mh[j]) }

// better reports whether shard i on member j ranks above shard k on member l.
func (p *planner) better(i, j, k, l int) bool {
	a, b := p.score(i, j), p.score(k, l)
	if a != b {
		return a > b
	}
	if c := cmp.Compare(p.shards[i], p.shards[k]); c != 0 {
		return c < 0
	}
	return p.members[j] < p.members[l]
}

// place computes the placement in the three steps of docs/sharding.md:
// shares, keep, move.
func (p *planner) place(holders map[string]string) map[string]string {
	out := make(map[string]string, len(p.shards))
	if len(p.members) == 0 {
		return out
	}
	held, pool := p.holdings(holders)
	// 1. Shares.
	share := p.shares(held)
	// 2. Keep: each member keeps its best shards up to its share; the rest
	// join the pool.
	need, pool := p.keep(out, held, share, pool)
	// 3. Move: the pool goes to the members below their share.
	p.match(out, pool, need)
	return out
}

// holdings returns the shards each member holds, and the pool of those
// held by no member.
func (p *planner) holdings(holders map[string]string) (held [][]int, pool []int) {
	index := make(map[string]int, len(p.members))
	for j, m := range p.members {
		index[m] = j
	}
	held = make([][]int, len(p.members))
	for i, s := range p.shards {
		if j, ok := index[holders[s]]; ok {
			held[j] = append(held[j], i)
		} else {
			pool = append(pool, i)
		}
	}
	return held, pool
}

// keep places on each member the shards it holds, up to its share,
// preferring those it ranks highest. It returns how many more each
// member's share asks for, and pool with the shards it did not keep.
func (p *planner) keep(out map[string]string, held [][]int, share, pool []int) ([]int, []int) {
	need := make([]int, len(p.members))
	for j, hs := range held {
		if len(hs) > share[j] {
			slices.SortFunc(hs, func(a, b int) int { return p.order(a, j, b, j) })
			pool = append(pool, hs[share[j]:]...)
			hs = hs[:share[j]]
		}
		for _, i := range hs {
			out[p.shards[i]] = p.members[j]
		}
		need[j] = share[j] - len(hs)
	}
	return need, pool
}

// match places the pool on the members that need shards: the stable
// matching, pairs by descending score, each taken if both sides are still
// open.
func (p *planner) match(out map[string]string, pool, need []int) {
	type pair struct{ i, j int }
	var pairs []pair
	for _, i := range pool {
		for j := range need {
			if need[j] > 0 {
				pairs = append(pairs, pair{i, j})
			}
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int { return p.order(a.i, a.j, b.i, b.j) })
	for _, pr := range pairs {
		s := p.shards[pr.i]
		if need[pr.j] == 0 {
			continue
		}
		if _, done := out[s]; done {
			continue
		}
		out[s] = p.members[pr.j]
		need[pr.j]--
	}
}

// order is better as a comparison for sorting: -1 when shard i on member j
// ranks above shard k on member l, 1 otherwise.
func (p *planner) order(i, j, k, l int) int {
	if p.better(i, j, k, l) {
		return -1
	}
	return 1
}

// shares returns each member's share: S/N, plus one for S mod N members,
// chosen first among the members holding at least S/N+1 shards, then among
// the others, each group in the order of the members' hashes. A member
// that holds that many keeps doing so while the placement's moves are made
// (it only sheds down to its share), and a member that does not never
// reaches it unless its share is the larger one, so the choice does not
// change while the moves are made.
func (p *planner) shares(held [][]int) []int {
	nm := len(p.members)
	floor, extra := len(p.shards)/nm, len(p.shards)%nm
	share := make([]int, nm)
	for j := range share {
		share[j] = floor
	}
	if extra == 0 {
		return share
	}
	order := make([]int, nm)
	for j := range order {
		order[j] = j
	}
	rich := func(j int) bool { return len(held[j]) > floor }
	slices.SortFunc(order, func(a, b int) int {
		if ra, rb := rich(a), rich(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(p.mh[a], p.mh[b]); c != 0 {
			return c
		}
		return cmp.Compare(p.members[a], p.members[b])
	})
	for _, j := range order[:extra] {
		share[j]++
	}
	return share
}

// unique returns the sorted distinct elements of ss, in a new slice.
func unique(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

// memberSalt separates member hashes from shard hashes.
const memberSalt = 0x9e3779b97f4a7c15

// hashString is FNV-1a, mixed: stable across processes, versions and
// platforms, which a placement must be.
func hashString(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return mix(h.Sum64())
}

// mix is the finaliser of SplitMix64.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
