package shard

import (
	"maps"
	"slices"
	"time"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
)

// State is where a Host is in its life. The zero value is StateStarting.
type State uint8

const (
	// StateStarting: Run has not read the fleet's leases yet.
	StateStarting State = iota
	// StateJoining: its membership lease is not in its view yet; it runs
	// no shard.
	StateJoining
	// StateActive: a member; it runs the shards placed on it.
	StateActive
	// StateDraining: Drain (or the end of Run) is handing its shards over.
	StateDraining
	// StateDrained: it has left the fleet and runs no shard.
	StateDrained
	// StateStopped: Run has returned.
	StateStopped
)

func (s State) String() string {
	switch s {
	case StateStarting:
		return "starting"
	case StateJoining:
		return "joining"
	case StateActive:
		return "active"
	case StateDraining:
		return "draining"
	case StateDrained:
		return "drained"
	case StateStopped:
		return "stopped"
	default:
		return "unknown"
	}
}

// MarshalText implements encoding.TextMarshaler.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Status is a Host's state and its view of the fleet: what Host.Status
// returns. It is a value: it does not change afterwards.
type Status struct {
	OwnerID string    `json:"owner_id"`
	Prefix  string    `json:"prefix"`
	State   State     `json:"state"`
	Since   time.Time `json:"since"` // when it entered State

	// Members is the fleet as this instance sees it, sorted by OwnerID.
	Members []Member `json:"members"`
	// Shards lists every shard, sorted by name: who holds it, where the
	// placement puts it, and this instance's supervisor of it.
	Shards []ShardStatus `json:"shards"`

	// Owned counts the shards this instance leads; Target the shards
	// placed on it.
	Owned  int `json:"owned"`
	Target int `json:"target"`
	// Balanced reports that, in this instance's view, every shard is held
	// by the member the placement names. UnbalancedSince is when it last
	// stopped being so (zero while balanced).
	Balanced        bool      `json:"balanced"`
	UnbalancedSince time.Time `json:"unbalanced_since,omitzero"`

	// MovedIn counts the shards this instance took over from another
	// member, HandedOver those it handed over, since Run started.
	MovedIn    uint64 `json:"moved_in"`
	HandedOver uint64 `json:"handed_over"`

	// LastError is the last error the Host met (a failed watch, a handover
	// that was not clean, a quarantined shard); "" when none.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// Member is one member of the fleet as a Host sees it.
type Member struct {
	OwnerID string            `json:"owner_id"`
	Meta    map[string]string `json:"meta,omitempty"`
	Self    bool              `json:"self,omitempty"`
	// Holds counts the shards it is seen holding; Target those placed on
	// it.
	Holds  int `json:"holds"`
	Target int `json:"target"`
}

// ShardStatus is one shard as a Host sees it.
type ShardStatus struct {
	Name string `json:"name"`
	// Holder is the member seen holding it, "" when it is free; Token its
	// fencing token.
	Holder string      `json:"holder,omitempty"`
	Token  lease.Token `json:"token,omitempty"`
	// Target is the member the placement puts it on.
	Target string `json:"target,omitempty"`
	// Local is this instance's supervisor of the shard, nil when none runs.
	Local *actors.Status `json:"local,omitempty"`
	// QuarantinedUntil is set while the shard's supervisor gave up here.
	QuarantinedUntil time.Time `json:"quarantined_until,omitzero"`
}

// publish makes the current state what Status returns.
func (a *hostActor) publish() {
	st := Status{OwnerID: a.owner, Prefix: a.h.cfg.Prefix, State: a.life.state, Since: a.life.since,
		Balanced: a.plan.balanced(), UnbalancedSince: a.plan.unbalancedSince,
		MovedIn: a.tally.movedIn, HandedOver: a.tally.handedOver}
	if err := a.tally.lastErr; err != nil {
		st.LastError, st.LastErrorAt = err.Error(), a.tally.lastErrAt
	}
	holds, targets := map[string]int{}, map[string]int{}
	st.Shards = make([]ShardStatus, 0, len(a.plan.shards))
	for _, s := range a.plan.shards {
		ss := ShardStatus{Name: s, Target: a.plan.placed[s], QuarantinedUntil: a.runs.quarantined[s]}
		if e, ok := a.watch.view.shard(s); ok && e.held() {
			ss.Holder, ss.Token = e.holder.OwnerID, e.holder.Token
			holds[ss.Holder]++
		}
		if ss.Target != "" {
			targets[ss.Target]++
		}
		st.Shards = append(st.Shards, ss)
	}
	st.Target = targets[a.owner]
	for _, id := range slices.Sorted(maps.Keys(a.plan.members)) {
		st.Members = append(st.Members, Member{OwnerID: id, Meta: a.plan.members[id], Self: id == a.owner,
			Holds: holds[id], Target: targets[id]})
	}
	a.h.status.Store(&snapshot{st: st, local: a.runs.supervisors()})
}
