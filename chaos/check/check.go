package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/asterforge/aster/chaos/record"
)

// Tenure is one acquisition of a lease: a holder's claim to act, from the
// return of its acquire to End.
type Tenure struct {
	Lease, Proc, Owner string
	Token              uint64
	Acquired           int64 // return of the acquire that took the lease
	ValidUntil         int64 // the last validity the holder claimed
	// Relinquished is the call of the release; record.Never if none. The
	// death of the process does not end the claim: a write it sent before
	// dying may still land, and the lease stays its own until it expires.
	Relinquished int64
	ReleaseCall  int64 // call of the first release; 0 if none
	WorkStart    int64 // first workload start under this token; 0 if none
	WorkStop     int64 // last workload stop; record.Never while running
}

// End is the end of the tenure's claimed interval.
func (t Tenure) End() int64 { return min(t.ValidUntil, t.Relinquished) }

// Violation is a broken invariant.
type Violation struct {
	Kind   string
	Lease  string
	At     int64
	Detail string
}

func (v Violation) String() string { return fmt.Sprintf("%s [%s]: %s", v.Kind, v.Lease, v.Detail) }

// Violation kinds.
const (
	Overlap        = "overlap"
	TokenOrder     = "token-not-increasing"
	TokenReused    = "token-reused"
	StaleWrite     = "stale-write-accepted"
	OrphanWrite    = "write-without-tenure"
	WriteOutside   = "write-outside-validity"
	WorkOutside    = "workload-outside-tenure"
	WorkOutlived   = "workload-outlived-validity"
	NotLinearizabl = "not-linearizable"
)

// Handover is the passage of a lease from one tenure to the next.
type Handover struct {
	Lease    string
	From, To Tenure
	Cause    string        // "release", a record.MarkKind, or "expiry" when nothing explains it
	Latency  time.Duration // from the cause to the new workload's start (or acquire)
}

// Result is what Check found.
type Result struct {
	Tenures    []Tenure
	Handovers  []Handover
	Violations []Violation
	// Excused counts overlaps explained by operator tampering.
	Excused int
	// LateStops counts workloads that outlived their validity while their
	// process was paused (SIGSTOP): the process could not stop them, and
	// only the fence stands between them and the resource.
	LateStops int
}

// Check judges h; see the package documentation.
func Check(h record.History) Result {
	var r Result
	r.Tenures = tenures(h)
	byLease := map[string][]Tenure{}
	for _, t := range r.Tenures {
		byLease[t.Lease] = append(byLease[t.Lease], t)
	}
	for _, ts := range byLease {
		r.checkLease(h, ts)
	}
	r.checkWrites(h)
	r.checkWorkloads(h)
	slices.SortFunc(r.Violations, func(a, b Violation) int { return cmp.Compare(a.At, b.At) })
	return r
}

// tenures builds the tenures of h, sorted by lease and acquisition.
func tenures(h record.History) []Tenure {
	type key struct {
		lease, owner string
		token        uint64
	}
	idx := map[key]int{}
	var ts []Tenure
	ops := slices.Clone(h.Ops)
	slices.SortStableFunc(ops, func(a, b record.Op) int { return cmp.Compare(a.Call, b.Call) })
	for _, op := range ops {
		if op.Type != record.OpAcquire || op.Result != record.ResultOK {
			continue
		}
		k := key{op.Lease, op.Owner, op.OutToken}
		if i, ok := idx[k]; ok {
			ts[i].ValidUntil = max(ts[i].ValidUntil, op.ValidUntil) // a replayed acquire
			continue
		}
		idx[k] = len(ts) // a second owner with one token is a violation, found later
		ts = append(ts, Tenure{
			Lease: op.Lease, Proc: op.Proc, Owner: op.Owner, Token: op.OutToken,
			Acquired: op.Return, ValidUntil: op.ValidUntil, Relinquished: record.Never,
			WorkStop: record.Never,
		})
	}
	find := func(lease, owner string, token uint64) *Tenure {
		if i, ok := idx[key{lease, owner, token}]; ok {
			return &ts[i]
		}
		return nil
	}
	for _, op := range ops {
		t := find(op.Lease, op.Owner, op.Token)
		if t == nil {
			continue
		}
		switch {
		case op.Type == record.OpRenew && op.Result == record.ResultOK:
			t.ValidUntil = max(t.ValidUntil, op.ValidUntil)
		case op.Type == record.OpRelease && t.ReleaseCall == 0:
			t.ReleaseCall = op.Call
			t.Relinquished = min(t.Relinquished, op.Call)
		}
	}
	for _, w := range h.Workloads {
		if t := find(w.Lease, w.Owner, w.Token); t != nil {
			if t.WorkStart == 0 || w.Start < t.WorkStart {
				t.WorkStart = w.Start
			}
			if t.WorkStop == record.Never || w.Stop > t.WorkStop {
				t.WorkStop = w.Stop
			}
		}
	}
	slices.SortStableFunc(ts, func(a, b Tenure) int {
		return cmp.Or(cmp.Compare(a.Lease, b.Lease), cmp.Compare(a.Acquired, b.Acquired))
	})
	return ts
}

// checkLease checks the tenures of one lease, sorted by acquisition, and
// pairs them into handovers.
func (r *Result) checkLease(h record.History, ts []Tenure) {
	for i, t := range ts {
		if i > 0 {
			prev := ts[i-1]
			switch {
			case t.Token == prev.Token:
				r.add(TokenReused, t.Lease, t.Acquired, "token %d acquired by %s (%s) and by %s (%s)",
					t.Token, prev.Owner, prev.Proc, t.Owner, t.Proc)
			case t.Token < prev.Token:
				r.add(TokenOrder, t.Lease, t.Acquired, "token %d acquired by %s (%s) after token %d of %s (%s)",
					t.Token, t.Owner, t.Proc, prev.Token, prev.Owner, prev.Proc)
			}
			r.Handovers = append(r.Handovers, handover(h, prev, t))
		}
		// Every earlier tenure whose interval reaches past this acquisition
		// overlaps it; intervals may be long, so look back over all of them.
		for _, prev := range ts[:i] {
			if prev.End() <= t.Acquired || t.End() <= t.Acquired {
				continue
			}
			if prev.Owner == t.Owner && (prev.WorkStart == 0 || prev.WorkStop <= t.Acquired) {
				// One owner took its own key again (a store lets it) after
				// its earlier term had stopped: one owner, never two.
				continue
			}
			if tampered(h, t.Lease, prev.Acquired, t.Acquired) {
				r.Excused++
				continue
			}
			r.add(Overlap, t.Lease, t.Acquired,
				"token %d of %s (%s) claims validity until %s, but token %d of %s (%s) was acquired at %s",
				prev.Token, prev.Owner, prev.Proc, fmtT(prev.End()), t.Token, t.Owner, t.Proc, fmtT(t.Acquired))
		}
	}
}

// tampered reports whether an operator changed lease between from and to.
func tampered(h record.History, lease string, from, to int64) bool {
	for _, m := range h.Marks {
		if m.Kind == record.MarkTamper && (m.Lease == lease || m.Lease == "") && m.At >= from && m.At <= to {
			return true
		}
	}
	for _, op := range h.Ops {
		if op.Type.Tamper() && op.Lease == lease && op.Call <= to && op.Return >= from {
			return true
		}
	}
	return false
}

// handover names the cause of the passage from prev to next and its latency.
func handover(h record.History, prev, next Tenure) Handover {
	ho := Handover{Lease: next.Lease, From: prev, To: next, Cause: "expiry"}
	start := next.WorkStart
	if start == 0 {
		start = next.Acquired
	}
	from := int64(0)
	if prev.ReleaseCall != 0 && prev.ReleaseCall <= next.Acquired {
		ho.Cause, from = "release", prev.ReleaseCall
	}
	if from == 0 {
		// The last fault that struck the old owner before the new one took
		// over: an owner that survived earlier faults was not ended by them.
		for _, m := range h.Marks {
			if m.At >= prev.Acquired && m.At <= next.Acquired && affects(m, prev) && m.At > from {
				ho.Cause, from = string(m.Kind), m.At
			}
		}
	}
	if from != 0 {
		ho.Latency = time.Duration(start - from)
	}
	return ho
}

// affects reports whether mark m is a fault that can end tenure t.
func affects(m record.Mark, t Tenure) bool {
	switch m.Kind {
	case record.MarkKill, record.MarkStop, record.MarkNetFault, record.MarkClock:
		return m.Proc == "" || m.Proc == t.Proc
	case record.MarkServerKill:
		return true
	case record.MarkTamper:
		return m.Lease == "" || m.Lease == t.Lease
	}
	return false
}

func (r *Result) checkWrites(h record.History) {
	type key struct {
		lease, owner string
		token        uint64
	}
	byToken := map[key]Tenure{}
	for _, t := range r.Tenures {
		byToken[key{t.Lease, t.Owner, t.Token}] = t
	}
	writes := slices.Clone(h.Writes)
	slices.SortFunc(writes, func(a, b record.Write) int { return cmp.Compare(a.Seq, b.Seq) })
	highest := map[string]uint64{}
	for _, w := range writes {
		if !w.Accepted {
			continue
		}
		if w.Token < highest[w.Lease] {
			r.add(StaleWrite, w.Lease, w.At, "write #%d of %s (%s) with token %d accepted after token %d",
				w.Seq, w.Owner, w.Proc, w.Token, highest[w.Lease])
		}
		highest[w.Lease] = max(highest[w.Lease], w.Token)
		t, ok := byToken[key{w.Lease, w.Owner, w.Token}]
		switch {
		case !ok:
			r.add(OrphanWrite, w.Lease, w.At, "write #%d of %s (%s) with token %d that it never acquired",
				w.Seq, w.Owner, w.Proc, w.Token)
		case w.At < t.Acquired || w.At > t.End():
			r.add(WriteOutside, w.Lease, w.At,
				"write #%d of %s (%s) with token %d accepted at %s, outside [%s, %s]",
				w.Seq, w.Owner, w.Proc, w.Token, fmtT(w.At), fmtT(t.Acquired), fmtT(t.End()))
		}
	}
}

func (r *Result) checkWorkloads(h record.History) {
	for _, w := range h.Workloads {
		var t *Tenure
		for i := range r.Tenures {
			if c := &r.Tenures[i]; c.Lease == w.Lease && c.Token == w.Token && c.Owner == w.Owner {
				t = c
				break
			}
		}
		switch {
		case t == nil || w.Start < t.Acquired:
			r.add(WorkOutside, w.Lease, w.Start, "workload of %s (%s) with token %d started before it acquired",
				w.Owner, w.Proc, w.Token)
		case w.Stop != record.Never && w.Stop > t.ValidUntil:
			if paused(h, w.Proc, w.Start, w.Stop) {
				r.LateStops++
				continue
			}
			r.add(WorkOutlived, w.Lease, w.Stop, "workload of %s (%s) with token %d stopped at %s, after its validity %s",
				w.Owner, w.Proc, w.Token, fmtT(w.Stop), fmtT(t.ValidUntil))
		}
	}
}

// paused reports whether proc was stopped (SIGSTOP) at some time in [from, to].
func paused(h record.History, proc string, from, to int64) bool {
	for _, m := range h.Marks {
		if m.Kind == record.MarkStop && m.Proc == proc && m.At <= to {
			cont := record.Never
			for _, c := range h.Marks {
				if c.Kind == record.MarkCont && c.Proc == proc && c.At >= m.At && c.At < cont {
					cont = c.At
				}
			}
			if cont >= from {
				return true
			}
		}
	}
	return false
}

func (r *Result) add(kind, lease string, at int64, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Kind: kind, Lease: lease, At: at, Detail: fmt.Sprintf(format, args...)})
}

// fmtT shows a reference time in seconds.
func fmtT(t int64) string {
	if t == record.Never {
		return "never"
	}
	return fmt.Sprintf("%.6fs", float64(t)/1e9)
}
