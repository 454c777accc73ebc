package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/lease"
)

// WatchdogProps returns the Props of a Watchdog that keeps the lease of hold
// alive in store.
//
// The Watchdog renews every lease.RenewPeriod(interval, TTL), re-derived
// after every renewal from the Hold's current TTL, so it never sleeps past
// half the TTL. After each successful renewal it moves the Hold's validity
// (send time + TTL - SafetyMargin). A renewal that fails with a transient
// error is retried with short, jittered, capped backoff until the Hold's
// renew deadline (validity - StopTimeout). It then poisons the Hold and
// sends a Poison message to its parent: at the deadline with
// PoisonDeadlinePassed, or at once with PoisonLost when the store says the
// lease is lost, or PoisonStoreError for answers that retrying cannot fix.
// It never panics for a store error.
//
// cfg supplies the RenewInterval; the margins (SafetyMargin, StopTimeout)
// are the Hold's, given to NewHold;
// logger may be nil; onEvent, when not nil, receives Renewed,
// RenewalFailed and Poisoned events on the Watchdog's goroutine.
//
// The Watchdog stops renewing as soon as the Hold ends (poisoned or
// MarkReleased), aborting a renewal in flight; stop the actor then. It
// holds one timer at a time, cancelled when it stops or restarts, and no
// goroutine of its own: a renewal runs on the actor's mailbox goroutine.
// An Extend message renews at once with a new TTL.
func WatchdogProps(store lease.Store, hold *Hold, cfg lease.Config, logger *slog.Logger, onEvent func(Event)) *actor.Props {
	interval := cfg.RenewInterval // normalised against the current TTL every tick
	log := actorsys.Logger(logger)
	return actor.PropsFromProducer(func() actor.Actor {
		return &watchdog{store: store, hold: hold, interval: interval, log: log, onEvent: onEvent}
	})
}

// watchdog is the Watchdog actor. It is kept small: a process may run one
// per held lock.
type watchdog struct {
	store    lease.Store
	hold     *Hold
	interval time.Duration // as configured; 0 means derived from the TTL
	log      *slog.Logger
	onEvent  func(Event)

	self   *actor.PID
	system *actor.ActorSystem
	timer  *time.Timer
	due    time.Time // when the armed timer fires; zero when disarmed
	retry  backoff.Backoff
	fails  int
	last   error // the last transient renewal error
	done   bool  // no more renewals: the Hold ended
}

// renewTick wakes the watchdog; stale ticks are recognised by w.due.
type renewTick struct{}

// watchdogSync is answered (by closing done) once the messages before it,
// a renewal in flight included, have been handled.
type watchdogSync struct{ done chan struct{} }

// quiesce waits at most timeout until the watchdog at pid has finished what
// it was doing; with its Hold ended, it then starts nothing new.
func quiesce(c actor.Context, pid *actor.PID, timeout time.Duration) bool {
	done := make(chan struct{})
	c.Send(pid, watchdogSync{done: done})
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// Receive implements actor.Actor.
func (w *watchdog) Receive(c actor.Context) {
	switch msg := c.Message().(type) {
	case *actor.Started:
		w.self, w.system = c.Self(), c.ActorSystem()
		_, _, sent, err := w.hold.renewArgs()
		if err != nil {
			w.done = true
			return
		}
		w.arm(time.Until(sent.Add(w.period())))
	case renewTick:
		if w.due.IsZero() || time.Now().Before(w.due) {
			return // stale: the timer was re-armed or disarmed since
		}
		w.due = time.Time{}
		w.renew(c)
	case Extend:
		w.extend(c, msg)
	case watchdogSync:
		close(msg.done)
	case *actor.Stopping, *actor.Restarting:
		w.disarm()
	}
}

// period is the sleep between renewals for the Hold's current TTL.
func (w *watchdog) period() time.Duration { return renewPeriod(w.interval, w.hold.TTL()) }

// renewPeriod is lease.RenewPeriod of the configured interval normalised
// for ttl (0 means max(ttl/3, 1 s), >= ttl means max(ttl/2, 1 s)):
// never more than half the TTL, at least 1 ms.
func renewPeriod(interval, ttl time.Duration) time.Duration {
	c := lease.Config{TTL: ttl, RenewInterval: interval}
	return lease.RenewPeriod(c.EffectiveRenewInterval(), ttl)
}

// arm (re)schedules the single timer to fire after d.
func (w *watchdog) arm(d time.Duration) {
	d = max(d, 0)
	w.due = time.Now().Add(d)
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
		return
	}
	w.timer.Reset(d)
}

func (w *watchdog) fire() { w.system.Root.Send(w.self, renewTick{}) }

func (w *watchdog) disarm() {
	w.due = time.Time{}
	if w.timer != nil {
		w.timer.Stop()
	}
}

// renew sends one renewal and decides what happens next. It returns the
// renewal's error.
func (w *watchdog) renew(c actor.Context) error {
	if w.done {
		return w.hold.Err()
	}
	l, deadline, _, err := w.hold.renewArgs()
	if err != nil {
		w.done = true
		return err
	}
	sent := time.Now()
	if !sent.Before(deadline) {
		cause := w.last
		if cause == nil {
			cause = ErrRenewDeadline
		}
		w.poison(c, l, PoisonDeadlinePassed, cause)
		return w.hold.Err()
	}
	period := renewPeriod(w.interval, l.TTL)
	// One attempt may take at most a period, and never past the deadline;
	// the Hold's context aborts it when the Hold ends.
	attemptEnd := sent.Add(period)
	if deadline.Before(attemptEnd) {
		attemptEnd = deadline
	}
	callCtx, cancel := context.WithDeadline(w.hold.ctx, attemptEnd)
	renewed, err := w.store.Renew(callCtx, l)
	cancel()
	if err == nil {
		w.hold.renewed(renewed, sent)
		w.fails, w.last = 0, nil
		w.retry.Reset()
		w.emit(Renewed{Subject: subject(l), Token: l.Token, Revision: renewed.Revision, TTL: renewed.TTL,
			ValidUntil: w.hold.ValidUntil()})
		w.arm(time.Until(sent.Add(period)))
		return nil
	}
	if w.hold.Err() != nil { // ended while the renewal was in flight: stop quietly
		w.done = true
		return w.hold.Err()
	}
	if reason := classify(err); reason != PoisonUnknown {
		w.poison(c, l, reason, err)
		return w.hold.Err()
	}
	w.fails++
	w.last = err
	w.emit(RenewalFailed{Subject: subject(l), Token: l.Token, Attempt: w.fails, Deadline: deadline, Err: err})
	w.log.LogAttrs(context.Background(), slog.LevelWarn, "lease renewal failed; retrying until the renew deadline",
		leaseAttrs(l, slog.Int("attempt", w.fails), slog.Time("deadline", deadline), slog.Any("error", err))...)
	now := time.Now()
	if !now.Before(deadline) {
		w.poison(c, l, PoisonDeadlinePassed, err)
		return w.hold.Err()
	}
	if w.fails == 1 {
		w.retry.Policy = retryPolicy(period)
	}
	w.arm(min(w.retry.Failed(now), deadline.Sub(now)))
	return err
}

// retryPolicy is the short backoff between failed renewals: from a tenth of
// the period (1 ms to 100 ms) up to half the period, full jitter.
func retryPolicy(period time.Duration) backoff.Policy {
	base := min(max(period/10, time.Millisecond), 100*time.Millisecond)
	return backoff.Policy{Base: base, Cap: max(period/2, base), Jitter: backoff.Full}
}

// poison ends the Hold and tells the parent.
func (w *watchdog) poison(c actor.Context, l lease.Lease, reason PoisonReason, err error) {
	w.done = true
	w.disarm()
	if !w.hold.Poison(reason, err) {
		return // released (or poisoned) meanwhile: nothing to report
	}
	cause := w.hold.Err()
	w.log.LogAttrs(context.Background(), slog.LevelWarn, "lease poisoned",
		leaseAttrs(l, slog.String("reason", reason.String()), slog.Any("error", err))...)
	w.emit(Poisoned{Subject: subject(l), Token: l.Token, Reason: reason, Err: cause})
	if p := c.Parent(); p != nil {
		c.Send(p, Poison{LeaseID: l.ID, Token: l.Token, Reason: reason, Err: cause})
	}
}

// extend renews at once with a new TTL and answers.
func (w *watchdog) extend(c actor.Context, msg Extend) {
	var res ExtendResult
	switch {
	case w.done || w.hold.Err() != nil:
		res.Err = w.hold.Err()
	default:
		if err := w.hold.validateTTL(msg.TTL); err != nil {
			res.Err = err
			break
		}
		w.hold.setTTL(msg.TTL)
		w.disarm()
		res.Err = w.renew(c)
	}
	res.Lease, res.ValidUntil = w.hold.Lease(), w.hold.ValidUntil()
	switch {
	case msg.Reply != nil:
		select {
		case msg.Reply <- res:
		default: // an unbuffered or full channel: never block the watchdog
		}
	case c.Sender() != nil:
		c.Respond(res)
	}
}

func (w *watchdog) emit(ev Event) {
	if w.onEvent != nil {
		w.onEvent(ev)
	}
}

func subject(l lease.Lease) Subject { return Subject{LeaseID: l.ID, OwnerID: l.OwnerID} }

// leaseAttrs returns the attributes every lease log record carries.
func leaseAttrs(l lease.Lease, more ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{
		slog.String("lease_id", l.ID), slog.String("owner_id", l.OwnerID), slog.Uint64("token", uint64(l.Token)),
	}, more...)
}
