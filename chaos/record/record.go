// Package record holds what the chaos suite writes down while it runs: the
// reference clock, the records of store operations, workloads, fenced writes
// and injected faults, and the append-only files holders write them to.
//
// Every time in a record is a reading of the reference clock: CLOCK_MONOTONIC
// of this machine, in nanoseconds. Holders and the test process run on the
// same machine, so their readings compare directly, which is what lets the
// checker put the intervals of different processes on one line.
package record

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now reads the reference clock: CLOCK_MONOTONIC in nanoseconds. Unlike
// time.Now's monotonic reading, it is the same clock in every process.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("record: CLOCK_MONOTONIC unreadable: " + err.Error()) // never on Linux
	}
	return ts.Nano()
}

// Never is the time of a return that never happened (the process died with
// the call in flight) and of an interval that never ended.
const Never int64 = 1<<63 - 1

// OpType names a lease-store operation.
type OpType string

// Store operations made by holders, and operator tampering made by the test.
const (
	OpAcquire OpType = "acquire"
	OpRenew   OpType = "renew"
	OpRelease OpType = "release"
	// Operator tampering: unconditional, made with a plain KV client or the
	// JetStream API.
	OpDelete      OpType = "delete"       // the key deleted by hand
	OpPurge       OpType = "purge"        // the bucket's key purged
	OpGarbage     OpType = "garbage"      // a value this library did not write
	OpStreamPurge OpType = "stream-purge" // the key's subject purged from the stream: no marker
	OpBucketGone  OpType = "bucket-gone"  // the bucket deleted (and maybe created again)
	OpMaxAge      OpType = "max-age"      // the bucket edited to expire every message after an age
)

// Tamper reports whether t is an operator's tampering.
func (t OpType) Tamper() bool {
	switch t {
	case OpDelete, OpPurge, OpGarbage, OpStreamPurge, OpBucketGone, OpMaxAge:
		return true
	}
	return false
}

// Result is how an operation ended.
type Result string

// Results. Everything but ResultUnknown is definite: the store says what it
// did. ResultUnknown covers timeouts, lost connections and calls that never
// returned: the write may or may not have been applied.
const (
	ResultOK      Result = "ok"      // acquired, renewed, released, tampered
	ResultStandby Result = "standby" // acquire: held by another owner (Op.OutOwner)
	ResultLost    Result = "lost"    // renew/release: lease.ErrLost, nothing changed
	ResultCorrupt Result = "corrupt" // lease.ErrCorrupt, nothing changed
	ResultInvalid Result = "invalid" // lease.ErrInvalid, nothing changed
	ResultUnknown Result = "unknown"
)

// Op is one lease-store operation with its call and return times.
type Op struct {
	Proc  string `json:"proc"` // the process (or in-process candidate) that made it
	Lease string `json:"lease"`
	Owner string `json:"owner,omitempty"`
	// Term is the tenure's identity (lease.Claim.Term): the claim's for an
	// acquire, the held lease's for a renew or release. Two terms are two
	// holders, whatever their Owner.
	Term   string        `json:"term,omitempty"`
	Type   OpType        `json:"type"`
	TTL    time.Duration `json:"ttl,omitempty"`
	Token  uint64        `json:"token,omitempty"` // renew/release: the held lease's token
	Rev    uint64        `json:"rev,omitempty"`   // renew/release: the held lease's revision
	Call   int64         `json:"call"`
	Return int64         `json:"return"` // Never when the call did not return

	Result   Result `json:"result"`
	OutToken uint64 `json:"out_token,omitempty"` // acquire ok
	OutRev   uint64 `json:"out_rev,omitempty"`   // acquire/renew ok
	OutOwner string `json:"out_owner,omitempty"` // acquire standby
	OutTerm  string `json:"out_term,omitempty"`  // acquire standby: the holder's term
	// ValidUntil is the validity the caller now believes it has, after an
	// acquire or renew that succeeded: Call + TTL - SafetyMargin
	// (lease.Config.ValidUntil of the send time), on the reference clock.
	ValidUntil int64  `json:"valid_until,omitempty"`
	Err        string `json:"err,omitempty"`
	// Epoch numbers the store's lives: it grows when the scenario made the
	// server lose acknowledged writes (a rollback), after which the store
	// may issue revisions again. Set by the scenario, not by holders.
	Epoch int `json:"epoch,omitempty"`
	// Session is the lease ID of the session an acquire took the lease
	// under (lease.SessionStore.AcquireUnder); "" for a lease with a TTL
	// of its own. Such a lease is valid while its session is: its
	// ValidUntil is the session's at the acquire, and the session's later
	// renewals (ops on the Session lease) extend it.
	Session string `json:"session,omitempty"`
	// SessionTerm is the term of the session (lease.Lease.Term) an acquire
	// took the lease under: the lease is held while that term holds the
	// Session lease.
	SessionTerm string `json:"session_term,omitempty"`
}

// ID returns who made op: its term, or its owner for records without one.
func (op Op) ID() string { return identity(op.Term, op.Owner) }

// HolderID returns the holder an acquire reported standing by for: its
// term, or its owner for records without one; "" for none.
func (op Op) HolderID() string { return identity(op.OutTerm, op.OutOwner) }

func identity(term, owner string) string {
	if term != "" {
		return term
	}
	return owner
}

// Workload is the life of one holder's workload under one token.
type Workload struct {
	Proc  string `json:"proc"`
	Lease string `json:"lease"`
	Owner string `json:"owner"`
	Term  string `json:"term,omitempty"`
	// Sup names the candidate (one LeaseSupervisor or Locker) that ran it,
	// unique in the scenario: no candidate may run two terms at once.
	Sup   string `json:"sup,omitempty"`
	Token uint64 `json:"token"`
	Start int64  `json:"start"`
	Stop  int64  `json:"stop"` // Never while running or when the process died
	// Stubborn marks a workload built to ignore its cancellation for a
	// while: it may outlive its validity, which the lease cannot prevent.
	Stubborn bool `json:"stubborn,omitempty"`
}

// ID returns the workload's tenure identity: its term, or its owner.
func (w Workload) ID() string { return identity(w.Term, w.Owner) }

// Write is one write offered to the fenced resource, accepted or not.
type Write struct {
	Seq   uint64 `json:"seq"` // order in which the resource decided
	Lease string `json:"lease"`
	Proc  string `json:"proc"`
	Owner string `json:"owner"`
	Term  string `json:"term,omitempty"`
	Token uint64 `json:"token"`
	// Request is the ID of the singleton request the write applies, if any.
	Request  string `json:"request,omitempty"`
	Sent     int64  `json:"sent"` // holder's reading before sending
	At       int64  `json:"at"`   // the resource's reading when it decided
	Accepted bool   `json:"accepted"`
	// Duplicate marks an accepted write whose request the resource had
	// already applied: it records request IDs with their effect, in one
	// transaction, and applied nothing again.
	Duplicate bool   `json:"duplicate,omitempty"`
	Highest   uint64 `json:"highest"` // the highest accepted token before this write
}

// ID returns the write's tenure identity: its term, or its owner.
func (w Write) ID() string { return identity(w.Term, w.Owner) }

// IDOp is one call of a singleton's request-ID store (singleton.IDStore)
// by a leader's handler, for the check that a de-duplicated handler applies
// each request once.
type IDOp struct {
	Proc    string `json:"proc"`
	Request string `json:"request"`
	Type    string `json:"type"` // "get" or "put"
	Call    int64  `json:"call"`
	Return  int64  `json:"return"` // Never when the call did not return
	Found   bool   `json:"found,omitempty"`
	Err     string `json:"err,omitempty"`
}

// Request is one singleton request as its caller saw it (package
// singleton's Client.Request).
type Request struct {
	Caller   string `json:"caller"`
	ID       string `json:"id,omitempty"` // the request ID, known once answered
	Sent     int64  `json:"sent"`
	Deadline int64  `json:"deadline"`
	Done     int64  `json:"done"` // Never when the call did not return
	OK       bool   `json:"ok"`
	// NoLeader reports an error matching singleton.ErrNoLeader: no leader
	// answered before the caller's deadline.
	NoLeader bool   `json:"no_leader,omitempty"`
	Err      string `json:"err,omitempty"`
	Token    uint64 `json:"token,omitempty"` // the tenure that answered
	Term     string `json:"term,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
}

// MarkKind names a fault or event the harness injected.
type MarkKind string

// Marks.
const (
	MarkKill        MarkKind = "kill"         // SIGKILL of a holder
	MarkStop        MarkKind = "stop"         // SIGSTOP of a holder
	MarkCont        MarkKind = "cont"         // SIGCONT of a holder
	MarkServerKill  MarkKind = "server-kill"  // SIGKILL of nats-server
	MarkServerStart MarkKind = "server-start" // nats-server (re)started
	MarkNetFault    MarkKind = "net-fault"    // a proxy fault begins
	MarkNetHeal     MarkKind = "net-heal"     // a proxy fault ends
	MarkTamper      MarkKind = "tamper"       // an operator changed the key
	MarkClock       MarkKind = "clock"        // a client clock's rate changed
	MarkResign      MarkKind = "resign"       // a holder asked to step down (LeaseSupervisor.Resign)
	MarkRestart     MarkKind = "restart"      // a holder's supervisor restarted by its parent
	MarkBucket      MarkKind = "bucket"       // the bucket deleted, created or edited
	MarkRollback    MarkKind = "rollback"     // the server restarted on an older copy of its store
	MarkNodeKill    MarkKind = "node-kill"    // SIGKILL of one node of a cluster
	MarkNodeStop    MarkKind = "node-stop"    // SIGTERM of one node of a cluster
	MarkNodeStart   MarkKind = "node-start"   // a node of a cluster (re)started
	MarkPartition   MarkKind = "partition"    // a node cut off from the other nodes
	MarkPartHeal    MarkKind = "part-heal"    // the partition healed
)

// Mark is one injected fault, at one reference time. Proc is the target
// ("" for the server or the whole system).
type Mark struct {
	Kind   MarkKind `json:"kind"`
	Proc   string   `json:"proc,omitempty"`
	Lease  string   `json:"lease,omitempty"`
	At     int64    `json:"at"`
	Detail string   `json:"detail,omitempty"`
}

// History is everything recorded in one run of one scenario.
type History struct {
	Ops       []Op
	Workloads []Workload
	Writes    []Write
	Marks     []Mark
	IDOps     []IDOp
}

// Append adds every record of o to h.
func (h *History) Append(o History) {
	h.Ops = append(h.Ops, o.Ops...)
	h.Workloads = append(h.Workloads, o.Workloads...)
	h.Writes = append(h.Writes, o.Writes...)
	h.Marks = append(h.Marks, o.Marks...)
	h.IDOps = append(h.IDOps, o.IDOps...)
}
