package shard

import (
	"context"
	"strings"

	"github.com/asterforge/aster/lease"
)

// Directory is the one thing a fleet needs of its store beyond
// lease.Store: a watch of every lease under a prefix, whose names it does
// not know beforehand (the members' keys are named after their OwnerIDs).
// A store implements it next to lease.Store and lease.Watcher, on the same
// keys (natsstore.Store does, with one KV watch per prefix); shardtest.Run
// checks an implementation, and shardtest.MemStore is one in memory.
type Directory interface {
	// WatchPrefix watches the leases whose IDs begin with prefix, which is
	// a valid lease ID followed by '.' (it matches whole tokens: "fleet."
	// matches "fleet.members.a", never "fleetwide.x"). It returns the
	// current state first: an EventHeld, with the Holder, for every lease
	// held now (free leases may be left out). Then it sends every change
	// on the channel, as lease.Watcher does for one key (EventHeld for each
	// acquisition and renewal, EventFree for a release, delete or expiry),
	// until ctx is done, and then closes it.
	//
	// Events are hints, as a Watcher's are. The events of one lease arrive
	// in order; a receiver that falls behind may miss intermediate events
	// of a lease, never its latest. A watch can be silent for a while (a
	// lost connection); an implementation that re-creates it then reports
	// the current state of every lease again, as events.
	WatchPrefix(ctx context.Context, prefix string) (current []lease.Event, changes <-chan lease.Event, err error)
}

// ValidatePrefix reports whether prefix can be passed to
// Directory.WatchPrefix: a valid lease ID followed by '.'.
func ValidatePrefix(prefix string) error {
	id, ok := strings.CutSuffix(prefix, ".")
	if !ok {
		return &lease.FieldError{Field: "prefix", Reason: "must end with '.', got " + quote(prefix)}
	}
	if err := lease.ValidateLeaseID(id); err != nil {
		return &lease.FieldError{Field: "prefix", Reason: quote(prefix) + " does not begin with a valid lease ID: " + err.Error()}
	}
	return nil
}

func quote(s string) string { return "\"" + s + "\"" }
