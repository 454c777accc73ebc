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
	Term               string // the tenure's identity; "" in records without terms
	Token              uint64
	Epoch              int   // the store's life in which the token was issued (see record.Op.Epoch)
	Acquired           int64 // return of the acquire that took the lease
	ValidUntil         int64 // the last validity the holder claimed
	// Relinquished is the call of the release; record.Never if none. The
	// death of the process does not end the claim: a write it sent before
	// dying may still land, and the lease stays its own until it expires.
	Relinquished int64
	// ReleaseCall is the call of the first release that succeeded; 0 if
	// none did. A release that failed or whose outcome is unknown (a
	// leader giving up at its renew deadline, cut off from the store)
	// still ends the claim, but does not explain a handover.
	ReleaseCall int64
	WorkStart   int64 // first workload start under this token; 0 if none
	WorkStop    int64 // last workload stop; record.Never while running
	// Session is the lease ID of the session the lease was acquired under
	// (record.Op.Session), "" for a lease with a TTL of its own. Such a
	// tenure is valid while its session is: its ValidUntil is the
	// session's last claimed validity, and the session's release call
	// ends its claim as its own would.
	Session, SessionTerm string
}

// End is the end of the tenure's claimed interval.
func (t Tenure) End() int64 { return min(t.ValidUntil, t.Relinquished) }

// ID is the tenure's identity: its term, or its owner in records without
// terms.
func (t Tenure) ID() string {
	if t.Term != "" {
		return t.Term
	}
	return t.Owner
}

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
	TwoTerms       = "two-terms-in-one-candidate"
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
	// LateStops counts workloads that outlived their validity while their
	// process was paused (SIGSTOP): the process could not stop them, and
	// only the fence stands between them and the resource.
	LateStops int
	// Stubborn counts workloads built to ignore their cancellation
	// (record.Workload.Stubborn) that outlived their validity: the lease
	// cannot stop them, and only the fence stands between them and the
	// resource.
	Stubborn int
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
	r.checkCandidates(h)
	slices.SortFunc(r.Violations, func(a, b Violation) int { return cmp.Compare(a.At, b.At) })
	return r
}

// tenures builds the tenures of h, sorted by lease and acquisition.
func tenures(h record.History) []Tenure {
	idx := map[tenureKey]int{}
	var ts []Tenure
	ops := slices.Clone(h.Ops)
	slices.SortStableFunc(ops, func(a, b record.Op) int { return cmp.Compare(a.Call, b.Call) })
	for _, op := range ops {
		if op.Type != record.OpAcquire || op.Result != record.ResultOK {
			continue
		}
		k := tenureKey{op.Lease, op.ID(), op.OutToken}
		if i, ok := idx[k]; ok {
			ts[i].ValidUntil = max(ts[i].ValidUntil, op.ValidUntil) // a replayed acquire
			continue
		}
		idx[k] = len(ts) // a second term with one token is a violation, found later
		ts = append(ts, Tenure{
			Lease: op.Lease, Proc: op.Proc, Owner: op.Owner, Term: op.Term, Token: op.OutToken, Epoch: op.Epoch,
			Acquired: op.Return, ValidUntil: op.ValidUntil, Relinquished: record.Never,
			WorkStop: record.Never, Session: op.Session, SessionTerm: op.SessionTerm,
		})
	}
	find := func(lease, id string, token uint64) *Tenure {
		if i, ok := idx[tenureKey{lease, id, token}]; ok {
			return &ts[i]
		}
		return nil
	}
	for _, op := range ops {
		t := find(op.Lease, op.ID(), op.Token)
		if t == nil {
			continue
		}
		switch {
		case op.Type == record.OpRenew && op.Result == record.ResultOK:
			t.ValidUntil = max(t.ValidUntil, op.ValidUntil)
		case op.Type == record.OpRelease:
			t.Relinquished = min(t.Relinquished, op.Call)
			if op.Result == record.ResultOK && t.ReleaseCall == 0 {
				t.ReleaseCall = op.Call
			}
		}
	}
	underSessions(ts)
	for _, w := range h.Workloads {
		if t := find(w.Lease, w.ID(), w.Token); t != nil {
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

// underSessions makes each tenure held under a session valid while its
// session is: until the session's last claimed validity, and no longer
// than the session's release call (which frees every lease under it).
func underSessions(ts []Tenure) {
	for i := range ts {
		t := &ts[i]
		if t.Session == "" {
			continue
		}
		// The session's tenure: of its term, or the latest acquired before
		// t in records without one.
		var s *Tenure
		for j := range ts {
			c := &ts[j]
			if c.Lease != t.Session || c.Epoch != t.Epoch || c.Acquired > t.Acquired {
				continue
			}
			if (t.SessionTerm == "" || c.ID() == t.SessionTerm) && (s == nil || c.Acquired > s.Acquired) {
				s = c
			}
		}
		if s == nil {
			continue
		}
		t.ValidUntil = max(t.ValidUntil, s.ValidUntil)
		t.Relinquished = min(t.Relinquished, s.Relinquished)
		if s.ReleaseCall != 0 && (t.ReleaseCall == 0 || s.ReleaseCall < t.ReleaseCall) {
			t.ReleaseCall = s.ReleaseCall
		}
	}
}

// tenureKey identifies a tenure: its lease, identity and token.
type tenureKey struct {
	lease, id string
	token     uint64
}

// checkLease checks the tenures of one lease, sorted by acquisition, and
// pairs them into handovers. Token order is checked within each epoch of
// the store: after a rollback (the server lost acknowledged writes) it may
// issue tokens again, which only the fence's term rule can catch.
func (r *Result) checkLease(h record.History, ts []Tenure) {
	for i, t := range ts {
		if i > 0 {
			prev := ts[i-1]
			switch {
			case t.Epoch != prev.Epoch:
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
			if prev.ID() == t.ID() && (prev.WorkStart == 0 || prev.WorkStop <= t.Acquired) {
				// One term took its own key again (a store lets it) after
				// its workload had stopped: one holder, never two.
				continue
			}
			r.add(Overlap, t.Lease, t.Acquired,
				"token %d of %s (%s) claims validity until %s, but token %d of %s (%s) was acquired at %s",
				prev.Token, prev.Owner, prev.Proc, fmtT(prev.End()), t.Token, t.Owner, t.Proc, fmtT(t.Acquired))
		}
	}
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
	case record.MarkKill, record.MarkStop, record.MarkNetFault, record.MarkClock, record.MarkRestart, record.MarkResign:
		return m.Proc == "" || m.Proc == t.Proc
	case record.MarkServerKill, record.MarkBucket, record.MarkRollback, record.MarkNodeKill, record.MarkNodeStop,
		record.MarkPartition:
		return true
	case record.MarkTamper:
		return m.Lease == "" || m.Lease == t.Lease
	}
	return false
}

// checkWrites checks the writes the resource accepted against the fence's
// rule (a token above the highest accepted, or equal to it from the same
// term) and against the tenures.
func (r *Result) checkWrites(h record.History) {
	byToken := map[tenureKey]Tenure{}
	for _, t := range r.Tenures {
		byToken[tenureKey{t.Lease, t.ID(), t.Token}] = t
	}
	writes := slices.Clone(h.Writes)
	slices.SortFunc(writes, func(a, b record.Write) int { return cmp.Compare(a.Seq, b.Seq) })
	type tenure struct {
		token uint64
		id    string
	}
	highest := map[string]tenure{}
	for _, w := range writes {
		if !w.Accepted {
			continue
		}
		switch hi := highest[w.Lease]; {
		case w.Token < hi.token:
			r.add(StaleWrite, w.Lease, w.At, "write #%d of %s (%s) with token %d accepted after token %d",
				w.Seq, w.Owner, w.Proc, w.Token, hi.token)
		case w.Token == hi.token && w.ID() != hi.id:
			r.add(StaleWrite, w.Lease, w.At, "write #%d of %s (%s) with token %d of term %s accepted after the "+
				"same token of term %s", w.Seq, w.Owner, w.Proc, w.Token, w.ID(), hi.id)
		}
		if w.Token >= highest[w.Lease].token {
			highest[w.Lease] = tenure{w.Token, w.ID()}
		}
		t, ok := byToken[tenureKey{w.Lease, w.ID(), w.Token}]
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

// checkWorkloads checks each workload against its tenure, and that no
// candidate ran two workloads at once.
func (r *Result) checkWorkloads(h record.History) {
	for _, w := range h.Workloads {
		var t *Tenure
		for i := range r.Tenures {
			if c := &r.Tenures[i]; c.Lease == w.Lease && c.Token == w.Token && c.ID() == w.ID() {
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
			if w.Stubborn {
				r.Stubborn++
				continue
			}
			r.add(WorkOutlived, w.Lease, w.Stop, "workload of %s (%s) with token %d stopped at %s, after its validity %s",
				w.Owner, w.Proc, w.Token, fmtT(w.Stop), fmtT(t.ValidUntil))
		}
	}
}

// checkCandidates reports a candidate (record.Workload.Sup) that started a
// workload while an earlier one of its own still ran: two terms at once in
// one supervisor, which the lease alone cannot see once the earlier term's
// lease has expired.
func (r *Result) checkCandidates(h record.History) {
	bySup := map[[2]string][]record.Workload{}
	for _, w := range h.Workloads {
		if w.Sup != "" {
			k := [2]string{w.Lease, w.Sup}
			bySup[k] = append(bySup[k], w)
		}
	}
	for _, ws := range bySup {
		slices.SortFunc(ws, func(a, b record.Workload) int { return cmp.Compare(a.Start, b.Start) })
		for i, w := range ws {
			for _, prev := range ws[:i] {
				if prev.Stop > w.Start {
					r.add(TwoTerms, w.Lease, w.Start, "%s started the workload of token %d at %s while its workload "+
						"of token %d still ran (until %s)", w.Sup, w.Token, fmtT(w.Start), prev.Token, fmtT(prev.Stop))
				}
			}
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
