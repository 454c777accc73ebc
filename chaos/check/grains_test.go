package check_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/asterforge/aster/chaos/check"
	"github.com/asterforge/aster/chaos/record"
)

// gw is a write of identity id by term, sent at sent, in the resource's
// order (seq), accepted or not, with the highest token before it.
func gw(seq uint64, id, term string, token uint64, sent int64, accepted bool, highest uint64) record.Write {
	return record.Write{Seq: seq, Lease: check.GrainPrefix + id, Proc: "p-" + term, Term: term, Token: token,
		Sent: sent, At: sent + 1, Accepted: accepted, Highest: highest}
}

func TestGrains(t *testing.T) {
	for _, tc := range []struct {
		name                           string
		writes                         []record.Write
		fenced                         bool
		dups, stale, late, acts, moved int
	}{
		{name: "one activation after another", fenced: true, acts: 2, moved: 1, writes: []record.Write{
			gw(1, "a", "t1", 5, 10, true, 0), gw(2, "a", "t1", 5, 20, true, 5),
			gw(3, "a", "t2", 9, 30, true, 5), gw(4, "a", "t2", 9, 40, true, 9)}},
		{name: "interleaved and accepted", fenced: true, dups: 1, acts: 2, moved: 1, writes: []record.Write{
			gw(1, "a", "t1", 5, 10, true, 0), gw(2, "a", "t2", 9, 15, true, 5),
			gw(3, "a", "t1", 9, 20, true, 9)}}, // same token, another term: a broken fence took it
		{name: "a stale write refused", fenced: true, late: 1, acts: 2, moved: 1, writes: []record.Write{
			gw(1, "a", "t1", 5, 10, true, 0), gw(2, "a", "t2", 9, 30, true, 5),
			gw(3, "a", "t1", 5, 35, false, 9)}},
		{name: "a stale write accepted", fenced: true, stale: 1, dups: 1, acts: 2, moved: 1, writes: []record.Write{
			gw(1, "a", "t1", 5, 10, true, 0), gw(2, "a", "t2", 9, 30, true, 5),
			gw(3, "a", "t1", 5, 35, true, 9)}},
		{name: "unfenced: every write counts", dups: 1, late: 1, acts: 2, moved: 1, writes: []record.Write{
			gw(1, "a", "t1", 0, 10, true, 0), gw(2, "a", "t2", 0, 30, false, 0),
			gw(3, "a", "t1", 0, 35, true, 0)}},
		{name: "identities apart", fenced: true, acts: 2, writes: []record.Write{
			gw(1, "a", "t1", 5, 10, true, 0), gw(2, "b", "t2", 9, 10, true, 0),
			gw(3, "a", "t1", 5, 30, true, 5), gw(4, "b", "t2", 9, 30, true, 9),
			{Seq: 5, Lease: "not-a-grain", Term: "t3", Sent: 20, Accepted: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := check.Grains(tc.writes, nil, nil, tc.fenced)
			assert.Len(t, r.Duplicates, tc.dups, "%v", r.Duplicates)
			assert.Equal(t, tc.stale, r.StaleAccepted, "stale accepted")
			assert.Equal(t, tc.late, r.Late, "late")
			assert.Equal(t, tc.acts, r.Activations, "activations")
			assert.Equal(t, tc.moved, r.Moved, "moved")
		})
	}
}

func TestGrainCalls(t *testing.T) {
	calls := []record.Call{{Proc: "a", OK: true}, {Proc: "a"}, {Proc: "b", OK: true}, {Proc: "b"}, {Proc: "b"}}
	r := check.Grains(nil, calls, map[string]bool{"b": true}, true)
	assert.Equal(t, 2, r.Calls)
	assert.Equal(t, 1, r.Lost)
	assert.Equal(t, 3, r.StruckCalls)
	assert.Equal(t, 2, r.StruckLost)
}
