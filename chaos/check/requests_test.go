package check_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/asterforge/aster/chaos/check"
	"github.com/asterforge/aster/chaos/record"
)

// reqHist is a singleton's history: requests applied through the fence,
// and the ID store's lookups and records, in milliseconds.
type reqHist struct {
	hist
	reqs []record.Request
}

func (h *reqHist) apply(proc, id string, token uint64, at int64) {
	h.write(proc, proc, token, at, true)
	h.Writes[len(h.Writes)-1].Request = id
}

func (h *reqHist) idop(proc, id, typ string, call, ret int64, found bool) {
	if ret != record.Never {
		ret *= ms
	}
	h.IDOps = append(h.IDOps, record.IDOp{Proc: proc, Request: id, Type: typ, Call: call * ms, Return: ret, Found: found})
}

func (h *reqHist) answered(id string, sent, done int64) {
	h.reqs = append(h.reqs, record.Request{Caller: "c", ID: id, Sent: sent * ms, Deadline: (sent + 3000) * ms,
		Done: done * ms, OK: true})
}

// handled is one request handled by a de-duplicated handler: looked up,
// applied, recorded.
func (h *reqHist) handled(proc, id string, token uint64, at int64) {
	h.idop(proc, id, "get", at-2, at-1, false)
	h.apply(proc, id, token, at)
	h.idop(proc, id, "put", at+1, at+2, false)
}

func reqKinds(r check.RequestResult) []string {
	var ks []string
	for _, v := range r.Violations {
		ks = append(ks, v.Kind)
	}
	return ks
}

func TestRequestsClean(t *testing.T) {
	h := &reqHist{}
	h.handled("pa", "r1", 5, 10)
	h.answered("r1", 5, 15)
	h.reqs = append(h.reqs, record.Request{Caller: "c", Sent: 20 * ms, Deadline: 3020 * ms, Done: 3020 * ms,
		NoLeader: true, Err: "no leader"})
	r := check.Requests(h.History, h.reqs)
	assert.Empty(t, r.Violations)
	assert.Equal(t, check.RequestResult{Sent: 2, Answered: 1, Failed: 1, Applied: 1}, r)
}

func TestRequestsCallerChecks(t *testing.T) {
	h := &reqHist{}
	h.answered("r1", 5, 15) // never applied
	h.reqs = append(h.reqs,
		record.Request{Caller: "c", Sent: 20 * ms, Deadline: 3020 * ms, Done: record.Never},
		record.Request{Caller: "c", Sent: 30 * ms, Deadline: 3030 * ms, Done: 40 * ms, Err: "handler failed"},
		record.Request{Caller: "c", Sent: 50 * ms, Deadline: 3050 * ms, Done: 60 * ms, NoLeader: true, Err: "early"})
	r := check.Requests(h.History, h.reqs)
	assert.Equal(t, []string{check.RequestLost, check.RequestHung, check.RequestFailed, check.RequestFailed}, reqKinds(r))
}

func TestRequestsAppliedTwice(t *testing.T) {
	// window is a request applied by pa, whose leader died before recording
	// it, and sent again to pb, which looked it up and applied it again.
	window := func(duplicate bool) check.RequestResult {
		h := &reqHist{}
		h.idop("pa", "r1", "get", 8, 9, false)
		h.apply("pa", "r1", 5, 10)
		h.idop("pa", "r1", "put", 11, record.Never, false) // the leader died here
		h.handled("pb", "r1", 9, 2000)
		h.Writes[len(h.Writes)-1].Duplicate = duplicate
		return check.Requests(h.History, nil)
	}
	t.Run("in the window, found applied by the resource", func(t *testing.T) {
		r := window(true)
		assert.Empty(t, r.Violations)
		assert.Equal(t, 1, r.Window)
		assert.Equal(t, 1, r.Applied)
	})
	t.Run("in the window, applied twice by the resource", func(t *testing.T) {
		assert.Equal(t, []string{check.AppliedTwice}, reqKinds(window(false)))
	})
	// again is a request handled by pa, then by pb with the second
	// application found done by the resource, which then does not hide a
	// de-duplication that failed.
	again := func(lookup bool) check.RequestResult {
		h := &reqHist{}
		h.handled("pa", "r1", 5, 10)
		if lookup {
			h.handled("pb", "r1", 9, 2000)
			h.Writes[len(h.Writes)-1].Duplicate = true
		} else {
			h.apply("pb", "r1", 9, 2000)
			h.Writes[len(h.Writes)-1].Duplicate = true
		}
		return check.Requests(h.History, nil)
	}
	t.Run("after the record", func(t *testing.T) {
		assert.Equal(t, []string{check.AppliedAgain}, reqKinds(again(true)))
	})
	t.Run("without a lookup", func(t *testing.T) {
		assert.Equal(t, []string{check.AppliedBlind}, reqKinds(again(false)))
	})
}
