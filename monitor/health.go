package monitor

import (
	"fmt"
	"time"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/shard"
	"github.com/asterforge/aster/supervision"
)

// Check names a health check.
type Check string

// The health checks.
const (
	// CheckLive fails when the process is wedged in a way only a restart
	// fixes.
	CheckLive Check = "live"
	// CheckReady fails when the process cannot do its part: a supervisor
	// that is not a running candidate, a tree that does not run.
	CheckReady Check = "ready"
)

// Problem is one reason a health check fails.
type Problem struct {
	Check Check `json:"check"`
	// Subject is what it is about: "lease <id>", "tree <name>", "fleet
	// <prefix>", "fleet <prefix> shard <name>" or "store <name>".
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}

func (p Problem) String() string { return fmt.Sprintf("%s: %s", p.Subject, p.Reason) }

// assess returns the problems of rep.
func assess(rep Report, grace time.Duration) []Problem {
	var out []Problem
	add := func(c Check, subject, format string, args ...any) {
		out = append(out, Problem{Check: c, Subject: subject, Reason: fmt.Sprintf(format, args...)})
	}
	// wedged adds what makes a supervisor's process not live.
	wedged := func(subject string, st actors.Status) {
		if st.State == actors.StateLeading && !st.ValidUntil.IsZero() && rep.Time.After(st.ValidUntil.Add(grace)) {
			add(CheckLive, subject, "leads with token %d, but its renewal is overdue: its validity ended %v ago "+
				"(last renewed %v ago)", st.Token, rep.Time.Sub(st.ValidUntil).Round(time.Millisecond),
				rep.Time.Sub(st.RenewedAt).Round(time.Millisecond))
		}
		if st.Stuck > 0 {
			add(CheckLive, subject, "workloads of earlier terms did not stop (%d); no term starts until they do "+
				"(last error: %s)", st.Stuck, orNone(st.LastError))
		}
	}
	for _, l := range rep.Leases {
		st := l.Status
		subject := "lease " + st.LeaseID
		wedged(subject, st)
		switch st.State {
		case actors.StateStarting:
			add(CheckReady, subject, "not started")
		case actors.StateEscalated:
			add(CheckReady, subject, "escalated: gave up after %d restarts (last error: %s)", st.Restarts, orNone(st.LastError))
		case actors.StateStopped:
			add(CheckReady, subject, "stopped")
		}
		// A workload tree's failure ends its term, and the supervisor's
		// restart policy answers it: the supervisor's state says the rest.
	}
	// A fleet's member: its shards' supervisors are wedged as any; one that
	// gave up is quarantined by the Host, and an unbalanced fleet is
	// moving, neither of which a restart fixes.
	for _, f := range rep.Fleets {
		subject := "fleet " + f.Prefix
		switch f.State {
		case shard.StateStarting:
			add(CheckReady, subject, "starting: it has not read the fleet's leases yet")
		case shard.StateStopped:
			add(CheckReady, subject, "stopped: its Run has returned (last error: %s)", orNone(f.LastError))
		}
		for _, s := range f.Shards {
			if s.Local != nil {
				wedged(subject+" shard "+s.Name, *s.Local)
			}
		}
	}
	// A store that stopped for good fails every lease on it until the
	// process opens it again: only a restart does, and the supervisors and
	// Hosts on it end their Run (actors.ErrStoreStopped). Let it crash: the
	// process supervisor, or Kubernetes, restarts it, and keeps doing so
	// with its backoff until the bucket or the server is fixed.
	for _, st := range rep.Stores {
		if st.Error != "" {
			add(CheckLive, "store "+st.Name, "stopped for good, a restart is needed: %s", st.Error)
		}
	}
	for _, t := range rep.Trees {
		s := t.Snapshot
		switch s.State {
		case supervision.StateRunning:
		case supervision.StateFailed:
			failure := "none recorded"
			if s.LastFailure != nil {
				failure = s.LastFailure.Error()
			}
			add(CheckLive, "tree "+t.Name, "failed: %s", failure)
		default:
			add(CheckReady, "tree "+t.Name, "%s, not running", s.State)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
