package check

import (
	"fmt"
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
	// expired: the call of its last write plus its TTL.
	ExpireAt int64
}

func (s keyState) free() bool { return !s.Held && !s.Corrupt }

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
	return keyState{Held: true, Holder: holder, Token: token, Rev: rev, Aging: s.Aging,
		MaxRev: max(s.MaxRev, rev, token), ExpireAt: op.Call + int64(op.TTL)}
}

// Model is a porcupine model of the store operations on one lease key,
// partitioned by lease and by the store's epoch (record.Op.Epoch: a server
// that lost acknowledged writes starts a new one). Operations are record.Op
// values passed as input; the output is ignored (the Op carries its own
// result).
var Model = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		type part struct {
			lease string
			epoch int
		}
		idx := map[part]int{}
		var parts [][]porcupine.Operation
		for _, o := range history {
			op := o.Input.(record.Op)
			l := part{op.Lease, op.Epoch}
			i, ok := idx[l]
			if !ok {
				i = len(parts)
				idx[l] = i
				parts = append(parts, nil)
			}
			parts[i] = append(parts[i], o)
		}
		return parts
	},
	Init: func() []any { return []any{keyState{}} },
	Step: func(state, input, _ any) []any {
		s, op := state.(keyState), input.(record.Op)
		pre := []keyState{s}
		if s.Held && op.Return >= s.ExpireAt {
			// The server may have expired the key before this operation.
			pre = append(pre, keyState{MaxRev: s.MaxRev, Aging: s.Aging})
		}
		if s.Held && s.Aging {
			// The bucket's MaxAge may have removed it, with a marker.
			pre = append(pre, keyState{MaxRev: s.MaxRev, Aging: true, Tomb: true})
		}
		var next []any
		for _, p := range pre {
			for _, n := range step(p, op) {
				next = append(next, n)
			}
		}
		return next
	},
	DescribeOperation: func(input, _ any) string {
		op := input.(record.Op)
		return fmt.Sprintf("%s %s(%s tok %d rev %d) -> %s tok %d rev %d %s",
			op.Proc, op.Type, short(op.ID()), op.Token, op.Rev, op.Result, op.OutToken, op.OutRev, short(op.HolderID()))
	},
	DescribeState: func(state any) string {
		s := state.(keyState)
		switch {
		case s.Corrupt:
			return fmt.Sprintf("corrupt (max rev %d)", s.MaxRev)
		case s.Held:
			return fmt.Sprintf("held by %s tok %d rev %d (max rev %d)", short(s.Holder), s.Token, s.Rev, s.MaxRev)
		}
		return fmt.Sprintf("free (max rev %d)", s.MaxRev)
	},
}

// step returns the states the key can be in after op, from s.
func step(s keyState, op record.Op) []keyState {
	if op.Result == record.ResultInvalid {
		return []keyState{s} // rejected before reaching the store
	}
	switch op.Type {
	case record.OpAcquire:
		mine := s.Held && s.Holder == op.ID()
		switch op.Result {
		case record.ResultOK:
			switch {
			case !s.free() && !mine:
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
			if s.Corrupt || (s.Held && (holder == s.Holder || holder == "")) || (s.Tomb && holder == "") {
				return []keyState{s}
			}
			return nil
		case record.ResultCorrupt:
			return ifState(s.Corrupt, s)
		case record.ResultUnknown:
			if s.free() || mine {
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
