//go:build unix

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/lease"
)

// summary is what the demo measured and checked, computed from what it
// recorded once every instance has stopped.
type summary struct {
	TTL       time.Duration
	Elapsed   time.Duration
	Handovers []handover
	Terms     int
	Accepted  map[uint64]int // accepted writes by token
	Rejected  []writeRec
	// LateAccepted counts late writes (sent after their lease was lost) that
	// the fence accepted: a fencing failure.
	LateAccepted int
	// Tokens are the terms' tokens in the order of their acquisitions;
	// Increasing reports whether each is greater than the one before.
	Tokens     []uint64
	Increasing bool
	// Overlaps counts pairs of terms whose acting intervals intersect on
	// this host's clock; Pairs is how many pairs were compared.
	Overlaps, Pairs int
	// Problems lists what makes the verdict a failure.
	Problems []string
	// Complete reports whether the script ran to its end.
	Complete bool
}

// handover is one change of leader.
type handover struct {
	Kind               string // start, crash, pause, graceful, lost
	From, To           string
	FromToken, ToToken uint64
	Trigger            time.Time // the signal (or the start) that caused it
	// Free is when the lease became free in the store: the earliest of the
	// release the old leader reported and the expiry or release the
	// orchestrator's own watch of the key saw. Zero when neither is known.
	Free time.Time
	// Acquired is when the new leader reported its acquisition, or sent its
	// first write if that was earlier (the report is sent after the
	// workload has started).
	Acquired   time.Time
	FirstWrite time.Time // when the fence accepted the new leader's first write
}

func between(a, b time.Time) time.Duration {
	if a.IsZero() || b.IsZero() {
		return -1
	}
	return b.Sub(a)
}

var actionKind = map[string]string{actKill: "crash", actPause: "pause", actStop: "graceful"}

// summarize computes the summary. Call it once every instance has stopped.
func summarize(r *recorder, o options) *summary {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	s := &summary{TTL: o.ttl, Elapsed: time.Since(r.start), Accepted: map[uint64]int{}, Increasing: true}
	terms := r.sortedTerms()
	s.Terms = len(terms)

	// Handovers: consecutive terms, and what the script did to the first.
	for i, t := range terms {
		h := handover{Kind: "start", To: t.inst, ToToken: t.token}
		if i == 0 {
			for _, a := range r.actions {
				if a.kind == actStart {
					h.Trigger = a.at
					break
				}
			}
		} else {
			prev := terms[i-1]
			h.From, h.FromToken, h.Kind = prev.inst, prev.token, "lost"
			h.Trigger = prev.ended
			for _, a := range r.actions {
				if k, ok := actionKind[a.kind]; ok && a.inst == prev.inst && a.token == prev.token {
					h.Kind, h.Trigger = k, a.at
					break
				}
			}
		}
		h.Acquired = t.begin()
		if i > 0 {
			// The earliest sign that the key was free: the old leader's
			// report of its release, the watch's event of a release or a
			// removal, or the end of the old term's TTL, counted from the
			// last write of it the watch saw (a crashed or frozen leader's
			// key is not removed: a standby judges it expired when it has
			// not changed for its TTL, and writes over it). A sign later
			// than the acquisition was stamped late (the new leader can
			// acquire before the old one has reported).
			signs := []time.Time{terms[i-1].released}
			var lastWrite time.Time
			for _, w := range r.watch {
				if w.ev.Kind == lease.EventHeld && w.ev.Revision == t.token {
					break
				}
				switch {
				case w.ev.Kind == lease.EventFree && !w.at.Before(h.Trigger):
					signs = append(signs, w.at)
				case w.ev.Kind == lease.EventHeld && uint64(w.ev.Holder.Token) == h.FromToken:
					lastWrite = w.at
				}
			}
			if !lastWrite.IsZero() && !lastWrite.Add(s.TTL).Before(h.Trigger) {
				signs = append(signs, lastWrite.Add(s.TTL))
			}
			for _, at := range signs {
				if !at.IsZero() && !at.After(h.Acquired) && (h.Free.IsZero() || at.Before(h.Free)) {
					h.Free = at
				}
			}
		}
		h.FirstWrite = t.firstAt
		s.Handovers = append(s.Handovers, h)
	}

	// Tokens in the order of acquisition.
	byTime := slices.Clone(terms)
	slices.SortStableFunc(byTime, func(a, b *term) int { return a.begin().Compare(b.begin()) })
	for i, t := range byTime {
		s.Tokens = append(s.Tokens, t.token)
		if i > 0 && t.token <= byTime[i-1].token {
			s.Increasing = false
		}
	}

	// Writes.
	for _, w := range r.writes {
		switch {
		case w.accepted:
			s.Accepted[w.req.Token]++
			if w.req.Late {
				s.LateAccepted++
			}
		default:
			s.Rejected = append(s.Rejected, w)
		}
	}

	// Overlaps: a term acts from its acquisition (or its first write, if
	// reported earlier) until the first of: the end of its validity, its
	// workload's stop, its kill. No two such intervals may intersect.
	type interval struct{ from, to time.Time }
	var ivs []interval
	for _, t := range terms {
		iv := interval{from: t.begin(), to: demo.EndOfTime}
		for _, end := range []time.Time{t.validUntil, t.stopped, killedAt(r.actions, t)} {
			if !end.IsZero() && end.Before(iv.to) {
				iv.to = end
			}
		}
		ivs = append(ivs, iv)
	}
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			s.Pairs++
			if ivs[i].from.Before(ivs[j].to) && ivs[j].from.Before(ivs[i].to) {
				s.Overlaps++
			}
		}
	}

	if s.Overlaps > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("%d overlapping terms", s.Overlaps))
	}
	if s.LateAccepted > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("%d late writes accepted by the fence", s.LateAccepted))
	}
	if !s.Increasing {
		s.Problems = append(s.Problems, "tokens not strictly increasing")
	}
	late := 0
	for _, w := range r.writes {
		if w.req.Late {
			late++
		}
	}
	if late == 0 && slices.ContainsFunc(r.actions, func(a action) bool { return a.kind == actResume }) {
		s.Problems = append(s.Problems, "no late write reached the fence")
	}
	return s
}

// killedAt is when t's holder was killed while holding it, or zero.
func killedAt(actions []action, t *term) time.Time {
	for _, a := range actions {
		if a.kind == actKill && a.inst == t.inst && a.token == t.token {
			return a.at
		}
	}
	return time.Time{}
}

// OK reports whether the fence's verdict is a pass.
func (s *summary) OK() bool { return len(s.Problems) == 0 }

// print writes the summary as tables.
func (s *summary) print(w io.Writer) {
	fmt.Fprintf(w, "\nSummary (%v; TTL %v; times on this host's clock)\n\n", round(s.Elapsed), s.TTL)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tkind\tfrom → to\ttokens\tlease free after\tacquired after\tfirst write after")
	for i, h := range s.Handovers {
		from, tokens, free := "–", "– → "+shortToken(h.ToToken), "–"
		if h.From != "" {
			from, tokens, free = h.From, shortToken(h.FromToken)+" → "+shortToken(h.ToToken), dur(between(h.Trigger, h.Free))
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s → %s\t%s\t%s\t%s\t%s\n", i, h.Kind, from, h.To, tokens, free,
			dur(between(h.Trigger, h.Acquired)), dur(between(h.Trigger, h.FirstWrite)))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\n  Durations from the signal (SIGKILL, SIGSTOP, SIGTERM; for #0, the start of the instances):")
	fmt.Fprintln(w, "  lease free after: until the lease was free (the old leader released it, or its TTL ran out since the")
	fmt.Fprintln(w, "  last renewal the orchestrator's watch saw); acquired after: until a standby acquired the lease; first")
	fmt.Fprintln(w, "  write after: until the fence accepted its first write. ?: not observed (the watch coalesces events).")
	if len(s.Tokens) > 0 && s.Tokens[0] >= shortTokenAbove {
		fmt.Fprintf(w, "  Tokens show their last %d digits; the first in full is %d (a new bucket starts its sequence from the clock).\n", shortTokenDigits, s.Tokens[0])
	}

	fmt.Fprintln(w, "\nFence (lease.Fence in front of the outbox)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	total, parts := 0, []string{}
	for _, t := range s.Tokens {
		total += s.Accepted[t]
		parts = append(parts, fmt.Sprintf("token %s: %d", shortToken(t), s.Accepted[t]))
	}
	if len(parts) == 0 {
		fmt.Fprintf(tw, "  accepted writes\t%d\n", total)
	} else {
		fmt.Fprintf(tw, "  accepted writes\t%d (%s)\n", total, strings.Join(parts, ", "))
	}
	fmt.Fprintf(tw, "  rejected writes\t%s\n", strings.TrimSpace(fmt.Sprintf("%d %s", len(s.Rejected), rejections(s.Rejected))))
	fmt.Fprintf(tw, "  late writes accepted\t%d\n", s.LateAccepted)
	tokens := make([]string, 0, len(s.Tokens))
	for _, t := range s.Tokens {
		tokens = append(tokens, shortToken(t))
	}
	if s.Increasing {
		fmt.Fprintf(tw, "  tokens\t%s: strictly increasing, in order of acquisition\n", strings.Join(tokens, " < "))
	} else {
		fmt.Fprintf(tw, "  tokens\t%s: NOT strictly increasing, in order of acquisition\n", strings.Join(tokens, ", "))
	}
	fmt.Fprintf(tw, "  overlaps\t%d (acting intervals of %d terms, %d pairs compared)\n", s.Overlaps, s.Terms, s.Pairs)
	verdict := "PASS: stale writes rejected, never two leaders at once"
	switch {
	case !s.OK():
		verdict = "FAIL: " + strings.Join(s.Problems, "; ")
	case !s.Complete:
		verdict = "INCOMPLETE: the demo did not finish; nothing wrong in what it recorded"
	}
	fmt.Fprintf(tw, "  verdict\t%s\n", verdict)
	_ = tw.Flush()
}

func rejections(ws []writeRec) string {
	var out []string
	for _, w := range ws {
		what := ""
		if w.req.Late {
			what = ", late"
		}
		out = append(out, fmt.Sprintf("(%s token %s < highest %s%s)", w.req.Inst, shortToken(w.req.Token), shortToken(w.highest), what))
	}
	return strings.Join(out, " ")
}

// Tokens at or above shortTokenAbove are shown by their last
// shortTokenDigits digits: a bucket's first token is drawn from the clock
// (sixteen digits), and the demo's handovers differ only in the last few.
const (
	shortTokenDigits = 6
	shortTokenMod    = 1_000_000 // 10^shortTokenDigits
	shortTokenAbove  = 10_000_000
)

func shortToken(t uint64) string {
	if t < shortTokenAbove {
		return fmt.Sprint(t)
	}
	return fmt.Sprintf("…%0*d", shortTokenDigits, t%shortTokenMod)
}

func dur(d time.Duration) string {
	if d < 0 {
		return "?"
	}
	return round(d).String()
}
