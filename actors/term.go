package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/supervision"
)

// lead starts a term: Watchdog first, then Workload. resumed says that l
// is a lapsed lease renewed again (see lapse): the same term and token.
func (s *supervisor) lead(c actor.Context, l lease.Lease, sent leasehold.Sent, resumed bool) {
	cfg := s.s.cfg
	s.stopWatch()
	s.disarm()
	hold, err := leasehold.NewHold(cfg.Lease, l, sent)
	if err != nil { // cannot happen with a validated config; give the lease back
		s.giveBack(l, sent)
		s.errs.failed(err)
		s.escalate(c, err)
		return
	}
	seq := s.s.shared.seq.Add(1)
	handover := s.cand.leading() && !resumed // the next term gets an identity of its own
	t := &term{seq: seq, hold: hold, token: l.Token, flags: new(stopFlags)}
	t.flags.notify.Store(true)
	t.ctx, t.cancel = context.WithCancelCause(hold.Context())
	t.dog = c.Spawn(leasehold.WatchdogProps(cfg.Store, hold, cfg.Lease, cfg.Logger, s.s.report))

	live, self, root, sup := &s.s.shared.live, s.me.pid, s.me.sys.Root, s.s
	live.add(seq, l.Token)
	flags := t.flags
	stopped := func() {
		live.remove(seq)
		if flags.stuck.Load() {
			sup.logAttrs(slog.LevelInfo, "a workload that did not stop in time has stopped", l.Token)
			sup.emit(StuckWorkloadStopped{Subject: sup.subject(), Token: l.Token})
		}
		if flags.notify.Load() {
			root.Send(self, workloadStopped{seq: seq})
		}
	}
	s.term, s.last = t, lastTerm{id: l.Term, token: l.Token}
	s.errs.succeeded()
	s.waiting(WaitNone, time.Time{})
	s.s.shared.hold.Store(hold)
	t.work = cfg.Workload.start(c, seq, Granted{Token: l.Token, Context: t.ctx, Term: Term{h: hold}}, stopped)
	if t.work.tree != nil {
		s.s.shared.tree.Store(t.work.tree)
	}
	s.setState(StateLeading)
	s.restarts.backoff.Started(time.Now())
	msg := "lease acquired; leading"
	if resumed {
		msg = "lapsed lease renewed: the store kept it; leading again with the same token"
	}
	s.s.logAttrs(slog.LevelInfo, msg, l.Token, slog.Bool("handover", handover), slog.String("term", l.Term))
	s.s.emit(Acquired{Subject: s.s.subject(), Token: l.Token, ValidUntil: hold.ValidUntil(), Handover: handover,
		Resumed: resumed})
}

// workloadExited handles a function workload's return: it decides how the
// term ends. (Its workloadStopped arrives first.)
func (s *supervisor) workloadExited(c actor.Context, msg workloadExited) {
	t := s.term
	if t == nil || t.seq != msg.term || s.state != StateLeading {
		return
	}
	var lost *lease.LostError
	switch {
	case errors.As(t.hold.Err(), &lost):
		// It returned because the lease was lost (maybe before the
		// watchdog's Poison message arrived): the term was lost.
		s.endTerm(c, endLost, t.hold.Err())
	case msg.err == nil:
		s.endTerm(c, endStepDown, nil)
	default:
		s.endTerm(c, endFailed, msg.err)
	}
}

// workloadStopped records that every part of term seq's workload has
// stopped.
func (s *supervisor) workloadStopped(c actor.Context, seq uint64) {
	t := s.term
	if t == nil || t.seq != seq {
		return
	}
	t.stopped |= workStopped
	if s.state == StateStopping {
		s.maybeFinish(c)
	}
	// While leading, the workload's exit (workloadExited, or its actor's
	// Terminated) decides how the term ends.
}

// terminated handles a child's termination.
func (s *supervisor) terminated(c actor.Context, who *actor.PID) {
	t := s.term
	if t == nil {
		return
	}
	switch {
	case who.Equal(t.dog):
		t.stopped |= dogStopped
		if s.state == StateLeading {
			if t.hold.Poison(lease.LossStoreError, errWatchdogStopped) {
				s.s.logAttrs(slog.LevelWarn, "lease poisoned", t.token, slog.String("reason", lease.LossStoreError.String()),
					slog.Any("error", errWatchdogStopped))
				s.s.emit(Poisoned{Subject: s.s.subject(), Token: t.token, Reason: lease.LossStoreError, Err: t.hold.Err()})
			}
			s.endTerm(c, endLost, t.hold.Err())
			return
		}
		s.maybeFinish(c)
	case who.Equal(t.work.pid):
		t.stopped |= workActorStopped
		if s.state != StateLeading {
			return
		}
		var lost *lease.LostError
		switch {
		case errors.As(t.hold.Err(), &lost):
			s.endTerm(c, endLost, t.hold.Err())
		case t.failure != nil:
			s.endTerm(c, endFailed, t.failure)
		default:
			s.endTerm(c, endStepDown, nil) // the actor stopped itself
		}
	}
}

// endTerm starts ending the current term: the workload is told to stop (its
// context cancelled with the cause, its actor stopped), renewals stop, and
// the term finishes once the workload and the watchdog have stopped.
func (s *supervisor) endTerm(c actor.Context, end termEnd, cause error) {
	t := s.term
	t.end.how, t.end.cause = end, cause
	switch end {
	case endLost:
		t.cancel(t.hold.Err()) // already cancelled with it by the poisoned Hold
	case endResigned:
		t.cancel(ErrResigned)
	default:
		t.cancel(ErrWorkloadExited)
	}
	t.hold.MarkReleased() // no token and no renewal from now on (a poisoned Hold stays poisoned)
	if end == endLost {
		s.errs.failed(cause)
	} else if end == endFailed {
		s.errs.failed(fmt.Errorf("%w: %w", ErrWorkloadExited, cause))
		s.s.logAttrs(slog.LevelWarn, "workload failed while leading", t.token, slog.Any("error", cause))
		s.s.emit(WorkloadExited{Subject: s.s.subject(), Token: t.token, Err: cause})
	}
	if !t.stopped.has(workActorStopped) {
		c.Stop(t.work.pid)
		t.stopped |= workActorStopped // a second Stop would be a dead letter
	}
	if !t.stopped.has(dogStopped) {
		c.Stop(t.dog)
	}
	t.end.stopUntil = time.Now().Add(s.s.cfg.Lease.EffectiveStopTimeout())
	s.arm(time.Until(t.end.stopUntil))
	s.setState(StateStopping)
	s.maybeFinish(c)
}

// maybeFinish finishes the ending term once its workload and watchdog have
// stopped.
func (s *supervisor) maybeFinish(c actor.Context) {
	if t := s.term; t != nil && t.stopped.has(workStopped|dogStopped) {
		s.finishTerm(c)
	}
}

// stopOverdue handles the stop budget running out. A term whose workload has
// not stopped is stuck: reported, its lease neither renewed nor released (a
// standby takes it over once it has gone a TTL without renewal), and no term starts until the workload stops. A
// watchdog that has not stopped yet is not waited for any longer.
func (s *supervisor) stopOverdue(c actor.Context) {
	t := s.term
	if t == nil {
		return
	}
	if t.stopped.has(workStopped) {
		s.finishTerm(c)
		return
	}
	budget := s.s.cfg.Lease.EffectiveStopTimeout()
	s.stuckWorkload(t, budget)
	s.term = nil
	s.forget(t)
	s.next(c, t, ErrWorkloadStuck)
}

// forget stops reporting t's Hold and tree through Status and Tree.
func (s *supervisor) forget(t *term) {
	s.s.shared.hold.CompareAndSwap(t.hold, nil)
	if t.work.tree != nil {
		s.s.shared.tree.CompareAndSwap(t.work.tree, nil)
	}
}

// stuckWorkload reports a workload that did not stop within budget.
func (s *supervisor) stuckWorkload(t *term, budget time.Duration) {
	t.flags.stuck.Store(true)
	s.errs.failed(fmt.Errorf("%w (token %d)", ErrWorkloadStuck, t.token))
	s.s.logAttrs(slog.LevelError, "workload did not stop in time; its lease is neither renewed nor released",
		t.token, slog.Duration("timeout", budget))
	s.s.emit(WorkloadStopTimeout{Subject: s.s.subject(), Token: t.token, Timeout: budget})
	s.s.emit(NotReleased{Subject: s.s.subject(), Token: t.token, Err: ErrWorkloadStuck})
}

// finishTerm ends a term whose workload has stopped: the lease is released
// if it may still be ours, and the supervisor moves on.
func (s *supervisor) finishTerm(c actor.Context) {
	t := s.term
	s.term = nil
	s.forget(t)
	s.disarm()
	var err error
	if !s.lapse(t) {
		err = s.releaseTerm(t)
	}
	s.next(c, t, err)
}

// releaseTerm releases t's lease, unless the store said it is lost or its
// validity has ended, and reports the outcome. It returns the error a
// Resign reports.
func (s *supervisor) releaseTerm(t *term) error {
	var lost *lease.LostError
	if errors.As(t.hold.Err(), &lost) && lost.Reason == lease.LossTaken {
		return nil // not ours any more: nothing to release
	}
	validUntil := t.hold.ValidUntil()
	if !time.Now().Before(validUntil) {
		s.s.logAttrs(slog.LevelWarn, "lease not released: its validity has ended; "+takenOverLater, t.token)
		s.s.emit(NotReleased{Subject: s.s.subject(), Token: t.token, Err: lease.ErrExpired})
		return nil
	}
	ctx, cancel := s.s.opContext(validUntil)
	defer cancel()
	if err := s.s.cfg.Store.Release(ctx, t.hold.Lease()); err != nil {
		if errors.Is(err, lease.ErrLost) {
			return nil
		}
		s.s.logAttrs(slog.LevelWarn, s.s.notReleased("lease", err), t.token, slog.Any("error", err))
		s.s.emit(NotReleased{Subject: s.s.subject(), Token: t.token, Err: err})
		return fmt.Errorf("actors: release: %w", err)
	}
	s.s.logAttrs(slog.LevelInfo, "lease released", t.token)
	s.s.emit(Released{Subject: s.s.subject(), Token: t.token})
	return nil
}

// takenOverLater says what becomes of a lease that was not released, in
// words true of every store: a standby takes it once it has gone a TTL
// without renewal. (Whether the store also removes it then depends on the
// store: natsstore's server does only with per-message TTLs.)
const takenOverLater = "a standby takes it over once it has gone a TTL without renewal"

// notReleased is the log message for a lease (what) whose release failed
// with err: a store that stopped for good keeps no lease at all.
func (s *LeaseSupervisor) notReleased(what string, err error) string {
	if errors.Is(storeStopped(s.cfg.Store, err), ErrStoreStopped) {
		return what + " not released: its store stopped"
	}
	return what + " not released; " + takenOverLater
}

// next moves on after term t ended: a restart after a loss or a failure,
// standby after a step down or a resignation. err is what a Resign waiting
// for t is told.
func (s *supervisor) next(c actor.Context, t *term, err error) {
	switch t.end.how {
	case endLost, endFailed:
		cause := t.end.cause
		if t.end.how == endFailed {
			cause = fmt.Errorf("%w: %w", ErrWorkloadExited, t.end.cause)
		}
		if stopped := storeStopped(s.s.cfg.Store, cause); t.end.how == endLost && errors.Is(stopped, ErrStoreStopped) {
			s.errs.failed(stopped)
			s.escalate(c, stopped) // no restart can help
			break
		}
		s.restart(c, cause)
	case endStepDown:
		s.cand.steppedDown(time.Now().Add(s.s.retryDelay()), t.hold.Lease().Term)
		s.s.logAttrs(slog.LevelInfo, "workload stepped down; standing by", t.token, slog.Time("hold_off_until", s.cand.holdOff))
		s.s.emit(SteppedDown{Subject: s.s.subject(), Token: t.token})
		s.standby(c)
	case endResigned:
		s.s.logAttrs(slog.LevelInfo, "resigned; standing by", t.token, slog.Time("hold_off_until", s.cand.holdOff))
		s.s.emit(SteppedDown{Subject: s.s.subject(), Token: t.token, Resigned: true})
		s.standby(c)
	}
	if err == nil && t.flags.stuck.Load() {
		err = fmt.Errorf("%w (token %d)", ErrWorkloadStuck, t.token)
	}
	t.end.answer(err)
}

// resign handles Resign.
func (s *supervisor) resign(c actor.Context, r resignRequest) {
	s.cand.resigned(time.Now().Add(r.holdOff))
	switch t := s.term; {
	case t != nil && s.state == StateLeading:
		t.end.resigns = append(t.end.resigns, r)
		s.endTerm(c, endResigned, ErrResigned)
	case t != nil: // already stopping: answered when it has finished
		t.end.resigns = append(t.end.resigns, r)
	default:
		s.releaseLapsed()
		r.reply <- nil
		s.publish()
	}
}

// restart applies the RestartPolicy after a term ended with cause.
func (s *supervisor) restart(c actor.Context, cause error) {
	p := s.s.cfg.Restart
	now := time.Now()
	if n := s.restarts.record(now, p.period()); n > p.intensity() {
		s.escalate(c, tooManyRestarts(n, p.period(), cause))
		return
	}
	delay := s.restarts.backoff.Failed(now)
	if p.Backoff.Immediate {
		delay = 0
	}
	s.s.logAttrs(slog.LevelInfo, "term ended; standing by again after a backoff", 0,
		slog.Duration("delay", delay), slog.Int("attempt", s.restarts.backoff.Attempt()), slog.Any("cause", cause))
	s.s.emit(Restarting{Subject: s.s.subject(), Attempt: s.restarts.backoff.Attempt(), Delay: delay, Cause: cause})
	s.arm(delay)
	s.waiting(WaitRestart, s.timer.due)
	s.setState(StateRestarting)
}

// escalate hands err to the parent supervisor.
func (s *supervisor) escalate(c actor.Context, err error) {
	s.disarm()
	s.stopWatch()
	s.setState(StateEscalated)
	s.s.logAttrs(slog.LevelError, "escalating to the parent", 0, slog.Any("error", err))
	s.s.emit(GaveUp{Subject: s.s.subject(), Restarts: len(s.restarts.times), Err: err})
	if sup, ok := c.(actor.Supervisor); ok {
		sup.EscalateFailure(err, c.Message())
		return
	}
	// A context decorator hides the escalation: stop instead, so that the
	// parent at least sees this supervisor terminate.
	c.Stop(c.Self())
}

// shutdown stops everything the supervisor started: on Stopping, and on
// Restarting by its parent. It blocks (bounded): protoactor stops the
// children right after it returns.
func (s *supervisor) shutdown(c actor.Context) {
	s.disarm()
	s.stopWatch()
	s.releaseLapsed()
	s.wake.stopDrain()
	if t := s.term; t != nil {
		s.term = nil
		s.forget(t)
		t.flags.notify.Store(false) // this incarnation will not be there to hear it
		if s.state == StateLeading {
			t.end.how = endResigned
			t.cancel(supervision.ErrShutdown)
			t.hold.MarkReleased()
			t.end.stopUntil = time.Now().Add(s.s.cfg.Lease.EffectiveStopTimeout())
		}
		if !t.stopped.has(workActorStopped) {
			c.Stop(t.work.pid)
		}
		var released error
		if stopped := waitUntil(t.work.done, t.end.stopUntil); stopped {
			if !t.stopped.has(dogStopped) {
				leasehold.Quiesce(c, t.dog, s.s.cfg.Lease.EffectiveStopTimeout())
			}
			released = s.releaseTerm(t)
		} else {
			s.stuckWorkload(t, s.s.cfg.Lease.EffectiveStopTimeout())
			released = fmt.Errorf("%w (token %d)", ErrWorkloadStuck, t.token)
		}
		t.end.answer(released)
	}
	s.setState(StateStopped)
}

// waitUntil waits for done until deadline, and reports whether it closed.
func waitUntil(done <-chan struct{}, deadline time.Time) bool {
	select {
	case <-done:
		return true
	default:
	}
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
