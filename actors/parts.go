package actors

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/lease"
)

// The named parts of the supervisor actor's state (supervisor) and of a
// term's (term), each with the few methods that change it.

// incarnation is the supervisor actor's own identity.
type incarnation struct {
	actorRef        // its PID and system, set on Started
	registered bool // it is shared.actor: Status and Resign follow it
}

// oneTimer is the supervisor's single timer: the standby poll, the restart
// backoff, a stop budget.
type oneTimer struct {
	t    *time.Timer
	due  time.Time // when it fires; zero when disarmed
	fire func()    // what it does when it fires: send a supervisorTick
}

// arm (re)schedules it d from now (at once if d is negative).
func (t *oneTimer) arm(d time.Duration) {
	d = max(d, 0)
	t.due = time.Now().Add(d)
	if t.t == nil {
		t.t = time.AfterFunc(d, t.fire)
		return
	}
	t.t.Reset(d)
}

// disarm stops it.
func (t *oneTimer) disarm() {
	t.due = time.Time{}
	if t.t != nil {
		t.t.Stop()
	}
}

// fired reports whether a tick is the one due, and not a stale one, and
// then disarms it.
func (t *oneTimer) fired() bool {
	if t.due.IsZero() || time.Now().Before(t.due) {
		return false
	}
	t.due = time.Time{}
	return true
}

// wakeups are what wakes a standby besides its timer: the store's watch,
// and the end of the workloads of earlier terms (a liveDrained message).
// Both take their generation from one counter, unique per incarnation: a
// message of another generation than the current one is stale.
type wakeups struct {
	gen         uint64
	watch       context.CancelFunc // the standby watch's, nil when none
	drain       uint64             // the generation of the drain wait armed, 0 if none
	cancelDrain func()             // forgets it
}

// next starts a new generation: messages of earlier ones are stale.
func (w *wakeups) next() uint64 {
	w.gen++
	return w.gen
}

// stopWatch closes the watch, if one is open: its events still queued are
// stale.
func (w *wakeups) stopWatch() {
	if w.watch != nil {
		w.watch()
		w.watch = nil
		w.gen++
	}
}

// stopDrain forgets the drain wait, if one is armed.
func (w *wakeups) stopDrain() {
	if w.cancelDrain != nil {
		w.cancelDrain()
		w.cancelDrain, w.drain = nil, 0
	}
}

// sighting says what a standby has seen of the lease's holders since the
// last term.
type sighting uint8

const (
	sawNone   sighting = iota // no holder yet
	sawHolder                 // a holder: an earlier term of this instance, or a key with no owner
	sawOther                  // another instance holding it
)

// candidacy is what a standby knows between terms: the identity of its next
// term, who holds the lease, and whether it holds off.
type candidacy struct {
	// claimTerm is the term identity of the next term: fresh after every
	// term, and kept across the attempts of one standby period, so that an
	// attempt whose outcome was unknown is recognised by the next.
	claimTerm string
	holder    lease.Holder // who holds the lease, as last seen
	seen      sighting     // since the last term
	holdOff   time.Time    // no acquisition before (step down, Resign)
	// yielded is the term that stepped down, while its hold off lasts: the
	// hold off ends early once another term holds the lease (a Resign's
	// does not: its time is the caller's).
	yielded string
}

// leading starts a term: the next one has an identity of its own, and
// what was seen is forgotten. It reports whether another instance was seen
// holding the lease: a handover.
func (c *candidacy) leading() (handover bool) {
	handover = c.seen == sawOther
	c.claimTerm, c.yielded = lease.NewTerm(), ""
	c.holder, c.seen = lease.Holder{}, sawNone
	return handover
}

// holdingOff reports whether the hold off lasts at now.
func (c *candidacy) holdingOff(now time.Time) bool { return now.Before(c.holdOff) }

// steppedDown holds off until, after term stepped down.
func (c *candidacy) steppedDown(until time.Time, term string) { c.holdOff, c.yielded = until, term }

// resigned holds off until at least until, for the caller of Resign.
func (c *candidacy) resigned(until time.Time) {
	if until.After(c.holdOff) {
		c.holdOff = until
	}
	c.yielded = "" // the caller's hold off lasts its time
}

// saw records h, seen holding the lease by a standby of owner, and reports
// whether it is a holder not seen just before.
func (c *candidacy) saw(h lease.Holder, owner string) (changed bool) {
	first := c.seen == sawNone
	switch {
	case h.OwnerID != "" && h.OwnerID != owner: // not an earlier term of this instance
		c.seen = sawOther
	case first:
		c.seen = sawHolder
	}
	if c.yielded != "" && h.Term != "" && h.Term != c.yielded && h.Term != c.claimTerm {
		// Another term took over from the one that stepped down: the hold
		// off has done its work, and this instance competes again.
		c.holdOff, c.yielded = time.Time{}, ""
	}
	changed = first || h.Term != c.holder.Term || h.OwnerID != c.holder.OwnerID
	c.holder = h
	return changed
}

// lapsedLease is the lease of a term whose renewals failed until its renew
// deadline, while it may still be held at the store: see lapse.
type lapsedLease struct {
	lease   lease.Lease // zero when none
	until   time.Time   // it may be held at the store until then
	retries backoff.Backoff
}

// active reports whether there is a lapsed lease.
func (l *lapsedLease) active() bool { return l.lease.ID != "" }

// forget forgets the lapsed lease.
func (l *lapsedLease) forget() { l.lease = lease.Lease{} }

// restartLog counts the restarts after failed terms.
type restartLog struct {
	backoff backoff.Backoff
	times   []time.Time // restart times within the policy's period
}

// record records a restart at now, forgets those older than period, and
// returns how many are left.
func (r *restartLog) record(now time.Time, period time.Duration) int {
	keep := r.times[:0]
	for _, at := range r.times {
		if now.Sub(at) < period {
			keep = append(keep, at)
		}
	}
	r.times = append(keep, now)
	return len(r.times)
}

// acquireRetry counts the acquisition attempts that failed in a row, and
// backs off those that fail for a reason retrying soon cannot fix.
type acquireRetry struct {
	backoff backoff.Backoff
	fails   int
}

// answered records an answer of the store: no failure in a row any more.
func (a *acquireRetry) answered() {
	a.fails = 0
	a.backoff.Reset()
}

// lastError is the last error, as Status reports it.
type lastError struct {
	err     error
	at      time.Time
	cleared time.Time // when a later step succeeded; zero while err stands
	store   bool      // err is a store error of standby, which the store's next answer clears
}

// failed records err, the end of a term or a failure to start one: the
// next term clears it.
func (e *lastError) failed(err error) {
	*e = lastError{err: err, at: time.Now()}
}

// storeFailed records err, from a store call of standby (an acquisition, a
// lapsed term's renewal): the store's next answer clears it.
func (e *lastError) storeFailed(err error) {
	e.failed(err)
	e.store = true
}

// answered records that the store answered a call of standby: a store
// error no longer stands.
func (e *lastError) answered() {
	if e.store {
		e.succeeded()
	}
}

// succeeded records that a term started: the last error, if any, tells
// the past from now on.
func (e *lastError) succeeded() {
	if e.err != nil && e.cleared.IsZero() {
		e.cleared = time.Now()
	}
}

// waitFor is why the supervisor waits, and until when (zero: unknown).
type waitFor struct {
	reason WaitReason
	until  time.Time
}

// lastTerm is the last term's identity and token, for Status.
type lastTerm struct {
	id    string
	token lease.Token
}

// stopFlags are read by a workload's stop callback, on any goroutine.
type stopFlags struct {
	notify atomic.Bool // the workload's stop is sent to this incarnation
	stuck  atomic.Bool // it was reported stuck
}

// parts is a set of the parts of a term that have stopped.
type parts uint8

const (
	dogStopped       parts = 1 << iota // the watchdog has terminated
	workStopped                        // every part of the workload has stopped
	workActorStopped                   // the workload's actor has terminated or been told to stop
)

// has reports whether every part of q is in p.
func (p parts) has(q parts) bool { return p&q == q }

// ending is how a term ends, once it does.
type ending struct {
	how       termEnd
	cause     error     // why it ended
	stopUntil time.Time // the stop budget's end
	resigns   []resignRequest
}

// answer tells the Resign calls waiting for the end err.
func (e *ending) answer(err error) {
	for _, r := range e.resigns {
		r.reply <- err
	}
}
