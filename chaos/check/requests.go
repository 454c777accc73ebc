package check

import (
	"cmp"
	"slices"

	"github.com/asterforge/aster/chaos/record"
)

// Violation kinds of singleton requests.
const (
	RequestHung   = "request-never-returned"
	RequestFailed = "request-failed-before-its-deadline"
	RequestLost   = "answered-but-not-applied"
	AppliedBlind  = "applied-without-looking-up-its-id"
	AppliedAgain  = "applied-again-after-recorded"
	AppliedTwice  = "applied-twice-by-the-resource"
)

// RequestResult is what Requests found.
type RequestResult struct {
	Sent, Answered, Failed int
	Applied                int // request IDs applied (accepted by the fence) at least once
	// Window counts attempts to apply an ID already applied, made while
	// the first application had not been recorded in the ID store yet: its
	// leader died, or its term ended, between the effect and the record.
	// singleton.Dedupe documents this window: it is effectively once only
	// for effects that end before the reply is recorded. The resource
	// closes it, recording the request ID with the effect: it applies each
	// ID once (a second application is AppliedTwice).
	Window     int
	Violations []Violation
}

// Requests checks singleton requests: reqs as the callers saw them, and h's
// writes (an accepted write carrying a request ID applies that request) and
// request-ID store calls (record.IDOp) as the leaders made them. It
// reports as violations a request whose call never returned; one that
// failed other than by running out of time at its deadline (no leader
// answered); one answered without having been applied; and, for
// de-duplicated handlers, an application made without looking the ID up,
// or after a lookup that began once an earlier application's record was
// complete. Every accepted write's tenure is checked by Check.
func Requests(h record.History, reqs []record.Request) RequestResult {
	var r RequestResult
	var res Result
	apps := map[string][]record.Write{} // accepted writes by request ID, duplicates too
	for _, w := range h.Writes {
		if w.Accepted && w.Request != "" {
			apps[w.Request] = append(apps[w.Request], w)
		}
	}
	r.Applied = len(apps)
	for id, ws := range apps {
		var effects []record.Write
		for _, w := range ws {
			if !w.Duplicate {
				effects = append(effects, w)
			}
		}
		if len(effects) > 1 {
			slices.SortFunc(effects, func(a, b record.Write) int { return cmp.Compare(a.Seq, b.Seq) })
			res.add(AppliedTwice, effects[1].Lease, effects[1].At,
				"request %s applied %d times by the resource (writes #%d and #%d)", id, len(effects), effects[0].Seq,
				effects[1].Seq)
		}
	}
	for _, q := range reqs {
		r.Sent++
		switch {
		case q.Done == record.Never:
			res.add(RequestHung, "", q.Sent, "a request of %s sent at %s never returned", q.Caller, fmtT(q.Sent))
		case q.OK:
			r.Answered++
			if len(apps[q.ID]) == 0 {
				res.add(RequestLost, "", q.Done, "request %s of %s was answered by token %d (term %s) but never applied",
					q.ID, q.Caller, q.Token, q.Term)
			}
		default:
			r.Failed++
			if !q.NoLeader || q.Done < q.Deadline {
				res.add(RequestFailed, "", q.Done, "a request of %s failed at %s, its deadline %s: %s",
					q.Caller, fmtT(q.Done), fmtT(q.Deadline), q.Err)
			}
		}
	}

	gets, puts := map[string][]record.IDOp{}, map[string][]record.IDOp{}
	for _, op := range h.IDOps {
		switch op.Type {
		case "get":
			gets[op.Request] = append(gets[op.Request], op)
		case "put":
			puts[op.Request] = append(puts[op.Request], op)
		}
	}
	if len(h.IDOps) > 0 {
		for id, ws := range apps {
			if len(ws) < 2 {
				continue
			}
			slices.SortFunc(ws, func(a, b record.Write) int { return cmp.Compare(a.Seq, b.Seq) })
			recorded := record.Never // the first successful record of the ID
			for _, p := range puts[id] {
				if p.Err == "" && p.Return != record.Never {
					recorded = min(recorded, p.Return)
				}
			}
			for _, w := range ws[1:] {
				var look *record.IDOp // the last lookup before w was sent, in w's process
				for i, g := range gets[id] {
					if g.Proc == w.Proc && !g.Found && g.Call <= w.Sent && (look == nil || g.Call > look.Call) {
						look = &gets[id][i]
					}
				}
				switch {
				case look == nil:
					res.add(AppliedBlind, w.Lease, w.At, "request %s applied again by %s (token %d) without a lookup",
						id, w.Proc, w.Token)
				case look.Call > recorded:
					res.add(AppliedAgain, w.Lease, w.At, "request %s applied again by %s (token %d): its lookup at %s "+
						"found nothing although its first application was recorded at %s", id, w.Proc, w.Token,
						fmtT(look.Call), fmtT(recorded))
				default:
					r.Window++
				}
			}
		}
	}
	r.Violations = res.Violations
	slices.SortFunc(r.Violations, func(a, b Violation) int { return cmp.Compare(a.At, b.At) })
	return r
}
