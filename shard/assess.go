package shard

import (
	"time"

	"github.com/asterforge/aster/lease"
)

// Assignment is the placement of a fleet's shards as its instances compute
// it from the fleet's leases: what an operator's tool shows beside the
// leases (aster shards), computed by the code a Host runs, so that the two
// agree.
type Assignment struct {
	// Members are the OwnerIDs of the held membership leases, sorted.
	Members []string
	// Holders maps each held shard to its holder's OwnerID.
	Holders map[string]string
	// Placement maps every shard to the member Place puts it on; it is
	// empty when there are no members.
	Placement map[string]string
	// Moving counts the shards the placement takes from one member to
	// give to another (Moves).
	Moving int
	// Balanced reports that every shard is held by the member the
	// placement names, as Status.Balanced does for a Host's view.
	Balanced bool
}

// Assess computes the Assignment of shards in the fleet named prefix from
// the fleet's leases: the latest event of each lease under the prefix (a
// Directory's current state, updated by its changes; in order when a lease
// has several). Free leases count as absent, leases of other fleets are
// ignored. It is what every member computes from the same events (a
// member also counts itself while it joins or drains, and leaves out, 250
// ms after its first snapshot, a member seen only there that holds no
// shard: see docs/sharding.md).
func Assess(prefix string, shards []string, leases []lease.Event) Assignment {
	shards = unique(shards)
	v := newView(prefix, 0)
	v.reset(leases, time.Time{})
	a := Assignment{Members: v.memberIDs(), Holders: v.holders()}
	a.Placement = Place(shards, a.Members, a.Holders)
	a.Moving = Moves(a.Placement, a.Members, a.Holders)
	a.Balanced = isBalanced(shards, a.Placement, a.Holders)
	return a
}

// isBalanced reports whether every shard (sorted, unique) is held by the
// member placement names.
func isBalanced(shards []string, placement, holders map[string]string) bool {
	if len(placement) != len(shards) {
		return false
	}
	for _, s := range shards {
		if h, ok := holders[s]; !ok || h != placement[s] {
			return false
		}
	}
	return true
}
