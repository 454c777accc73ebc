package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/asterforge/aster/chaos/record"
)

// GrainResult is the verdict on a run of virtual actors (package grains,
// or protoactor-go's own lookup): one write to the fenced resource per
// message a grain handled, under the lease ID GrainPrefix+identity, and
// the callers' calls.
type GrainResult struct {
	// Activations is the number of activations that acted (wrote), over
	// every identity; Moved the identities acted on by more than one.
	Activations, Moved int
	// Identities is the number of identities written.
	Identities int
	// Duplicates lists each pair of activations of one identity whose
	// acting intervals overlap: from the first write the activation sent to
	// the last, counting the writes that had effect (the ones the fence
	// accepted; with fenced false, every write, as nothing refuses them).
	Duplicates []string
	// StaleAccepted counts writes the fence accepted with a token below
	// the highest it had accepted before (fenced only: a broken fence).
	StaleAccepted int
	// Late counts the writes an activation sent after a later activation
	// of its identity had written: refused by the fence (fenced), or taken
	// as they came (unfenced).
	Late int
	// Calls, Lost: the calls made by members never struck, and those that
	// did not succeed within their deadline.
	Calls, Lost int
	// StruckCalls, StruckLost: the same, of the members struck (a killed
	// member's calls in flight are not recorded).
	StruckCalls, StruckLost int
}

// GrainPrefix comes before an identity in the lease ID of its writes.
const GrainPrefix = "grains."

// Grains judges the writes and calls of a run. An activation is told apart
// by its term (the lock's term with package grains, one of its own with
// protoactor-go's lookup). struck names the processes a fault struck.
func Grains(writes []record.Write, calls []record.Call, struck map[string]bool, fenced bool) GrainResult {
	var r GrainResult
	type act struct {
		term        string
		first, last int64 // the Sent of its first and last counted write
		proc        string
		token       uint64
	}
	byID := map[string][]*act{}
	find := map[[2]string]*act{}
	// newest: per identity, the activation that began writing last, in the
	// resource's order.
	newest := map[string]*act{}
	ws := slices.Clone(writes)
	slices.SortFunc(ws, func(a, b record.Write) int { return int(a.Seq) - int(b.Seq) })
	for _, w := range ws {
		id, ok := strings.CutPrefix(w.Lease, GrainPrefix)
		if !ok {
			continue
		}
		if fenced && w.Accepted && w.Token < w.Highest {
			r.StaleAccepted++
		}
		if fenced && !w.Accepted {
			r.Late++ // refused by the fence
			continue
		}
		if n := newest[id]; !fenced && n != nil && n.term != w.Term && find[[2]string{id, w.Term}] != nil {
			r.Late++ // an older activation writing after a newer one began
		}
		a := find[[2]string{id, w.Term}]
		if a == nil {
			a = &act{term: w.Term, first: w.Sent, last: w.Sent, proc: w.Proc, token: w.Token}
			find[[2]string{id, w.Term}] = a
			byID[id] = append(byID[id], a)
			newest[id] = a
		}
		a.first, a.last = min(a.first, w.Sent), max(a.last, w.Sent)
	}
	r.Identities = len(byID)
	for id, as := range byID {
		r.Activations += len(as)
		if len(as) > 1 {
			r.Moved++
		}
		for i := range as {
			for j := i + 1; j < len(as); j++ {
				a, b := as[i], as[j]
				if a.first <= b.last && b.first <= a.last {
					r.Duplicates = append(r.Duplicates, fmt.Sprintf("%s: %s (token %d) acted %s–%s, %s (token %d) %s–%s",
						id, a.proc, a.token, fmtT(a.first), fmtT(a.last), b.proc, b.token, fmtT(b.first), fmtT(b.last)))
				}
			}
		}
	}
	slices.Sort(r.Duplicates)
	for _, c := range calls {
		switch {
		case struck[c.Proc]:
			r.StruckCalls++
			if !c.OK {
				r.StruckLost++
			}
		default:
			r.Calls++
			if !c.OK {
				r.Lost++
			}
		}
	}
	return r
}
