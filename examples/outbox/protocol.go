//go:build unix

package main

import "time"

// The instances talk to the orchestrator over HTTP on 127.0.0.1: they report
// what happens to them (hello, lease events) and they write to the fenced
// outbox. Every time is a reading of this host's wall clock, in Unix
// nanoseconds: all the processes of the demo run on one machine and read the
// same clock, so their times can be compared.

// Report kinds sent by instances.
const (
	reportHello       = "hello"        // the instance is connected and about to stand by
	reportAcquired    = "acquired"     // actors.Acquired
	reportStandby     = "standby"      // actors.Standby
	reportRenewed     = "renewed"      // actors.Renewed
	reportRenewFailed = "renew-failed" // actors.RenewalFailed
	reportPoisoned    = "poisoned"     // actors.Poisoned
	reportReleased    = "released"     // actors.Released
	reportNotReleased = "not-released" // actors.NotReleased
	reportStopTimeout = "stop-timeout" // actors.WorkloadStopTimeout
	reportExited      = "exited"       // actors.WorkloadExited
	reportRestarting  = "restarting"   // actors.Restarting
	reportEscalated   = "escalated"    // actors.GaveUp
	reportBye         = "bye"          // the instance is exiting
)

// report is one thing an instance tells the orchestrator.
type report struct {
	Inst       string `json:"inst"`
	Owner      string `json:"owner"`
	PID        int    `json:"pid,omitempty"`
	Kind       string `json:"kind"`
	Token      uint64 `json:"token,omitempty"`
	At         int64  `json:"at"`
	ValidUntil int64  `json:"valid_until,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// writeReq is one write offered to the fenced outbox: "mark the next
// message dispatched", carrying the writer's fencing token.
type writeReq struct {
	Inst   string `json:"inst"`
	Owner  string `json:"owner"`
	Token  uint64 `json:"token"`
	Term   string `json:"term"`    // the lease term the token belongs to
	Seq    uint64 `json:"seq"`     // the instance's own count of writes
	SentAt int64  `json:"sent_at"` // when the instance sent it
	// Late marks a write replayed after the lease was lost: the write that
	// was in flight when the process froze, arriving after it thawed.
	Late bool `json:"late,omitempty"`
}

// writeResp is the fence's answer.
type writeResp struct {
	Accepted bool   `json:"accepted"`
	Message  string `json:"message,omitempty"` // the outbox message dispatched
	Highest  uint64 `json:"highest"`           // the highest token the fence had accepted before
}

func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
