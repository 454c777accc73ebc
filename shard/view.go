package shard

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/asterforge/aster/lease"
)

// view is what a Host knows of its fleet's leases, from its directory
// watch: the members and who holds each shard. Only the Host's actor uses
// it.
type view struct {
	prefix     string
	defaultTTL time.Duration
	members    map[string]*entry // by lease ID
	shards     map[string]*entry // by shard name
	// lastEvent is when the watch last reported anything: entries age only
	// while it speaks, so that a silent watch freezes the view instead of
	// emptying it.
	lastEvent time.Time
}

// leaseState is what the view knows of a lease. The zero value is
// leaseFree.
type leaseState uint8

const (
	leaseFree leaseState = iota // released, expired, aged, or not in a snapshot
	// leaseHeld: held, but not seen written since the view began watching.
	// It may be the key of an instance that crashed, which a store keeps
	// for up to a TTL after its last write (natsstore a grace longer).
	leaseHeld
	// leaseWritten: held, and seen written while the view watched (a
	// change, or a snapshot showing a newer revision than it had): its
	// holder was alive then. A lease freed or aged must be written again to
	// be leaseWritten.
	leaseWritten
)

// entry is one lease as last seen.
type entry struct {
	holder lease.Holder // the current holder, or the last one once free
	state  leaseState
	prev   string    // the OwnerID of the term before holder's
	rev    uint64    // the revision of the last event applied
	seen   time.Time // when an event last said it was held
}

// held reports whether the lease is held.
func (e *entry) held() bool { return e.state != leaseFree }

// written reports whether the lease is held and was seen written while the
// view watched.
func (e *entry) written() bool { return e.state == leaseWritten }

// change says what an update changed.
type change struct {
	members bool // the set of members or their metadata
	holders bool // who holds a shard, or whether it is held
}

func (c *change) add(o change) {
	c.members = c.members || o.members
	c.holders = c.holders || o.holders
}

func newView(prefix string, ttl time.Duration) *view {
	return &view{prefix: prefix, defaultTTL: ttl, members: map[string]*entry{}, shards: map[string]*entry{}}
}

// locate returns the map an event's lease belongs to and its key there.
// isMember tells the two apart.
func (v *view) locate(leaseID string) (m map[string]*entry, key string, isMember, ok bool) {
	if rest, ok := strings.CutPrefix(leaseID, v.prefix+membersInfix); ok && rest != "" {
		return v.members, leaseID, true, true
	}
	if rest, ok := strings.CutPrefix(leaseID, v.prefix+shardsInfix); ok && rest != "" {
		return v.shards, rest, false, true
	}
	return nil, "", false, false
}

// apply records one event of the watch's changes.
func (v *view) apply(ev lease.Event, now time.Time) change { return v.record(ev, now, true) }

// record records one event, of the watch's changes (live) or of a
// snapshot, in four steps.
func (v *view) record(ev lease.Event, now time.Time, live bool) change {
	v.lastEvent = now
	// 1. The entry of the event's lease; a free lease never seen needs none.
	m, key, isMember, ok := v.locate(ev.LeaseID)
	if !ok {
		return change{}
	}
	e, isNew := m[key], m[key] == nil
	if isNew && ev.Kind != lease.EventHeld {
		return change{}
	}
	if isNew {
		e = &entry{}
		m[key] = e
	}
	// 2. An event older than what was seen (a re-created watch) is ignored.
	if ev.Revision != 0 && ev.Revision < e.rev {
		return change{}
	}
	// 3. Whether it reports a write the view had not seen.
	newer := e.unseen(ev.Revision, isNew, live)
	e.rev = max(e.rev, ev.Revision)
	// 4. The entry takes the event.
	changed := false
	switch ev.Kind {
	case lease.EventHeld:
		changed = e.hold(ev.Holder, isMember, newer, now)
	case lease.EventFree:
		changed = e.free()
	}
	if isMember {
		return change{members: changed}
	}
	return change{holders: changed}
}

// unseen reports whether an event of revision rev reports a write the view
// had not seen: a change that is new (a watch may report again what it
// reported), or any newer revision.
func (e *entry) unseen(rev uint64, isNew, live bool) bool {
	return (!isNew && rev > e.rev) || (live && (isNew || rev == 0))
}

// hold records that h holds the lease, written (newer) or not, and reports
// whether that changes the view: another holder, a member's metadata, or a
// member proved alive, which may count now (view.placeable).
func (e *entry) hold(h lease.Holder, isMember, newer bool, now time.Time) bool {
	changed := !e.held() || h.OwnerID != e.holder.OwnerID
	if isMember && !maps.Equal(h.Meta, e.holder.Meta) {
		changed = true
	}
	if h.Token != e.holder.Token || h.Term != e.holder.Term { // a new term
		e.prev = e.holder.OwnerID
	}
	if newer && !e.written() {
		e.state = leaseWritten
		changed = changed || isMember
	}
	if e.state == leaseFree {
		e.state = leaseHeld
	}
	e.holder, e.seen = h, now
	return changed
}

// free records that the lease is free, and reports whether it was held. It
// must be written again to count as written.
func (e *entry) free() bool {
	was := e.held()
	e.state = leaseFree
	return was
}

// reset records a fresh snapshot of the watch: leases it does not report
// held are free.
func (v *view) reset(evs []lease.Event, now time.Time) change {
	var c change
	inSnapshot := map[string]bool{}
	for _, ev := range evs {
		inSnapshot[ev.LeaseID] = ev.Kind == lease.EventHeld
		c.add(v.record(ev, now, false))
	}
	for id, e := range v.members {
		if e.held() && !inSnapshot[id] {
			e.free()
			c.members = true
		}
	}
	for s, e := range v.shards {
		if e.held() && !inSnapshot[ShardKey(v.prefix, s)] {
			e.free()
			c.holders = true
		}
	}
	v.lastEvent = now
	return c
}

// age frees the leases that have not been written for longer than their
// TTL while the watch went on reporting others.
func (v *view) age() change {
	var c change
	for i, m := range []map[string]*entry{v.members, v.shards} {
		for _, e := range m {
			ttl := e.holder.TTL
			if ttl <= 0 {
				ttl = v.defaultTTL
			}
			if e.held() && v.lastEvent.Sub(e.seen) > ttl {
				e.free()
				if i == 0 {
					c.members = true
				} else {
					c.holders = true
				}
			}
		}
	}
	return c
}

// memberIDs returns the OwnerIDs of the members, sorted.
func (v *view) memberIDs() []string {
	var out []string
	for id, e := range v.members {
		if e.held() {
			out = append(out, ownerOf(id, e, v.prefix))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// unprovenFor is how long a member that the view has seen only in a
// snapshot, never written since, and that holds no shard, still counts
// (view.placeable): long enough for a live member that joined just before
// to take its first shard (a store round trip or two), far shorter than a
// renewal interval.
const unprovenFor = 250 * time.Millisecond

// placeable returns the OwnerIDs of the members a Host places the shards
// over at now, sorted: the members, except one the view has seen only in a
// snapshot, never written since, that holds no shard unprovenFor after the
// snapshot listed it. That is the key of an instance that crashed and whose
// shards were taken, which the store keeps for up to a TTL after its last
// write (natsstore a grace longer): an instance that joins then would
// otherwise place on it shards that the others hand the newcomer, and run
// them nowhere until the key aged out of its view, a TTL later. A live
// member counts again at its next renewal, or as soon as it holds a shard;
// self, the Host's own OwnerID, always counts.
//
// recheck is when the answer changes if nothing else does (zero: never):
// when a member that counts now stops counting.
func (v *view) placeable(self string, now time.Time) (ids []string, recheck time.Time) {
	holds := map[string]bool{}
	for _, e := range v.shards {
		if e.held() && e.holder.OwnerID != "" {
			holds[e.holder.OwnerID] = true
		}
	}
	for id, e := range v.members {
		if !e.held() {
			continue
		}
		owner := ownerOf(id, e, v.prefix)
		if e.written() || owner == self || holds[owner] {
			ids = append(ids, owner)
			continue
		}
		if until := e.seen.Add(unprovenFor); now.Before(until) {
			ids = append(ids, owner)
			if recheck.IsZero() || until.Before(recheck) {
				recheck = until
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), recheck
}

// unproven reports whether owner's membership lease is held but has not
// been written since the view saw it in a snapshot: why placeable may
// leave it out.
func (v *view) unproven(owner string) bool {
	e, ok := v.member(owner)
	return ok && !e.written()
}

// member returns the entry of a member by OwnerID.
func (v *view) member(owner string) (*entry, bool) {
	e, ok := v.members[MemberKey(v.prefix, owner)]
	if ok && e.held() {
		return e, true
	}
	for id, e := range v.members {
		if e.held() && ownerOf(id, e, v.prefix) == owner {
			return e, true
		}
	}
	return nil, false
}

// ownerOf is the OwnerID of a member: its holder's, or its key's when the
// holder could not be read.
func ownerOf(id string, e *entry, prefix string) string {
	if e.holder.OwnerID != "" {
		return e.holder.OwnerID
	}
	return strings.TrimPrefix(id, prefix+membersInfix)
}

// holders returns, for placement, the holder of every held shard. A shard
// released and not taken yet counts as free, although its last holder may
// be about to take it again: which holder was last is not something every
// instance can know (a watch may skip intermediate events, and a new
// instance sees none), and an input that views cannot agree on could leave
// a shard placed, in every view, on some other member.
func (v *view) holders() map[string]string {
	out := make(map[string]string, len(v.shards))
	for s, e := range v.shards {
		if e.held() && e.holder.OwnerID != "" {
			out[s] = e.holder.OwnerID
		}
	}
	return out
}

// shard returns what is known of one shard.
func (v *view) shard(name string) (e entry, ok bool) {
	if p := v.shards[name]; p != nil {
		return *p, true
	}
	return entry{}, false
}
