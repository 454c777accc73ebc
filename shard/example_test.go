package shard_test

import (
	"fmt"
	"maps"
	"slices"

	"github.com/asterforge/aster/shard"
)

// Place spreads six shards over three members, keeping each shard with its
// holder while the holder is within its share; a fourth member then takes
// one shard, the fewest a balanced placement moves. Every instance that
// sees the same members and holders computes the same placement.
func ExamplePlace() {
	shards := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	members := []string{"a", "b", "c"}
	// a holds four shards, b one, c none; s5 is free.
	holders := map[string]string{"s0": "a", "s1": "a", "s2": "a", "s3": "a", "s4": "b"}

	p := shard.Place(shards, members, holders)
	for _, s := range slices.Sorted(maps.Keys(p)) {
		fmt.Printf("%s→%s\n", s, p[s])
	}
	fmt.Println("moved:", shard.Moves(p, members, holders), "least possible:", shard.MinMoves(shards, members, holders))

	// Once those moves are made, member d joins.
	members = append(members, "d")
	q := shard.Place(shards, members, p)
	for _, s := range slices.Sorted(maps.Keys(q)) {
		if q[s] != p[s] {
			fmt.Printf("%s: %s→%s\n", s, p[s], q[s])
		}
	}
	fmt.Println("moved:", shard.Moves(q, members, p), "least possible:", shard.MinMoves(shards, members, p))
	// Output:
	// s0→c
	// s1→a
	// s2→a
	// s3→b
	// s4→b
	// s5→c
	// moved: 2 least possible: 2
	// s4: b→d
	// moved: 1 least possible: 1
}
