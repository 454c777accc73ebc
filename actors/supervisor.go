package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/internal/backoff"
	"github.com/asterforge/aster/lease"
)

// LeaseSupervisor runs a workload on exactly one instance of a fleet: the
// one that holds the lease. Each instance runs a LeaseSupervisor with the
// same LeaseID and its own OwnerID:
//
//   - Standby: it tries to acquire the lease; while another owner holds
//     it, it waits, woken by the store's watch (if the store is a
//     lease.Watcher) and in any case every jittered StandbyRetryInterval.
//   - Leading: it starts a Watchdog child, then the Workload child, which
//     gets the fencing token and a context.
//   - Poison: when the Watchdog gives the lease up, token reads already
//     fail; the workload's context is cancelled with the Hold's cause
//     (matching lease.ErrLost) and the workload is stopped with a wait
//     bounded by StopTimeout and by the validity. Then the RestartPolicy
//     applies: a backoff before standing by again, or escalation to the
//     parent after too many restarts.
//   - Shutdown (the actor stops): the workload is cancelled with
//     ErrShutdown and stopped (bounded), then the lease is released with a
//     compare-and-swap, unless its validity has ended.
//
// A workload that does not stop in time is reported (log and
// WorkloadStopTimeout) and its lease is neither renewed nor released: it
// expires at the store. While such a workload still runs, this supervisor
// does not acquire the lease again.
//
// Use Props to run it as a child in an actor tree, or Run from plain Go.
// A LeaseSupervisor is immutable and safe for concurrent use; every actor
// spawned from its Props has its own state.
type LeaseSupervisor struct {
	cfg     SupervisorConfig
	log     *slog.Logger
	metrics *metrics
	notify  func(Event)  // Run's own observer, or nil
	rand    *rand.Rand   // the restart backoff's source in tests; nil means the global one
	running *atomic.Bool // a Run is under way; shared by Run's copy
}

// NewLeaseSupervisor validates cfg and returns a LeaseSupervisor. Errors
// match lease.ErrInvalid.
func NewLeaseSupervisor(cfg SupervisorConfig) (*LeaseSupervisor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.MeterProvider, cfg.Lease.LeaseID)
	if err != nil {
		return nil, err
	}
	return &LeaseSupervisor{cfg: cfg, log: actorsys.Logger(cfg.Logger), metrics: m, running: new(atomic.Bool)}, nil
}

// Props returns the Props of the supervisor actor. The actor supervises its
// own children (the Watchdog and the Workload): a failing child is
// stopped, which ends the term. It escalates ErrTooManyRestarts, and
// store errors that retrying cannot fix (lease.ErrInvalid,
// lease.ErrClosed), to its parent with EscalateFailure, never by panicking.
func (s *LeaseSupervisor) Props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &supervisor{s: s} })
}

func (s *LeaseSupervisor) emit(ev Event) {
	s.metrics.observe(ev)
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(ev)
	}
	if s.notify != nil {
		s.notify(ev)
	}
}

func (s *LeaseSupervisor) subject() Subject {
	return Subject{LeaseID: s.cfg.Lease.LeaseID, OwnerID: s.cfg.Lease.OwnerID}
}

// logAttrs logs with the lease_id and owner_id attributes, and the token
// when it is not zero.
func (s *LeaseSupervisor) logAttrs(level slog.Level, msg string, token lease.Token, attrs ...slog.Attr) {
	base := []slog.Attr{slog.String("lease_id", s.cfg.Lease.LeaseID), slog.String("owner_id", s.cfg.Lease.OwnerID)}
	if token != 0 {
		base = append(base, slog.Uint64("token", uint64(token)))
	}
	s.log.LogAttrs(context.Background(), level, msg, append(base, attrs...)...)
}

// opTimeout bounds one acquire or release call.
func (s *LeaseSupervisor) opTimeout() time.Duration {
	l := s.cfg.Lease
	return lease.RenewPeriod(l.EffectiveRenewInterval(), l.EffectiveTTL())
}

// retryDelay is the standby poll interval, jittered uniformly in
// [3/4, 5/4] of StandbyRetryInterval.
func (s *LeaseSupervisor) retryDelay() time.Duration {
	d := s.cfg.Lease.EffectiveStandbyRetryInterval()
	return d*3/4 + rand.N(d/2+1)
}

type supState uint8

const (
	stateStandby    supState = iota // trying to acquire, or waiting to retry
	stateLeading                    // holding the lease, workload running
	stateRestarting                 // waiting a backoff before standby
	stateEscalated                  // failure handed to the parent
	stateStopped                    // shut down
)

// supervisor is the LeaseSupervisor actor.
type supervisor struct {
	s      *LeaseSupervisor
	self   *actor.PID
	system *actor.ActorSystem
	state  supState

	timer *time.Timer // one timer: the standby poll or the restart backoff
	due   time.Time   // when it fires; zero when disarmed

	watch    *standbyWatch
	watchGen uint64

	owner     string // the other owner last seen in standby
	seenOther bool   // another owner was seen since the last term
	// claimTerm is the term identity of the next term: fresh after every
	// term, and kept across the attempts of one standby period, so that an
	// attempt whose outcome was unknown is recognised by the next.
	claimTerm string

	termSeq uint64
	term    *term
	stuck   []stuckWorkload // workloads that did not stop in time and still run

	backoff  backoff.Backoff
	restarts []time.Time // restart times within the policy's period
}

// term is one leadership term.
type term struct {
	id      uint64
	hold    *Hold
	token   lease.Token
	ctx     context.Context // the workload's
	cancel  context.CancelCauseFunc
	dog     *actor.PID
	work    workloadInstance
	failure error // why the workload actor failed, if it did
}

// stuckWorkload is a workload that ignored its cancellation: it is known to
// have stopped when its function returns (term) or its actor terminates.
type stuckWorkload struct {
	term  uint64
	pid   *actor.PID
	byPID bool
}

type standbyWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Internal messages.
type (
	supervisorTick struct{}
	watchEvent     struct {
		gen uint64
		ev  lease.Event
	}
	watchEnded struct{ gen uint64 }
)

// errWatchdogStopped poisons a Hold whose Watchdog stopped by itself.
var errWatchdogStopped = errors.New("actors: watchdog stopped unexpectedly")

// Receive implements actor.Actor.
func (s *supervisor) Receive(c actor.Context) {
	switch msg := c.Message().(type) {
	case *actor.Started:
		s.self, s.system = c.Self(), c.ActorSystem()
		s.backoff.Policy, s.backoff.Rand = s.s.cfg.Restart.backoff(), s.s.rand
		s.claimTerm = lease.NewTerm()
		s.standby(c)
	case supervisorTick:
		if s.due.IsZero() || time.Now().Before(s.due) {
			return // stale
		}
		s.due = time.Time{}
		switch s.state {
		case stateStandby:
			s.tryAcquire(c)
		case stateRestarting:
			s.standby(c)
		}
	case watchEvent:
		if msg.gen != s.watchGen || s.state != stateStandby {
			return
		}
		switch msg.ev.Kind {
		case lease.EventFree:
			s.tryAcquire(c)
		case lease.EventHeld:
			if msg.ev.Holder.Term != s.claimTerm {
				s.sawOwner(msg.ev.Holder.OwnerID)
			}
		}
	case watchEnded:
		if msg.gen == s.watchGen {
			s.stopWatch() // polling goes on; the next poll opens a new watch
		}
	case Poison:
		if s.state == stateLeading && s.term.token == msg.Token {
			s.lost(c, msg.Err)
		}
	case workloadExited:
		s.workloadExited(c, msg)
	case *actor.Terminated:
		s.terminated(c, msg.Who)
	case *actor.Stopping, *actor.Restarting:
		s.shutdown(c)
	}
}

// HandleFailure implements actor.SupervisorStrategy for the supervisor's
// own children: a failing Watchdog or Workload is stopped, never resumed
// or restarted in place, and its termination ends the term.
func (s *supervisor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason, _ any) {
	if t := s.term; t != nil && child.Equal(t.work.pid()) {
		t.failure = fmt.Errorf("actors: workload actor failed: %v", reason)
	}
	s.s.logAttrs(slog.LevelWarn, "child actor failed; stopping it", s.token(),
		slog.String("child", child.String()), slog.Any("reason", reason))
	sup.StopChildren(child)
}

func (s *supervisor) token() lease.Token {
	if s.term == nil {
		return 0
	}
	return s.term.token
}

// arm (re)schedules the single timer.
func (s *supervisor) arm(d time.Duration) {
	d = max(d, 0)
	s.due = time.Now().Add(d)
	if s.timer == nil {
		self, root := s.self, s.system.Root
		s.timer = time.AfterFunc(d, func() { root.Send(self, supervisorTick{}) })
		return
	}
	s.timer.Reset(d)
}

func (s *supervisor) disarm() {
	s.due = time.Time{}
	if s.timer != nil {
		s.timer.Stop()
	}
}

// standby enters standby and tries to acquire at once.
func (s *supervisor) standby(c actor.Context) {
	s.state = stateStandby
	s.tryAcquire(c)
}

// tryAcquire makes one acquisition attempt and leads, or schedules the next.
func (s *supervisor) tryAcquire(c actor.Context) {
	cfg := s.s.cfg
	if len(s.stuck) > 0 {
		s.s.logAttrs(slog.LevelWarn, "not acquiring: a workload of an earlier term is still running", 0,
			slog.Int("stuck", len(s.stuck)))
		s.arm(s.s.retryDelay())
		return
	}
	if s.watch == nil {
		s.startWatch() // before acquiring, so that a release right after is seen
	}
	sent := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), s.s.opTimeout())
	a, err := cfg.Store.Acquire(ctx, lease.Claim{LeaseID: cfg.Lease.LeaseID, OwnerID: cfg.Lease.OwnerID,
		Term: s.claimTerm, TTL: cfg.Lease.EffectiveTTL()})
	cancel()
	switch {
	case err != nil && fatalStoreError(err):
		s.s.logAttrs(slog.LevelError, "lease acquisition cannot succeed", 0, slog.Any("error", err))
		s.escalate(c, err)
	case err != nil:
		s.s.logAttrs(slog.LevelWarn, "lease acquisition failed; retrying", 0, slog.Any("error", err))
		s.arm(s.s.retryDelay())
	case !a.Acquired:
		s.sawOwner(a.Holder.OwnerID)
		s.arm(s.s.retryDelay())
	default:
		s.lead(c, a.Lease, sent)
	}
}

// sawOwner records the owner seen in standby and reports a change.
func (s *supervisor) sawOwner(owner string) {
	if owner != "" && owner != s.s.cfg.Lease.OwnerID { // not an earlier term of this instance
		s.seenOther = true
	}
	if owner == s.owner {
		return
	}
	s.owner = owner
	s.s.logAttrs(slog.LevelInfo, "lease held by another owner; standing by", 0, slog.String("owner", owner))
	s.s.emit(Standby{Subject: s.s.subject(), Owner: owner})
}

// lead starts a term: Watchdog first, then Workload.
func (s *supervisor) lead(c actor.Context, l lease.Lease, sent time.Time) {
	cfg := s.s.cfg
	s.stopWatch()
	s.disarm()
	hold, err := NewHold(cfg.Lease, l, sent)
	if err != nil { // cannot happen with a validated config; give the lease back
		ctx, cancel := context.WithTimeout(context.Background(), s.s.opTimeout())
		_ = cfg.Store.Release(ctx, l)
		cancel()
		s.escalate(c, err)
		return
	}
	s.termSeq++
	s.claimTerm = lease.NewTerm() // the next term has an identity of its own
	t := &term{id: s.termSeq, hold: hold, token: l.Token}
	t.ctx, t.cancel = context.WithCancelCause(hold.Context())
	t.dog = c.Spawn(WatchdogProps(cfg.Store, hold, cfg.Lease, cfg.Logger, s.s.emit))
	t.work = cfg.Workload.start(c, t.id, Granted{Token: l.Token, Context: t.ctx, Hold: hold})
	s.term, s.state = t, stateLeading
	s.backoff.Started(time.Now())
	handover := s.seenOther
	s.owner, s.seenOther = "", false
	s.s.logAttrs(slog.LevelInfo, "lease acquired; leading", l.Token, slog.Bool("handover", handover))
	s.s.emit(Acquired{Subject: s.s.subject(), Token: l.Token, ValidUntil: hold.ValidUntil(), Handover: handover})
}

// stopBudget is how long the workload may take to stop: StopTimeout, and
// never past the validity.
func (s *supervisor) stopBudget(t *term) time.Duration {
	return max(min(s.s.cfg.Lease.EffectiveStopTimeout(), time.Until(t.hold.ValidUntil())), 0)
}

// lost ends a term whose Hold was poisoned. Once the workload has stopped,
// the lease is given back if it may still be ours: with every term its own
// identity, nobody (this supervisor's next term included) could take it
// before it expires.
func (s *supervisor) lost(c actor.Context, cause error) {
	t := s.term
	s.term = nil
	budget := s.stopBudget(t)
	stopped := t.work.stop(c, budget, false) // its context was cancelled with the Hold's cause
	if !stopped {
		c.Stop(t.dog)
		s.stuckWorkload(t, budget)
		s.restart(c, cause)
		return
	}
	stopAndWait(c.ActorSystem(), c.Stop, t.dog, s.s.cfg.Lease.EffectiveStopTimeout())
	var lost *LostError
	if errors.As(t.hold.Err(), &lost) && lost.Reason != PoisonLost && time.Now().Before(t.hold.ValidUntil()) {
		ctx, cancel := context.WithDeadline(context.Background(), t.hold.ValidUntil())
		ctx, cancel2 := context.WithTimeout(ctx, s.s.opTimeout())
		err := s.s.cfg.Store.Release(ctx, t.hold.Lease())
		cancel2()
		cancel()
		if err == nil {
			s.s.logAttrs(slog.LevelInfo, "lease released after its workload stopped", t.token)
			s.s.emit(Released{Subject: s.s.subject(), Token: t.token})
		}
	}
	s.restart(c, cause)
}

// workloadExited handles a function workload's return.
func (s *supervisor) workloadExited(c actor.Context, msg workloadExited) {
	for i, w := range s.stuck {
		if !w.byPID && w.term == msg.term {
			s.unstuck(c, i)
			return
		}
	}
	if s.state == stateLeading && s.term.id == msg.term {
		s.exited(c, msg.err)
	}
}

// terminated handles a child's termination.
func (s *supervisor) terminated(c actor.Context, who *actor.PID) {
	for i, w := range s.stuck {
		if w.byPID && w.pid.Equal(who) {
			s.unstuck(c, i)
			return
		}
	}
	if s.state != stateLeading {
		return
	}
	switch t := s.term; {
	case who.Equal(t.work.pid()):
		s.exited(c, t.failure)
	case who.Equal(t.dog):
		if t.hold.Poison(PoisonStoreError, errWatchdogStopped) {
			s.s.logAttrs(slog.LevelWarn, "lease poisoned", t.token, slog.String("reason", PoisonStoreError.String()),
				slog.Any("error", errWatchdogStopped))
			s.s.emit(Poisoned{Subject: s.s.subject(), Token: t.token, Reason: PoisonStoreError, Err: t.hold.Err()})
		}
		s.lost(c, t.hold.Err())
	}
}

// exited ends a term whose workload returned or stopped by itself: the
// lease is released so that another instance can take over.
func (s *supervisor) exited(c actor.Context, err error) {
	t := s.term
	s.term = nil
	s.s.logAttrs(slog.LevelWarn, "workload exited while leading", t.token, slog.Any("error", err))
	s.s.emit(WorkloadExited{Subject: s.s.subject(), Token: t.token, Err: err})
	t.cancel(ErrWorkloadExited)
	t.work.stop(c, 0, false)
	s.release(c, t, false)
	cause := ErrWorkloadExited
	if err != nil {
		cause = fmt.Errorf("%w: %w", ErrWorkloadExited, err)
	}
	s.restart(c, cause)
}

// release ends t's Hold, waits for its Watchdog to be idle and releases the
// lease with a compare-and-swap, unless the Hold was poisoned or its
// validity ended. The Watchdog is stopped, unless the supervisor itself is
// stopping (leave), when protoactor stops it right after.
func (s *supervisor) release(c actor.Context, t *term, leave bool) {
	cfg := s.s.cfg
	t.hold.MarkReleased() // no token, no renewal from now on; aborts a renewal in flight
	if leave {
		quiesce(c, t.dog, cfg.Lease.EffectiveStopTimeout())
	} else {
		stopAndWait(c.ActorSystem(), c.Stop, t.dog, cfg.Lease.EffectiveStopTimeout())
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.s.opTimeout())
	err := ReleaseHold(ctx, cfg.Store, t.hold)
	cancel()
	if err != nil {
		s.s.logAttrs(slog.LevelWarn, "lease not released; it expires at the store", t.token, slog.Any("error", err))
		s.s.emit(NotReleased{Subject: s.s.subject(), Token: t.token, Err: err})
		return
	}
	s.s.logAttrs(slog.LevelInfo, "lease released", t.token)
	s.s.emit(Released{Subject: s.s.subject(), Token: t.token})
}

// stuckWorkload reports a workload that did not stop within budget.
func (s *supervisor) stuckWorkload(t *term, budget time.Duration) {
	_, isFunc := t.work.(*funcInstance)
	s.stuck = append(s.stuck, stuckWorkload{term: t.id, pid: t.work.pid(), byPID: !isFunc})
	s.s.logAttrs(slog.LevelError, "workload did not stop in time; its lease is neither renewed nor released",
		t.token, slog.Duration("timeout", budget))
	s.s.emit(WorkloadStopTimeout{Subject: s.s.subject(), Token: t.token, Timeout: budget})
}

// unstuck records that stuck workload i has stopped at last.
func (s *supervisor) unstuck(c actor.Context, i int) {
	s.s.logAttrs(slog.LevelInfo, "a workload that did not stop in time has stopped", 0)
	s.stuck = append(s.stuck[:i], s.stuck[i+1:]...)
	if len(s.stuck) == 0 && s.state == stateStandby {
		s.disarm()
		s.tryAcquire(c)
	}
}

// restart applies the RestartPolicy after a term ended with cause.
func (s *supervisor) restart(c actor.Context, cause error) {
	p := s.s.cfg.Restart
	now := time.Now()
	keep := s.restarts[:0]
	for _, at := range s.restarts {
		if now.Sub(at) < p.within() {
			keep = append(keep, at)
		}
	}
	s.restarts = append(keep, now)
	if limit := p.maxRestarts(); limit >= 0 && len(s.restarts) > limit {
		s.escalate(c, tooManyRestarts(len(s.restarts), p.within(), cause))
		return
	}
	delay := s.backoff.Failed(now)
	s.state = stateRestarting
	s.s.logAttrs(slog.LevelInfo, "term ended; standing by again after a backoff", 0,
		slog.Duration("delay", delay), slog.Int("attempt", s.backoff.Attempt()), slog.Any("cause", cause))
	s.s.emit(Restarting{Subject: s.s.subject(), Attempt: s.backoff.Attempt(), Delay: delay, Cause: cause})
	s.arm(delay)
}

// escalate hands err to the parent supervisor.
func (s *supervisor) escalate(c actor.Context, err error) {
	s.state = stateEscalated
	s.disarm()
	s.stopWatch()
	s.s.logAttrs(slog.LevelError, "escalating to the parent", 0, slog.Any("error", err))
	s.s.emit(Escalated{Subject: s.s.subject(), Restarts: len(s.restarts), Err: err})
	if sup, ok := c.(actor.Supervisor); ok {
		sup.EscalateFailure(err, c.Message())
		return
	}
	// A context decorator hides the escalation: stop instead, so that the
	// parent at least sees this supervisor terminate.
	c.Stop(c.Self())
}

// shutdown stops everything the supervisor started: on Stopping, and on
// Restarting by its parent.
func (s *supervisor) shutdown(c actor.Context) {
	s.disarm()
	s.stopWatch()
	if t := s.term; s.state == stateLeading && t != nil {
		s.term = nil
		t.cancel(ErrShutdown)
		budget := s.stopBudget(t)
		if t.work.stop(c, budget, true) {
			s.release(c, t, true)
		} else {
			s.stuckWorkload(t, budget)
			t.hold.MarkReleased() // no token and no renewal for a stuck workload; protoactor stops the watchdog
			s.s.logAttrs(slog.LevelWarn, "lease not released; it expires at the store", t.token,
				slog.Any("error", ErrWorkloadStuck))
			s.s.emit(NotReleased{Subject: s.s.subject(), Token: t.token, Err: ErrWorkloadStuck})
		}
	}
	s.state = stateStopped
}

// startWatch opens the store's watch, if it has one, and forwards its
// events to the supervisor from a goroutine that ends with the watch.
func (s *supervisor) startWatch() {
	w, ok := s.s.cfg.Store.(lease.Watcher)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := w.Watch(ctx, s.s.cfg.Lease.LeaseID)
	if err != nil {
		cancel()
		s.s.logAttrs(slog.LevelDebug, "no watch; polling only", 0, slog.Any("error", err))
		return
	}
	s.watchGen++
	gen, self, root := s.watchGen, s.self, s.system.Root
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range ch {
			root.Send(self, watchEvent{gen: gen, ev: ev})
		}
		root.Send(self, watchEnded{gen: gen})
	}()
	s.watch = &standbyWatch{cancel: cancel, done: done}
}

// stopWatch closes the watch and waits for its goroutine.
func (s *supervisor) stopWatch() {
	if s.watch == nil {
		return
	}
	s.watch.cancel()
	<-s.watch.done
	s.watch = nil
}
