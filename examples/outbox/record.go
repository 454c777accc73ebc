//go:build unix

package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/lease"
)

// Instance states, as the orchestrator knows them.
const (
	stateStarting = "starting"
	stateStandby  = "standby"
	stateLeading  = "leading"
	statePaused   = "paused"
	stateKilled   = "killed"
	stateStopping = "stopping"
	stateExited   = "exited"
)

// Actions the script takes on instances.
const (
	actStart  = "start"
	actKill   = "SIGKILL"
	actPause  = "SIGSTOP"
	actResume = "SIGCONT"
	actStop   = "SIGTERM"
)

// recorder keeps everything the demo observes: the instances' reports, every
// write offered to the fence and its verdict, what the orchestrator's own
// watch of the lease key saw, and the script's actions. It is safe for
// concurrent use. Its methods never log while holding its lock; they return
// what to log instead, because the status line reads the recorder while the
// console is locked.
type recorder struct {
	start time.Time

	demo.Board
	fence   lease.Fence
	insts   map[string]*instState
	names   []string          // in start order
	byOwner map[string]string // owner ID -> instance name
	terms   map[uint64]*term  // by token
	writes  []writeRec
	watch   []watchRec
	actions []action
	outbox  int // messages dispatched so far
	dropped int // reports that could not be decoded
}

type instState struct {
	name, owner string
	pid         int
	state       string
	token       uint64 // while leading
	since       time.Time
}

// term is one leadership term: one acquisition, named by its token.
type term struct {
	token      uint64
	inst       string
	owner      string
	acquired   time.Time // when the instance reported the acquisition
	handover   bool      // another owner was seen before it
	validUntil time.Time // the latest validity the instance reported
	firstWrite time.Time // send time of its first accepted write
	firstAt    time.Time // when the fence accepted it
	accepted   int
	stopped    time.Time // when its workload stopped (the dispatcher's report)
	released   time.Time // when its holder reported the release
	ended      time.Time // when the term ended, if it did
	endHow     string
}

type writeRec struct {
	req      writeReq
	at       time.Time // when the fence decided
	accepted bool
	highest  uint64 // the fence's highest token before this write
	message  string
}

type watchRec struct {
	at time.Time
	ev lease.Event
}

type action struct {
	at    time.Time
	kind  string
	inst  string
	token uint64 // the instance's token then, if it was leading
}

func newRecorder() *recorder {
	return &recorder{
		start:   time.Now(),
		insts:   map[string]*instState{},
		byOwner: map[string]string{},
		terms:   map[uint64]*term{},
	}
}

// started records an instance process just started.
func (r *recorder) started(name string, pid int) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	r.insts[name] = &instState{name: name, pid: pid, state: stateStarting, since: time.Now()}
	r.names = append(r.names, name)
	r.actions = append(r.actions, action{at: time.Now(), kind: actStart, inst: name})
	r.Touch()
}

// act records a signal the script sent to an instance, with the token it
// held then.
func (r *recorder) act(kind, name string) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	a := action{at: time.Now(), kind: kind, inst: name}
	if in := r.insts[name]; in != nil {
		a.token = in.token
		switch kind {
		case actKill:
			in.state = stateKilled
			if t := r.terms[in.token]; t != nil && t.ended.IsZero() {
				t.ended, t.endHow = a.at, "killed"
			}
			in.token = 0
		case actPause:
			in.state = statePaused
		case actResume:
			in.state = stateStandby // until it reports otherwise
			if in.token != 0 {
				in.state = stateLeading
			}
		case actStop:
			in.state = stateStopping
		}
		in.since = a.at
	}
	r.actions = append(r.actions, a)
	r.Touch()
}

// exited records that an instance process has exited.
func (r *recorder) exited(name string) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	if in := r.insts[name]; in != nil && in.state != stateKilled {
		in.state, in.since = stateExited, time.Now()
	}
	r.Touch()
}

// report records what an instance said, and returns a line worth logging,
// if any.
func (r *recorder) report(rep report) (line string, attrs []any) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	defer r.Touch()
	in := r.insts[rep.Inst]
	if in == nil {
		r.dropped++
		return "", nil
	}
	at := unixNano(rep.At)
	t := r.terms[rep.Token]
	switch rep.Kind {
	case reportHello:
		in.owner, in.pid = rep.Owner, rep.PID
		r.byOwner[rep.Owner] = rep.Inst
		if in.state == stateStarting {
			in.state, in.since = stateStandby, at
		}
	case reportAcquired:
		t = r.termFor(rep.Token, rep.Inst, rep.Owner)
		t.acquired, t.validUntil, t.handover = at, unixNano(rep.ValidUntil), rep.Detail == "handover"
		if in.state != stateStopping && in.state != statePaused {
			in.state = stateLeading
		}
		in.token, in.since = rep.Token, at
		return "leader elected", []any{"inst", rep.Inst, "token", rep.Token,
			"after", r.sinceLastEnd(at)}
	case reportWorkStopped:
		if t != nil && t.stopped.IsZero() {
			t.stopped = at
		}
	case reportRenewed:
		if t != nil && unixNano(rep.ValidUntil).After(t.validUntil) {
			t.validUntil = unixNano(rep.ValidUntil)
		}
	case reportPoisoned, reportReleased, reportNotReleased, reportStopTimeout, reportExited:
		if t != nil && rep.Kind == reportReleased {
			t.released = at
		}
		if t != nil && t.ended.IsZero() && rep.Kind != reportStopTimeout {
			t.ended, t.endHow = at, rep.Kind
			if rep.Detail != "" {
				t.endHow += " (" + rep.Detail + ")"
			}
		}
		if in.token == rep.Token {
			in.token = 0
			if in.state == stateLeading {
				in.state, in.since = stateStandby, at
			}
		}
	}
	return "", nil
}

// begin is when t started acting: its acquisition, or its first write if
// that was sent earlier (or the acquisition was not reported).
func (t *term) begin() time.Time {
	if t.acquired.IsZero() || (!t.firstWrite.IsZero() && t.firstWrite.Before(t.acquired)) {
		return t.firstWrite
	}
	return t.acquired
}

// termFor returns the term of token, creating it. r.mu must be held.
func (r *recorder) termFor(token uint64, inst, owner string) *term {
	t := r.terms[token]
	if t == nil {
		t = &term{token: token, inst: inst, owner: owner}
		r.terms[token] = t
	}
	return t
}

// sinceLastEnd describes how long the lease was without a leader before at.
// r.mu must be held.
func (r *recorder) sinceLastEnd(at time.Time) string {
	var last time.Time
	for _, a := range r.actions {
		if a.token != 0 && a.at.Before(at) && a.at.After(last) {
			last = a.at
		}
	}
	if last.IsZero() {
		return fmt.Sprintf("%v since the demo started", round(at.Sub(r.start)))
	}
	return fmt.Sprintf("%v since the previous leader was signalled", round(at.Sub(last)))
}

// write offers w to the fenced outbox and records the verdict.
func (r *recorder) write(w writeReq) (writeResp, []any) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	defer r.Touch()
	rec := writeRec{req: w, highest: uint64(r.fence.Stats().Highest.Token)}
	err := r.fence.Do(lease.Tenure{Token: lease.Token(w.Token), Term: w.Term}, func() error {
		r.outbox++
		rec.message = fmt.Sprintf("order-%d", r.outbox)
		return nil
	})
	rec.at, rec.accepted = time.Now(), err == nil
	r.writes = append(r.writes, rec)
	if rec.accepted {
		// The first write of a term can arrive before the report of its
		// acquisition: they travel separately.
		t := r.termFor(w.Token, w.Inst, w.Owner)
		if t.accepted == 0 {
			t.firstWrite, t.firstAt = unixNano(w.SentAt), rec.at
		}
		t.accepted++
		return writeResp{Accepted: true, Message: rec.message, Highest: rec.highest}, nil
	}
	return writeResp{Highest: rec.highest}, []any{"inst", w.Inst, "token", w.Token, "highest", rec.highest,
		"late", w.Late, "err", err}
}

// observed records what the orchestrator's watch of the lease key saw.
func (r *recorder) observed(ev lease.Event) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	r.watch = append(r.watch, watchRec{at: time.Now(), ev: ev})
	r.Touch()
}

// leader returns the instance that leads and its token, if any.
func (r *recorder) leader() (name string, token uint64) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	return r.leaderLocked()
}

func (r *recorder) leaderLocked() (string, uint64) {
	for _, n := range r.names {
		if in := r.insts[n]; in.state == stateLeading {
			return n, in.token
		}
	}
	return "", 0
}

// leaderWrote reports whether an instance other than except leads and has
// had a write accepted. r.mu must be held.
func (r *recorder) leaderWroteLocked(except string) bool {
	n, tok := r.leaderLocked()
	if n == "" || n == except {
		return false
	}
	t := r.terms[tok]
	return t != nil && t.accepted > 0
}

// status is the live status line.
func (r *recorder) status() string {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	leader := "no leader"
	if n, tok := r.leaderLocked(); n != "" {
		leader = fmt.Sprintf("leader %s token %d for %v", n, tok, round(time.Since(r.insts[n].since)).Truncate(100*time.Millisecond))
	}
	var others []string
	for _, n := range r.names {
		if in := r.insts[n]; in.state != stateLeading {
			others = append(others, n+" "+in.state)
		}
	}
	acc, rej := 0, 0
	for _, w := range r.writes {
		if w.accepted {
			acc++
		} else {
			rej++
		}
	}
	handovers := max(len(r.terms)-1, 0)
	return fmt.Sprintf("%5.1fs │ %s │ %s │ handovers %d │ fence: %d accepted, %d rejected",
		time.Since(r.start).Seconds(), leader, joinOr(others, ", ", "no standby"), handovers, acc, rej)
}

// terms returns the terms in token order.
func (r *recorder) sortedTerms() []*term {
	ts := make([]*term, 0, len(r.terms))
	for _, t := range r.terms {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b *term) int { return compare(a.token, b.token) })
	return ts
}

func compare(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func joinOr(s []string, sep, none string) string {
	if len(s) == 0 {
		return none
	}
	out := s[0]
	for _, x := range s[1:] {
		out += sep + x
	}
	return out
}

// round shortens a duration for people.
func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}
