package shard

import (
	"time"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
)

// Event is something a Host reports through Config.OnEvent. The set is
// sealed: only this package defines Events.
type Event interface {
	isEvent()
}

// MemberJoined: a member appeared in this instance's view of the fleet
// (its membership lease was written).
type MemberJoined struct {
	Member Member
}

// MemberLeft: a member left this instance's view: its membership lease was
// released (a graceful leave) or expired (a crash), or was not renewed
// within its TTL while the watch went on reporting others.
type MemberLeft struct {
	OwnerID string
}

// PlacementChanged: the placement this instance computes changed, because
// the members, the shards or their holders did (not while its moves are
// made: they do not change it). Target is the number of shards placed on
// this instance, Moving the number of shards the placement moves from one
// member to another.
type PlacementChanged struct {
	Members int
	Target  int
	Moving  int
}

// ShardStarted: this instance acquired a shard's lease; its workload runs.
// From is the member seen holding it before (another OwnerID when the
// shard moved here, "" when it was free).
type ShardStarted struct {
	Shard string
	Token lease.Token
	From  string
}

// ShardHandedOver: this instance stopped running a shard that is placed
// elsewhere (or that it drained, or that was removed): the workload was
// stopped and the lease released. Err is not nil when the handover was not
// clean (matching ErrHandoverFailed): the workload did not stop in time or
// the release failed, and the lease expires at the store.
type ShardHandedOver struct {
	Shard string
	Token lease.Token // the last term's, 0 if it never led here
	Err   error
}

// ShardQuarantined: a shard's supervisor gave up (actors.GaveUp); the shard
// stays placed here but does not run until Until.
type ShardQuarantined struct {
	Shard string
	Err   error
	Until time.Time
}

// Balanced: this instance's view became balanced: every shard is held by
// the member the placement names, Took after the view stopped being
// balanced (a member joined or left, a shard was added or freed).
type Balanced struct {
	Took    time.Duration
	Members int
	Owned   int
}

// LeaseEvent carries an event of one of the Host's lease supervisors: a
// shard's (Shard names it), or the membership lease's (Shard is "").
type LeaseEvent struct {
	Shard string
	Event actors.Event
}

func (MemberJoined) isEvent()     {}
func (MemberLeft) isEvent()       {}
func (PlacementChanged) isEvent() {}
func (ShardStarted) isEvent()     {}
func (ShardHandedOver) isEvent()  {}
func (ShardQuarantined) isEvent() {}
func (Balanced) isEvent()         {}
func (LeaseEvent) isEvent()       {}
