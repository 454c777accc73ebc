package check_test

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/chaos/check"
	"github.com/asterforge/aster/chaos/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	ms     = int64(time.Millisecond)
	ttl    = time.Second
	margin = 100 * ms
	lease  = "chaos.l"
)

// hist builds histories of one lease in milliseconds of reference time.
type hist struct{ record.History }

// who splits "owner/term", how the helpers name one term of an owner;
// a plain "owner" has no term.
func who(s string) (owner, term string) {
	owner, term, _ = strings.Cut(s, "/")
	return owner, term
}

func (h *hist) acquire(proc, holder string, call, ret int64, token uint64) {
	owner, term := who(holder)
	h.Ops = append(h.Ops, record.Op{Proc: proc, Lease: lease, Owner: owner, Term: term, Type: record.OpAcquire, TTL: ttl,
		Call: call * ms, Return: ret * ms, Result: record.ResultOK, OutToken: token, OutRev: token,
		ValidUntil: call*ms + int64(ttl) - margin})
}

func (h *hist) standby(proc, caller string, call, ret int64, holder string) {
	owner, term := who(caller)
	outOwner, outTerm := who(holder)
	h.Ops = append(h.Ops, record.Op{Proc: proc, Lease: lease, Owner: owner, Term: term, Type: record.OpAcquire, TTL: ttl,
		Call: call * ms, Return: ret * ms, Result: record.ResultStandby, OutOwner: outOwner, OutTerm: outTerm})
}

func (h *hist) renew(proc, holder string, call, ret int64, token, rev, out uint64, res record.Result) {
	owner, term := who(holder)
	op := record.Op{Proc: proc, Lease: lease, Owner: owner, Term: term, Type: record.OpRenew, TTL: ttl, Token: token, Rev: rev,
		Call: call * ms, Return: ret * ms, Result: res}
	if res == record.ResultOK {
		op.OutRev, op.ValidUntil = out, call*ms+int64(ttl)-margin
	}
	h.Ops = append(h.Ops, op)
}

func (h *hist) release(proc, holder string, call, ret int64, token, rev uint64, res record.Result) {
	owner, term := who(holder)
	h.Ops = append(h.Ops, record.Op{Proc: proc, Lease: lease, Owner: owner, Term: term, Type: record.OpRelease, Token: token,
		Rev: rev, Call: call * ms, Return: ret * ms, Result: res})
}

func (h *hist) tamper(typ record.OpType, call, ret int64) {
	h.Ops = append(h.Ops, record.Op{Proc: "operator", Lease: lease, Type: typ, Call: call * ms, Return: ret * ms,
		Result: record.ResultOK})
	h.Marks = append(h.Marks, record.Mark{Kind: record.MarkTamper, Lease: lease, At: call * ms})
}

func (h *hist) work(proc, holder string, token uint64, start, stop int64) {
	if stop != record.Never {
		stop *= ms
	}
	owner, term := who(holder)
	h.Workloads = append(h.Workloads, record.Workload{Proc: proc, Lease: lease, Owner: owner, Term: term, Token: token,
		Start: start * ms, Stop: stop})
}

func (h *hist) write(proc, holder string, token uint64, at int64, accepted bool) {
	owner, term := who(holder)
	var highest uint64
	for _, w := range h.Writes {
		if w.Accepted {
			highest = max(highest, w.Token)
		}
	}
	h.Writes = append(h.Writes, record.Write{Seq: uint64(len(h.Writes) + 1), Lease: lease, Proc: proc, Owner: owner,
		Term: term, Token: token, Sent: at*ms - ms/10, At: at * ms, Accepted: accepted, Highest: highest})
}

func (h *hist) mark(kind record.MarkKind, proc string, at int64) {
	h.Marks = append(h.Marks, record.Mark{Kind: kind, Proc: proc, At: at * ms})
}

// graceful is a clean history: A holds, renews, stops its workload and
// releases; B, standing by, takes over with a larger token.
func graceful() *hist {
	h := &hist{}
	h.acquire("pa", "A", 0, 1, 5)
	h.work("pa", "A", 5, 2, 500)
	h.standby("pb", "B", 3, 4, "A")
	h.write("pa", "A", 5, 10, true)
	h.renew("pa", "A", 250, 251, 5, 5, 7, record.ResultOK)
	h.write("pa", "A", 5, 400, true)
	h.release("pa", "A", 501, 502, 5, 7, record.ResultOK)
	h.acquire("pb", "B", 502, 503, 9)
	h.work("pb", "B", 9, 504, record.Never)
	h.write("pb", "B", 9, 505, true)
	h.write("pa", "A", 5, 506, false) // a late write, rightly rejected
	return h
}

func kinds(r check.Result) []string {
	var ks []string
	for _, v := range r.Violations {
		ks = append(ks, v.Kind)
	}
	return ks
}

func TestCleanHistoryPasses(t *testing.T) {
	h := graceful()
	r := check.Check(h.History)
	assert.Empty(t, r.Violations)
	require.Len(t, r.Tenures, 2)
	assert.Equal(t, 250*ms+int64(ttl)-margin, r.Tenures[0].ValidUntil, "a renewal extends the claim")
	assert.Equal(t, 501*ms, r.Tenures[0].End(), "a release ends the claim")
	require.Len(t, r.Handovers, 1)
	assert.Equal(t, "release", r.Handovers[0].Cause)
	assert.Equal(t, 3*time.Millisecond, r.Handovers[0].Latency, "release call to the new workload's start")

	res, _ := check.Linearizable(h.Ops, 10*time.Second)
	assert.Equal(t, porcupine.Ok, res)
}

func TestOverlapIsFlagged(t *testing.T) {
	h := &hist{}
	h.acquire("pa", "A", 0, 1, 5)
	h.renew("pa", "A", 250, 251, 5, 5, 7, record.ResultOK)
	// B is handed the lease while A's claim runs until 1150 ms.
	h.acquire("pb", "B", 600, 601, 9)
	r := check.Check(h.History)
	assert.Equal(t, []string{check.Overlap}, kinds(r))

	res, _ := check.Linearizable(h.Ops, 10*time.Second)
	assert.Equal(t, porcupine.Illegal, res, "no store may hand out a held, unexpired key")
}

// An operator's delete does not excuse a takeover: natsstore makes
// contenders that saw the key vanish wait for the longest TTL.
func TestOverlapAfterTamperingIsFlagged(t *testing.T) {
	h := &hist{}
	h.acquire("pa", "A", 0, 1, 5)
	h.tamper(record.OpDelete, 100, 101)
	h.acquire("pb", "B", 102, 103, 7)
	h.write("pb", "B", 7, 104, true)
	h.write("pa", "A", 5, 105, false)
	h.renew("pa", "A", 250, 251, 5, 5, 0, record.ResultLost)
	r := check.Check(h.History)
	assert.Equal(t, []string{check.Overlap}, kinds(r))
	require.Len(t, r.Handovers, 1)
	assert.Equal(t, string(record.MarkTamper), r.Handovers[0].Cause)

	res, _ := check.Linearizable(h.Ops, 10*time.Second)
	assert.Equal(t, porcupine.Ok, res, "the store's history itself is consistent")

	h = &hist{}
	h.acquire("pa", "A", 0, 1, 5)
	h.tamper(record.OpDelete, 100, 101)
	h.standby("pb", "B", 102, 103, "")
	h.renew("pa", "A", 250, 251, 5, 5, 0, record.ResultLost)
	h.acquire("pb", "B", 1101, 1102, 7)
	assert.Empty(t, check.Check(h.History).Violations, "taken one TTL after the vanish")
}

// Two terms of one owner (one pod name on two processes) are two holders.
func TestTermsOfOneOwnerAreTwoHolders(t *testing.T) {
	h := &hist{}
	h.acquire("pa", "pod-7/t1", 0, 1, 5)
	h.work("pa", "pod-7/t1", 5, 2, 300)
	h.acquire("pb", "pod-7/t2", 310, 311, 8) // t1's claim runs until 900
	h.work("pb", "pod-7/t2", 8, 312, record.Never)
	assert.Equal(t, []string{check.Overlap}, kinds(check.Check(h.History)))

	res, _ := check.Linearizable(h.Ops, 10*time.Second)
	assert.Equal(t, porcupine.Illegal, res, "no store may give a key held by one term to another")

	h = &hist{}
	h.acquire("pa", "pod-7/t1", 0, 1, 5)
	h.Ops = append(h.Ops, record.Op{Proc: "pb", Lease: lease, Owner: "pod-7", Term: "t2", Type: record.OpAcquire,
		TTL: ttl, Call: 2 * ms, Return: 3 * ms, Result: record.ResultStandby, OutOwner: "pod-7", OutTerm: "t1"})
	res, _ = check.Linearizable(h.Ops, 10*time.Second)
	assert.Equal(t, porcupine.Ok, res, "a standby names the holding term")
}

// The fence's term rule: one token from two terms is refused; a resource
// that admits the second is a stale write.
func TestOneTokenFromTwoTermsIsAStaleWrite(t *testing.T) {
	h := &hist{}
	h.acquire("pa", "A/t1", 0, 1, 5)
	h.write("pa", "A/t1", 5, 10, true)
	h.Ops = append(h.Ops, record.Op{Proc: "pb", Lease: lease, Owner: "B", Term: "t2", Type: record.OpAcquire, TTL: ttl,
		Call: 2000 * ms, Return: 2001 * ms, Result: record.ResultOK, OutToken: 5, OutRev: 5,
		ValidUntil: 2000*ms + int64(ttl) - margin, Epoch: 1}) // the store lost its writes and issued 5 again
	h.write("pb", "B/t2", 5, 2010, true)
	assert.Equal(t, []string{check.StaleWrite}, kinds(check.Check(h.History)))
}
func TestSameTermReacquiring(t *testing.T) {
	h := &hist{}
	h.acquire("pa", "A/t1", 0, 1, 5)
	h.work("pa", "A/t1", 5, 2, 300)
	h.acquire("pa", "A/t1", 310, 311, 8) // the key was still t1's; its workload had stopped
	h.work("pa", "A/t1", 8, 312, record.Never)
	assert.Empty(t, check.Check(h.History).Violations)

	h = &hist{}
	h.acquire("pa", "A/t1", 0, 1, 5)
	h.work("pa", "A/t1", 5, 2, 400)
	h.acquire("pa", "A/t1", 310, 311, 8) // one term running twice at once
	h.work("pa", "A/t1", 8, 312, record.Never)
	assert.Equal(t, []string{check.Overlap}, kinds(check.Check(h.History)))
}

// One candidate never runs two terms at once, even when the lease let it
// (the first term's lease expired while its workload ignored its context).
func TestTwoTermsInOneCandidate(t *testing.T) {
	h := &hist{}
	h.acquire("pa", "A/t1", 0, 1, 5)
	h.Workloads = append(h.Workloads, record.Workload{Proc: "pa", Sup: "pa/1", Lease: lease, Owner: "A", Term: "t1",
		Token: 5, Start: 2 * ms, Stop: 3000 * ms, Stubborn: true})
	h.acquire("pa", "A/t2", 1500, 1501, 9)
	h.Workloads = append(h.Workloads, record.Workload{Proc: "pa", Sup: "pa/1", Lease: lease, Owner: "A", Term: "t2",
		Token: 9, Start: 1502 * ms, Stop: record.Never})
	r := check.Check(h.History)
	assert.Equal(t, []string{check.TwoTerms}, kinds(r))
	assert.Equal(t, 1, r.Stubborn, "a stubborn workload outliving its validity is counted, not a violation")

	h.Workloads[1].Sup = "pb/1"
	assert.Empty(t, check.Check(h.History).Violations, "another candidate may take over an expired lease")
}

// After the server lost acknowledged writes (a rollback), tokens may be
// issued again: their order is checked within each epoch of the store.
func TestTokensAreOrderedWithinAnEpoch(t *testing.T) {
	h := &hist{}
	h.acquire("pa", "A/t1", 0, 1, 5)
	h.release("pa", "A/t1", 10, 11, 5, 5, record.ResultOK)
	h.acquire("pb", "B/t2", 2000, 2001, 3)
	h.Ops[len(h.Ops)-1].Epoch = 1
	assert.Empty(t, check.Check(h.History).Violations)
	h.Ops[len(h.Ops)-1].Epoch = 0
	assert.Equal(t, []string{check.TokenOrder}, kinds(check.Check(h.History)))
}

func TestTokenChecks(t *testing.T) {
	t.Run("reused", func(t *testing.T) {
		h := &hist{}
		h.acquire("pa", "A", 0, 1, 5)
		h.release("pa", "A", 10, 11, 5, 5, record.ResultOK)
		h.acquire("pb", "B", 20, 21, 5)
		assert.Equal(t, []string{check.TokenReused}, kinds(check.Check(h.History)))
		res, _ := check.Linearizable(h.Ops, 10*time.Second)
		assert.Equal(t, porcupine.Illegal, res, "a new acquisition must get a new revision")
	})
	t.Run("decreasing", func(t *testing.T) {
		h := &hist{}
		h.acquire("pa", "A", 0, 1, 5)
		h.release("pa", "A", 10, 11, 5, 5, record.ResultOK)
		h.acquire("pb", "B", 20, 21, 3)
		assert.Equal(t, []string{check.TokenOrder}, kinds(check.Check(h.History)))
		res, _ := check.Linearizable(h.Ops, 10*time.Second)
		assert.Equal(t, porcupine.Illegal, res)
	})
}

func TestWriteChecks(t *testing.T) {
	t.Run("stale token accepted", func(t *testing.T) {
		h := graceful()
		h.write("pa", "A", 5, 507, true)
		assert.Equal(t, []string{check.StaleWrite, check.WriteOutside}, kinds(check.Check(h.History)))
	})
	t.Run("accepted outside validity", func(t *testing.T) {
		h := &hist{}
		h.acquire("pa", "A", 0, 1, 5)
		h.work("pa", "A", 5, 2, record.Never)
		h.write("pa", "A", 5, 950, true) // claim ends at 900
		assert.Equal(t, []string{check.WriteOutside}, kinds(check.Check(h.History)))
	})
	t.Run("sent before a kill, landed after", func(t *testing.T) {
		h := &hist{}
		h.acquire("pa", "A", 0, 1, 5)
		h.work("pa", "A", 5, 2, record.Never)
		h.mark(record.MarkKill, "pa", 100)
		h.write("pa", "A", 5, 101, true)
		assert.Empty(t, check.Check(h.History).Violations, "the lease is A's until it expires")
	})
	t.Run("after the release call", func(t *testing.T) {
		h := graceful()
		h.Writes = h.Writes[:2]
		h.write("pa", "A", 5, 501, true)
		assert.Empty(t, check.Check(h.History).Violations, "a write at the instant of the release call is inside")
		h.write("pa", "A", 5, 502, true)
		assert.Equal(t, []string{check.WriteOutside}, kinds(check.Check(h.History)))
	})
	t.Run("from no tenure", func(t *testing.T) {
		h := graceful()
		h.write("pc", "C", 99, 600, true)
		assert.Equal(t, []string{check.OrphanWrite}, kinds(check.Check(h.History)))
	})
	t.Run("rejected writes are fine", func(t *testing.T) {
		h := graceful()
		h.write("pc", "C", 1, 600, false)
		assert.Empty(t, check.Check(h.History).Violations)
	})
}

func TestWorkloadChecks(t *testing.T) {
	outlived := func() *hist {
		h := &hist{}
		h.acquire("pa", "A", 0, 1, 5)
		h.work("pa", "A", 5, 2, 1200) // validity ends at 900
		return h
	}
	assert.Equal(t, []string{check.WorkOutlived}, kinds(check.Check(outlived().History)))

	h := outlived()
	h.mark(record.MarkStop, "pa", 300)
	h.mark(record.MarkCont, "pa", 1190)
	r := check.Check(h.History)
	assert.Empty(t, r.Violations, "a paused process cannot stop its workload")
	assert.Equal(t, 1, r.LateStops)

	h = &hist{}
	h.acquire("pa", "A", 10, 11, 5)
	h.work("pa", "A", 5, 9, 20)
	assert.Equal(t, []string{check.WorkOutside}, kinds(check.Check(h.History)))
}

func TestKillEndsTheClaimAndTimesTheTakeover(t *testing.T) {
	h := &hist{}
	h.acquire("pa", "A", 0, 1, 5)
	h.work("pa", "A", 5, 2, record.Never)
	h.renew("pa", "A", 250, 251, 5, 5, 7, record.ResultOK)
	h.mark(record.MarkKill, "pa", 300)
	h.Ops = append(h.Ops, record.Op{Proc: "pa", Lease: lease, Owner: "A", Type: record.OpRenew, TTL: ttl,
		Token: 5, Rev: 7, Call: 299 * ms, Return: record.Never, Result: record.ResultUnknown})
	h.standby("pb", "B", 1000, 1001, "A")
	h.acquire("pb", "B", 1300, 1301, 11)
	h.work("pb", "B", 11, 1302, record.Never)

	r := check.Check(h.History)
	assert.Empty(t, r.Violations)
	assert.Equal(t, 250*ms+int64(ttl)-margin, r.Tenures[0].End(), "death does not end the claim: in-flight writes may land")
	require.Len(t, r.Handovers, 1)
	assert.Equal(t, string(record.MarkKill), r.Handovers[0].Cause)
	assert.Equal(t, 1002*time.Millisecond, r.Handovers[0].Latency)

	res, _ := check.Linearizable(h.Ops, 10*time.Second)
	assert.Equal(t, porcupine.Ok, res, "the pending renewal may have landed; expiry after it explains B")
}

// A leader cut off from the store gives up at its renew deadline and tries
// to release while still valid; the release fails, and the handover is the
// fault's, through the key's expiry.
func TestFailedReleaseIsNoCause(t *testing.T) {
	h := &hist{}
	h.acquire("pa", "A", 0, 1, 5)
	h.mark(record.MarkNetFault, "pa", 100)
	h.release("pa", "A", 810, 1200, 5, 5, record.ResultUnknown)
	h.acquire("pb", "B", 1000, 1001, 9)
	h.work("pb", "B", 9, 1002, record.Never)
	r := check.Check(h.History)
	assert.Empty(t, r.Violations)
	assert.Equal(t, 810*ms, r.Tenures[0].End(), "the release call still ends the claim")
	require.Len(t, r.Handovers, 1)
	assert.Equal(t, string(record.MarkNetFault), r.Handovers[0].Cause)
	assert.Equal(t, 902*time.Millisecond, r.Handovers[0].Latency)
}

func TestTakeoverIsTimedFromTheLastFault(t *testing.T) {
	h := &hist{}
	h.acquire("pa", "A", 0, 1, 5)
	h.mark(record.MarkStop, "pa", 100) // survived
	h.mark(record.MarkCont, "pa", 600)
	h.mark(record.MarkStop, "pa", 2000) // this one ended it
	h.acquire("pb", "B", 2950, 2951, 9)
	h.work("pb", "B", 9, 2952, record.Never)
	r := check.Check(h.History)
	require.Len(t, r.Handovers, 1)
	assert.Equal(t, string(record.MarkStop), r.Handovers[0].Cause)
	assert.Equal(t, 952*time.Millisecond, r.Handovers[0].Latency)
}

func TestLinearizableModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  func(h *hist)
		want porcupine.CheckResult
	}{
		{"standby names the owner", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.standby("pb", "B", 2, 3, "A")
		}, porcupine.Ok},
		{"standby on a free key", func(h *hist) {
			h.standby("pb", "B", 2, 3, "A")
		}, porcupine.Illegal},
		{"standby on a key held from an earlier epoch", func(h *hist) {
			// A server restarted on a copy of its storage: the copy may
			// hold the key for a term of an earlier epoch.
			h.standby("pb", "B", 2, 3, "A")
			h.standby("pc", "C", 4, 5, "A")
			h.acquire("pb", "B", 6, 7, 9)
			for i := range h.Ops {
				h.Ops[i].Epoch = 1
			}
		}, porcupine.Ok},
		{"standby names two owners at once in a new epoch", func(h *hist) {
			h.standby("pb", "B", 2, 3, "A")
			h.standby("pc", "C", 4, 5, "D")
			for i := range h.Ops {
				h.Ops[i].Epoch = 1
			}
		}, porcupine.Illegal},
		{"standby names the wrong owner", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.standby("pb", "B", 2, 3, "C")
		}, porcupine.Illegal},
		{"renew at a stale revision succeeds", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.renew("pa", "A", 10, 11, 5, 5, 6, record.ResultOK)
			h.renew("pa", "A", 20, 21, 5, 5, 7, record.ResultOK)
		}, porcupine.Illegal},
		{"renew of a held lease reported lost", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.renew("pa", "A", 10, 11, 5, 5, 0, record.ResultLost)
		}, porcupine.Illegal},
		{"renew lost after expiry", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.renew("pa", "A", 1000, 1001, 5, 5, 0, record.ResultLost)
		}, porcupine.Ok},
		{"takeover only after expiry", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.acquire("pb", "B", 999, 1000, 7)
		}, porcupine.Ok},
		{"takeover before expiry", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.acquire("pb", "B", 990, 998, 7)
		}, porcupine.Illegal},
		{"a renewal of unknown outcome may have landed", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.renew("pa", "A", 500, 2000, 5, 5, 0, record.ResultUnknown)
			h.standby("pb", "B", 1200, 1201, "A")
		}, porcupine.Ok},
		{"concurrent acquires, one winner", func(h *hist) {
			h.acquire("pa", "A", 0, 10, 5)
			h.standby("pb", "B", 0, 10, "A")
			h.standby("pc", "C", 1, 9, "A")
		}, porcupine.Ok},
		{"concurrent acquires, two winners", func(h *hist) {
			h.acquire("pa", "A", 0, 10, 5)
			h.acquire("pb", "B", 0, 10, 6)
		}, porcupine.Illegal},
		{"garbage blocks acquisition", func(h *hist) {
			h.tamper(record.OpGarbage, 0, 1)
			h.acquire("pa", "A", 2000, 2001, 5)
		}, porcupine.Illegal},
		{"garbage is reported corrupt", func(h *hist) {
			h.tamper(record.OpGarbage, 0, 1)
			h.Ops = append(h.Ops, record.Op{Proc: "pa", Lease: lease, Owner: "A", Type: record.OpAcquire, TTL: ttl,
				Call: 2 * ms, Return: 3 * ms, Result: record.ResultCorrupt})
			h.tamper(record.OpDelete, 4, 5)
			h.acquire("pa", "A", 6, 7, 9)
		}, porcupine.Ok},
		{"after an operator's delete, contenders may wait", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.tamper(record.OpDelete, 2, 3)
			h.standby("pb", "B", 4, 5, "")
			h.acquire("pb", "B", 1000, 1001, 7)
			h.standby("pc", "C", 1002, 1003, "B")
		}, porcupine.Ok},
		{"a released key is free for everyone", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.release("pa", "A", 2, 3, 5, 5, record.ResultOK)
			h.standby("pb", "B", 4, 5, "")
		}, porcupine.Illegal},
		{"a stream purge takes no revision", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.tamper(record.OpStreamPurge, 2, 3)
			h.standby("pb", "B", 4, 5, "")
			h.renew("pa", "A", 6, 7, 5, 5, 0, record.ResultLost)
			h.acquire("pb", "B", 1000, 1001, 6)
		}, porcupine.Ok},
		{"a re-created bucket starts above the old one", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.tamper(record.OpBucketGone, 2, 3)
			h.acquire("pb", "B", 4, 5, 3)
		}, porcupine.Illegal},
		{"a re-created bucket is empty", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.tamper(record.OpBucketGone, 2, 3)
			h.acquire("pb", "B", 4, 5, 9000)
		}, porcupine.Ok},
		{"a bucket MaxAge may remove a held key", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.tamper(record.OpMaxAge, 2, 3)
			h.renew("pa", "A", 100, 101, 5, 5, 0, record.ResultLost)
		}, porcupine.Ok},
		{"without a MaxAge a held key stays", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.renew("pa", "A", 100, 101, 5, 5, 0, record.ResultLost)
		}, porcupine.Illegal},
		{"release then reacquire by another", func(h *hist) {
			h.acquire("pa", "A", 0, 1, 5)
			h.release("pa", "A", 2, 3, 5, 5, record.ResultOK)
			h.acquire("pb", "B", 4, 5, 7)
		}, porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hist{}
			tc.ops(h)
			res, _ := check.Linearizable(h.Ops, 10*time.Second)
			assert.Equal(t, tc.want, res)
		})
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 50*time.Millisecond, check.Percentile(ds, 0.5))
	assert.Equal(t, 99*time.Millisecond, check.Percentile(ds, 0.99))
	assert.Equal(t, 100*time.Millisecond, check.Percentile(ds, 1))
	assert.Equal(t, time.Millisecond, check.Percentile(ds, 0))
	assert.Zero(t, check.Percentile(nil, 0.5))
	s := check.Summarize(ds[:1])
	assert.Equal(t, check.Summary{N: 1, P50: time.Millisecond, P99: time.Millisecond, Max: time.Millisecond}, s)
}
