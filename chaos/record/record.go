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
	// Operator tampering: unconditional, made with a plain KV client.
	OpDelete  OpType = "delete"  // the key deleted by hand
	OpPurge   OpType = "purge"   // the bucket's key purged
	OpGarbage OpType = "garbage" // a value this library did not write
)

// Tamper reports whether t is an operator's tampering.
func (t OpType) Tamper() bool { return t == OpDelete || t == OpPurge || t == OpGarbage }

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
	Proc   string        `json:"proc"` // the process (or in-process candidate) that made it
	Lease  string        `json:"lease"`
	Owner  string        `json:"owner,omitempty"`
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
	// ValidUntil is the validity the caller now believes it has, after an
	// acquire or renew that succeeded: Call + TTL - SafetyMargin
	// (lease.Config.ValidUntil of the send time), on the reference clock.
	ValidUntil int64  `json:"valid_until,omitempty"`
	Err        string `json:"err,omitempty"`
	// Session is the lease ID of the session an acquire took the lease
	// under (lease.SessionStore.AcquireUnder); "" for a lease with a TTL
	// of its own. Such a lease is valid while its session is: its
	// ValidUntil is the session's at the acquire, and the session's later
	// renewals (ops on the Session lease) extend it.
	Session string `json:"session,omitempty"`
}

// Workload is the life of one holder's workload under one token.
type Workload struct {
	Proc  string `json:"proc"`
	Lease string `json:"lease"`
	Owner string `json:"owner"`
	Token uint64 `json:"token"`
	Start int64  `json:"start"`
	Stop  int64  `json:"stop"` // Never while running or when the process died
}

// Write is one write offered to the fenced resource, accepted or not.
type Write struct {
	Seq      uint64 `json:"seq"` // order in which the resource decided
	Lease    string `json:"lease"`
	Proc     string `json:"proc"`
	Owner    string `json:"owner"`
	Token    uint64 `json:"token"`
	Sent     int64  `json:"sent"` // holder's reading before sending
	At       int64  `json:"at"`   // the resource's reading when it decided
	Accepted bool   `json:"accepted"`
	Highest  uint64 `json:"highest"` // the highest accepted token before this write
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
}

// Append adds every record of o to h.
func (h *History) Append(o History) {
	h.Ops = append(h.Ops, o.Ops...)
	h.Workloads = append(h.Workloads, o.Workloads...)
	h.Writes = append(h.Writes, o.Writes...)
	h.Marks = append(h.Marks, o.Marks...)
}
