package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/asterforge/aster/chaos/record"
)

// keyState is the model's view of one lease key.
type keyState struct {
	Held, Corrupt bool
	// Tomb marks a key an operator deleted or purged: a store may keep
	// contenders waiting (standby, owner unknown) because the owner it was
	// taken from may still be acting.
	Tomb bool
	// Aging marks a bucket edited to expire messages after an age: a held
	// key may vanish at any moment, with a marker no owner wrote.
	Aging bool
	// Holder is the identity (term, or owner in records without terms) of
	// the tenure that holds the key.
	Holder     string
	Token, Rev uint64 // 0 when a write of unknown outcome may have changed them
	// MaxRev is a lower bound of the highest revision the store has used:
	// every new acquisition's token must exceed it.
	MaxRev uint64
	// ExpireAt is the earliest reference time at which a held key may have
	// expired: the call of its last write plus its TTL; record.Never for a
	// key held under a session, which has no TTL of its own.
	ExpireAt int64
	// Session and SessionTerm name the session a held key was taken under
	// (record.Op.Session): the key is held while that term holds the
	// Session key, and free to contenders once it does not.
	Session, SessionTerm string
}

func (s keyState) free() bool { return !s.Held && !s.Corrupt }

// ended reports whether s is held under a session that has ended: sess,
// the state of its session key, is not held by the session's term (a
// corrupt session key holds its leases).
func (s keyState) ended(sess keyState) bool {
	return s.Held && s.Session != "" && !sess.Corrupt && !(sess.Held && sess.Holder == s.SessionTerm)
}

// holds reports whether op's lease (owner, token, revision) may be the
// current value of the key.
func (s keyState) holds(op record.Op) bool {
	return s.Held && s.Holder == op.ID() &&
		(s.Rev == 0 || s.Rev == op.Rev) && (s.Token == 0 || s.Token == op.Token)
}

// exactly reports whether op's lease is certainly the current value.
func (s keyState) exactly(op record.Op) bool {
	return s.Held && s.Holder == op.ID() && s.Rev == op.Rev && s.Token == op.Token
}

func (s keyState) written(holder string, token, rev uint64, op record.Op) keyState {
	n := keyState{Held: true, Holder: holder, Token: token, Rev: rev, Aging: s.Aging,
		MaxRev: max(s.MaxRev, rev, token), ExpireAt: op.Call + int64(op.TTL)}
	switch {
	case op.Type == record.OpAcquire && op.Session != "":
		n.Session, n.SessionTerm, n.ExpireAt = op.Session, op.SessionTerm, record.Never
	case op.Type != record.OpAcquire:
		n.Session, n.SessionTerm = s.Session, s.SessionTerm // a renewal keeps the binding
		if s.Session != "" {
			n.ExpireAt = record.Never
		}
	}
	return n
}

// groupState is the model's state: the keys of one partition, sorted by
// lease ID (a lease and the sessions it was held under).
type groupState struct {
	ids  []string // shared between states; never written after creation
	keys []keyState
}

// key returns the index of id in g, and g with id added (free) if it was
// missing.
func (g groupState) key(id string) (groupState, int) {
	i, ok := slices.BinarySearch(g.ids, id)
	if ok {
		return g, i
	}
	return groupState{ids: slices.Insert(slices.Clone(g.ids), i, id),
		keys: slices.Insert(slices.Clone(g.keys), i, keyState{})}, i
}

// with returns g with key i in state s.
func (g groupState) with(i int, s keyState) groupState {
	keys := slices.Clone(g.keys)
	keys[i] = s
	return groupState{ids: g.ids, keys: keys}
}

// expiries returns the states s may be in before op: as it is, expired
// (once its TTL from its last write has passed), or removed by the
// bucket's MaxAge.
func expiries(s keyState, op record.Op) []keyState {
	pre := []keyState{s}
	if s.Held && op.Return >= s.ExpireAt {
		// The server may have expired the key before this operation.
		pre = append(pre, keyState{MaxRev: s.MaxRev, Aging: s.Aging})
	}
	if s.Held && s.Aging {
		// The bucket's MaxAge may have removed it, with a marker.
		pre = append(pre, keyState{MaxRev: s.MaxRev, Aging: true, Tomb: true})
	}
	return pre
}

// Model is a porcupine model of the store operations on one lease key, with
// the session keys it was held under (record.Op.Session), partitioned by
// lease and by the store's epoch (record.Op.Epoch: a server that lost
// acknowledged writes starts a new one). A lease and every session it was
// acquired under form one partition. Operations are record.Op values passed
// as input; the output is ignored (the Op carries its own result).
//
// A key may expire at any moment from its TTL after the call of its last
// write; the model lets it expire only before an operation that observes
// it (an operation on the key, or on a lease held under it), which is the
// same and keeps the number of states small when many sessions are in one
// partition.
var Model = porcupine.NondeterministicModel{
	Partition: partition,
	Init:      func() []any { return []any{groupState{}} },
	Step: func(state, input, _ any) []any {
		g, op := state.(groupState), input.(record.Op)
		g, ki := g.key(op.Lease)
		s := g.keys[ki]
		var next []any
		for _, p := range expiries(s, op) {
			if p.Session == "" || !p.Held {
				for _, n := range step(p, keyState{}, op) {
					next = append(next, g.with(ki, n))
				}
				continue
			}
			// The key is held under a session: the session may have
			// expired before op, which a contender observes.
			g2, si := g.key(p.Session)
			kj := ki
			if si <= ki && len(g2.ids) > len(g.ids) {
				kj++ // the session's key went in before the lease's
			}
			for _, sp := range expiries(g2.keys[si], op) {
				for _, n := range step(p, sp, op) {
					next = append(next, g2.with(si, sp).with(kj, n))
				}
			}
		}
		return next
	},
	Equal: func(a, b any) bool {
		x, y := a.(groupState), b.(groupState)
		return slices.Equal(x.ids, y.ids) && slices.Equal(x.keys, y.keys)
	},
	Hash: func(state any) uint64 {
		var h uint64
		for _, k := range state.(groupState).keys {
			h = h*31 + k.Token*7 + k.Rev*13 + k.MaxRev*17 + uint64(k.ExpireAt) + uint64(len(k.Holder))
			if k.Held {
				h += 1 << 40
			}
		}
		return h
	},
	DescribeOperation: func(input, _ any) string {
		op := input.(record.Op)
		under := ""
		if op.Session != "" {
			under = " under " + short(op.SessionTerm)
		}
		return fmt.Sprintf("%s %s(%s %s tok %d rev %d%s) -> %s tok %d rev %d %s",
			op.Proc, op.Type, op.Lease, short(op.ID()), op.Token, op.Rev, under, op.Result, op.OutToken, op.OutRev,
			short(op.HolderID()))
	},
	DescribeState: func(state any) string {
		g := state.(groupState)
		parts := make([]string, len(g.keys))
		for i, s := range g.keys {
			parts[i] = g.ids[i] + ": " + describe(s)
		}
		return strings.Join(parts, "; ")
	},
}

func describe(s keyState) string {
	switch {
	case s.Corrupt:
		return fmt.Sprintf("corrupt (max rev %d)", s.MaxRev)
	case s.Held && s.Session != "":
		return fmt.Sprintf("held by %s tok %d rev %d under %s (max rev %d)", short(s.Holder), s.Token, s.Rev,
			short(s.SessionTerm), s.MaxRev)
	case s.Held:
		return fmt.Sprintf("held by %s tok %d rev %d (max rev %d)", short(s.Holder), s.Token, s.Rev, s.MaxRev)
	}
	return fmt.Sprintf("free (max rev %d)", s.MaxRev)
}

// partition splits a history by lease and epoch, joining a lease with the
// sessions it was acquired under.
func partition(history []porcupine.Operation) [][]porcupine.Operation {
	type part struct {
		lease string
		epoch int
	}
	parent := map[part]part{}
	var find func(p part) part
	find = func(p part) part {
		q, ok := parent[p]
		if !ok || q == p {
			parent[p] = p
			return p
		}
		r := find(q)
		parent[p] = r
		return r
	}
	for _, o := range history {
		op := o.Input.(record.Op)
		a := find(part{op.Lease, op.Epoch})
		if op.Session != "" {
			if b := find(part{op.Session, op.Epoch}); a != b {
				parent[b] = a
			}
		}
	}
	idx := map[part]int{}
	var parts [][]porcupine.Operation
	for _, o := range history {
		op := o.Input.(record.Op)
		r := find(part{op.Lease, op.Epoch})
		i, ok := idx[r]
		if !ok {
			i = len(parts)
			idx[r] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], o)
	}
	return parts
}

// step returns the states the key can be in after op, from s; sess is the
// state of the session s is held under, if it is.
func step(s, sess keyState, op record.Op) []keyState {
	if op.Result == record.ResultInvalid {
		return []keyState{s} // rejected before reaching the store
	}
	// A key held under a session that has ended is free to contenders;
	// after an operator removed the session's key (Tomb), a store may
	// still count it held for a while.
	ended := s.ended(sess)
	free := s.free() || ended
	held := s.Held && (!ended || sess.Tomb)
	switch op.Type {
	case record.OpAcquire:
		mine := s.Held && s.Holder == op.ID()
		switch op.Result {
		case record.ResultOK:
			switch {
			case !free && !mine:
			case op.OutToken > s.MaxRev && op.OutRev >= op.OutToken:
				return []keyState{s.written(op.ID(), op.OutToken, op.OutRev, op)}
			case mine && op.OutToken == s.Token && op.OutRev >= s.Rev:
				// A replay: the store proved the key was already ours.
				n := s.written(op.ID(), op.OutToken, op.OutRev, op)
				if op.OutRev == s.Rev {
					n.ExpireAt = s.ExpireAt
				}
				return []keyState{n}
			}
			return nil
		case record.ResultStandby:
			holder := op.HolderID()
			if s.Corrupt || (held && (holder == s.Holder || holder == "")) || (s.Tomb && holder == "") {
				return []keyState{s}
			}
			if op.Epoch > 0 && s == (keyState{}) && holder != "" {
				// The key's first sight in a new epoch: the server restarted
				// on a copy of its storage, in which a term of an earlier
				// epoch may hold it, with a write of unknown time (it may
				// expire at any moment) and revision (at least 1, which also
				// marks the key as seen: the copy holds one value).
				return []keyState{{Held: true, Holder: holder, MaxRev: 1}}
			}
			return nil
		case record.ResultCorrupt:
			return ifState(s.Corrupt, s)
		case record.ResultUnknown:
			if free || mine {
				n := s.written(op.ID(), 0, 0, op)
				n.MaxRev = s.MaxRev + 1
				return []keyState{s, n}
			}
			return []keyState{s}
		}
		return nil
	case record.OpRenew, record.OpRelease:
		switch op.Result {
		case record.ResultOK:
			if !s.holds(op) {
				return nil
			}
			if op.Type == record.OpRelease {
				return []keyState{{MaxRev: s.MaxRev + 1, Aging: s.Aging}}
			}
			if op.OutRev <= s.MaxRev {
				return nil
			}
			return []keyState{s.written(op.ID(), op.Token, op.OutRev, op)}
		case record.ResultLost:
			return ifState(!s.exactly(op), s)
		case record.ResultCorrupt:
			return ifState(s.Corrupt, s)
		case record.ResultUnknown:
			if !s.holds(op) {
				return []keyState{s}
			}
			if op.Type == record.OpRelease {
				return []keyState{s, {MaxRev: s.MaxRev + 1, Aging: s.Aging}}
			}
			n := s.written(op.ID(), op.Token, 0, op)
			n.MaxRev = s.MaxRev + 1
			return []keyState{s, n}
		}
		return nil
	case record.OpDelete, record.OpPurge, record.OpGarbage, record.OpStreamPurge, record.OpBucketGone, record.OpMaxAge:
		after := keyState{MaxRev: s.MaxRev, Tomb: true, Aging: s.Aging}
		switch op.Type {
		case record.OpDelete, record.OpPurge:
			if !s.free() {
				after.MaxRev++ // the marker takes a revision
			}
		case record.OpGarbage:
			after = keyState{Corrupt: true, MaxRev: s.MaxRev + 1, Aging: s.Aging}
		case record.OpBucketGone:
			// A bucket created again is empty; a store that creates it
			// starts its revisions above every earlier one.
			after.Aging = false
		case record.OpMaxAge:
			after = s
			after.Aging = true
		}
		switch op.Result {
		case record.ResultOK:
			return []keyState{after}
		case record.ResultUnknown:
			return []keyState{s, after}
		}
		return []keyState{s}
	}
	return nil
}

func ifState(ok bool, s keyState) []keyState {
	if ok {
		return []keyState{s}
	}
	return nil
}

func short(owner string) string {
	if len(owner) > 14 {
		return owner[len(owner)-6:]
	}
	return owner
}

// Linearizable checks ops against Model within timeout. It returns
// porcupine.Ok, porcupine.Illegal, or porcupine.Unknown when the timeout
// ran out first, and the information porcupine.Visualize draws.
func Linearizable(ops []record.Op, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	history := make([]porcupine.Operation, len(ops))
	clients := map[string]int{}
	for i, op := range ops {
		c, ok := clients[op.Proc]
		if !ok {
			c = len(clients)
			clients[op.Proc] = c
		}
		history[i] = porcupine.Operation{ClientId: c, Input: op, Call: op.Call, Return: op.Return}
	}
	return porcupine.CheckOperationsVerbose(Model.ToModel(), history, timeout)
}
