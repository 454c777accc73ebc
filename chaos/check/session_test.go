package check_test

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/chaos/check"
	"github.com/asterforge/aster/chaos/record"
)

// Locks held under sessions (lock.Config.Session): each holder's Locker
// holds a session lease of its own, "session.<term>", and takes the lock's
// key under it (an acquire naming the session, with no TTL of its own).

// sessionOf names the session lease of holder "owner/term".
func sessionOf(holder string) string {
	_, term := who(holder)
	return "session." + term
}

// openSession records holder's acquire of its session lease.
func (h *hist) openSession(proc, holder string, call, ret int64, token uint64) {
	owner, term := who(holder)
	h.Ops = append(h.Ops, record.Op{Proc: proc, Lease: sessionOf(holder), Owner: owner, Term: term,
		Type: record.OpAcquire, TTL: ttl, Call: call * ms, Return: ret * ms, Result: record.ResultOK, OutToken: token,
		OutRev: token, ValidUntil: call*ms + int64(ttl) - margin})
}

// renewSession records a renewal of holder's session that succeeded.
func (h *hist) renewSession(proc, holder string, call, ret int64, token, rev, out uint64) {
	owner, term := who(holder)
	h.Ops = append(h.Ops, record.Op{Proc: proc, Lease: sessionOf(holder), Owner: owner, Term: term,
		Type: record.OpRenew, TTL: ttl, Token: token, Rev: rev, Call: call * ms, Return: ret * ms,
		Result: record.ResultOK, OutRev: out, ValidUntil: call*ms + int64(ttl) - margin})
}

// closeSession records a release of holder's session that succeeded.
func (h *hist) closeSession(proc, holder string, call, ret int64, token, rev uint64) {
	owner, term := who(holder)
	h.Ops = append(h.Ops, record.Op{Proc: proc, Lease: sessionOf(holder), Owner: owner, Term: term,
		Type: record.OpRelease, TTL: ttl, Token: token, Rev: rev, Call: call * ms, Return: ret * ms,
		Result: record.ResultOK})
}

// lockUnder records lock term holder (owner/term) acquiring the lock under
// session's session, with the session's last claimed validity.
func (h *hist) lockUnder(proc, holder, session string, call, ret int64, token uint64) {
	owner, term := who(holder)
	_, sterm := who(session)
	var valid int64
	for _, op := range h.Ops {
		if op.Lease == sessionOf(session) && op.Result == record.ResultOK {
			valid = max(valid, op.ValidUntil)
		}
	}
	h.Ops = append(h.Ops, record.Op{Proc: proc, Lease: lease, Owner: owner, Term: term, Type: record.OpAcquire,
		TTL: ttl, Call: call * ms, Return: ret * ms, Result: record.ResultOK, OutToken: token, OutRev: token,
		ValidUntil: valid, Session: sessionOf(session), SessionTerm: sterm})
}

// standbyUnder records caller standing by, under session, for holder.
func (h *hist) standbyUnder(proc, caller, session string, call, ret int64, holder string) {
	h.standby(proc, caller, call, ret, holder)
	_, sterm := who(session)
	h.Ops[len(h.Ops)-1].Session, h.Ops[len(h.Ops)-1].SessionTerm = sessionOf(session), sterm
}

// A's session is renewed past the validity it had when A took the lock:
// the lock is A's for as long as the session is, and B taken the lock
// before the session can have expired is an overlap, and no store could
// have answered so.
func TestSessionRenewalsExtendTheLock(t *testing.T) {
	h := &hist{}
	h.openSession("pa", "A/s1", 0, 1, 3)
	h.lockUnder("pa", "A/l1", "A/s1", 10, 11, 5) // valid until 900
	h.work("pa", "A/l1", 5, 12, record.Never)
	h.write("pa", "A/l1", 5, 20, true)
	h.openSession("pb", "B/s2", 15, 16, 6)
	h.standbyUnder("pb", "B/l2", "B/s2", 17, 18, "A/l1")
	h.renewSession("pa", "A/s1", 250, 251, 3, 3, 7)
	h.renewSession("pa", "A/s1", 500, 501, 3, 7, 8)
	h.renewSession("pa", "A/s1", 750, 751, 3, 8, 9)
	h.renewSession("pb", "B/s2", 800, 801, 6, 6, 10)
	h.renewSession("pa", "A/s1", 1000, 1001, 3, 9, 11) // A's session valid until 1900
	h.write("pa", "A/l1", 5, 1050, true)
	h.mark(record.MarkKill, "pa", 1100)
	h.lockUnder("pb", "B/l2", "B/s2", 1200, 1201, 20)
	h.write("pb", "B/l2", 20, 1202, true)

	r := check.Check(h.History)
	assert.Equal(t, []string{check.Overlap}, kinds(r))
	byLease := map[string]check.Tenure{}
	for _, tn := range r.Tenures {
		byLease[tn.Lease+"/"+tn.Term] = tn
	}
	assert.Equal(t, 1000*ms+int64(ttl)-margin, byLease[lease+"/l1"].ValidUntil,
		"the session's renewals extend the lock's claim")

	res, _ := check.Linearizable(h.Ops, 10*time.Second)
	assert.Equal(t, porcupine.Illegal, res, "the lock is held while its session is: no store may hand it over")
}

// A's Locker closes: its session's release frees the lock at once, before
// A's release of the lock's key (which finds the key B's). B takes it in
// between: no overlap, a graceful handover, a consistent store.
func TestSessionReleaseEndsTheLock(t *testing.T) {
	h := &hist{}
	h.openSession("pa", "A/s1", 0, 1, 3)
	h.lockUnder("pa", "A/l1", "A/s1", 10, 11, 5)
	h.work("pa", "A/l1", 5, 12, 590)
	h.write("pa", "A/l1", 5, 20, true)
	h.openSession("pb", "B/s2", 15, 16, 6)
	h.standbyUnder("pb", "B/l2", "B/s2", 17, 18, "A/l1")
	h.renewSession("pa", "A/s1", 250, 251, 3, 3, 7)
	h.renewSession("pb", "B/s2", 260, 261, 6, 6, 8)
	h.renewSession("pa", "A/s1", 500, 501, 3, 7, 9)
	h.write("pa", "A/l1", 5, 580, true)
	h.closeSession("pa", "A/s1", 600, 601, 3, 9)
	h.lockUnder("pb", "B/l2", "B/s2", 601, 602, 11)
	h.work("pb", "B/l2", 11, 603, record.Never)
	h.release("pa", "A/l1", 602, 603, 5, 5, record.ResultLost)
	h.write("pb", "B/l2", 11, 604, true)
	h.write("pa", "A/l1", 5, 605, false)

	r := check.Check(h.History)
	assert.Empty(t, r.Violations)
	var lockTenures []check.Tenure
	for _, tn := range r.Tenures {
		if tn.Lease == lease {
			lockTenures = append(lockTenures, tn)
		}
	}
	require.Len(t, lockTenures, 2)
	assert.Equal(t, 600*ms, lockTenures[0].End(), "the session's release ends the lock's claim")
	require.Len(t, r.Handovers, 1, "sessions are never handed over: each is a key of its own")
	assert.Equal(t, "release", r.Handovers[0].Cause)
	assert.Equal(t, 3*time.Millisecond, r.Handovers[0].Latency, "from the session's release call")

	res, _ := check.Linearizable(h.Ops, 10*time.Second)
	assert.Equal(t, porcupine.Ok, res)
}

// A is killed; its session expires; B, standing by, takes the lock once
// the session can have expired, and not before.
func TestSessionExpiryFreesTheLock(t *testing.T) {
	build := func(takeover int64) *hist {
		h := &hist{}
		h.openSession("pa", "A/s1", 0, 1, 3)
		h.lockUnder("pa", "A/l1", "A/s1", 10, 11, 5)
		h.work("pa", "A/l1", 5, 12, record.Never)
		h.openSession("pb", "B/s2", 15, 16, 6)
		h.standbyUnder("pb", "B/l2", "B/s2", 17, 18, "A/l1")
		h.renewSession("pa", "A/s1", 250, 251, 3, 3, 7)
		h.renewSession("pa", "A/s1", 500, 501, 3, 7, 8) // A's session valid until 1400, expires at 1500
		h.mark(record.MarkKill, "pa", 700)
		h.renewSession("pb", "B/s2", 750, 751, 6, 6, 9)
		h.standbyUnder("pb", "B/l2", "B/s2", 1000, 1001, "A/l1")
		h.lockUnder("pb", "B/l2", "B/s2", takeover, takeover+1, 12)
		h.work("pb", "B/l2", 12, takeover+2, record.Never)
		return h
	}
	h := build(1500)
	r := check.Check(h.History)
	assert.Empty(t, r.Violations)
	require.Len(t, r.Handovers, 1)
	assert.Equal(t, string(record.MarkKill), r.Handovers[0].Cause)
	res, _ := check.Linearizable(h.Ops, 10*time.Second)
	assert.Equal(t, porcupine.Ok, res)

	h = build(1300)
	assert.Equal(t, []string{check.Overlap}, kinds(check.Check(h.History)))
	res, _ = check.Linearizable(h.Ops, 10*time.Second)
	assert.Equal(t, porcupine.Illegal, res, "taken while the session was certainly held")
}

// A standby must name the lock's holder while its session is held, and a
// session's renewal cannot succeed once a contender has seen it expire.
func TestSessionModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  func(h *hist)
		want porcupine.CheckResult
	}{
		{"a lock under a released session is free", func(h *hist) {
			h.openSession("pa", "A/s1", 0, 1, 3)
			h.lockUnder("pa", "A/l1", "A/s1", 2, 3, 5)
			h.closeSession("pa", "A/s1", 4, 5, 3, 3)
			h.openSession("pb", "B/s2", 6, 7, 7)
			h.standbyUnder("pb", "B/l2", "B/s2", 8, 9, "A/l1")
		}, porcupine.Illegal},
		{"a lock under a held session is held", func(h *hist) {
			h.openSession("pa", "A/s1", 0, 1, 3)
			h.lockUnder("pa", "A/l1", "A/s1", 2, 3, 5)
			h.openSession("pb", "B/s2", 6, 7, 7)
			h.lockUnder("pb", "B/l2", "B/s2", 8, 9, 8)
		}, porcupine.Illegal},
		{"a session seen expired stays expired", func(h *hist) {
			h.openSession("pa", "A/s1", 0, 1, 3)
			h.lockUnder("pa", "A/l1", "A/s1", 2, 3, 5)
			h.openSession("pb", "B/s2", 6, 7, 7)
			h.renewSession("pb", "B/s2", 900, 901, 7, 7, 9)
			h.lockUnder("pb", "B/l2", "B/s2", 1001, 1002, 10)
			h.renewSession("pa", "A/s1", 1003, 1004, 3, 3, 11)
		}, porcupine.Illegal},
		{"a lock's key released after its session ended", func(h *hist) {
			h.openSession("pa", "A/s1", 0, 1, 3)
			h.lockUnder("pa", "A/l1", "A/s1", 2, 3, 5)
			h.closeSession("pa", "A/s1", 4, 5, 3, 3)
			h.release("pa", "A/l1", 6, 7, 5, 5, record.ResultOK)
			h.openSession("pb", "B/s2", 8, 9, 9)
			h.lockUnder("pb", "B/l2", "B/s2", 10, 11, 10)
		}, porcupine.Ok},
		{"a lock of its own TTL taken over one under a session", func(h *hist) {
			h.openSession("pa", "A/s1", 0, 1, 3)
			h.lockUnder("pa", "A/l1", "A/s1", 2, 3, 5)
			h.closeSession("pa", "A/s1", 4, 5, 3, 3)
			h.acquire("pb", "B/l2", 6, 7, 9)
			h.standby("pc", "C/l3", 8, 9, "B/l2")
			h.acquire("pc", "C/l3", 1007, 1008, 11)
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
