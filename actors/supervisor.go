package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/supervision"
)

// LeaseSupervisor runs a workload on exactly one instance of a fleet: the
// one that holds the lease. Each instance runs one with the same LeaseID and
// its own OwnerID; the package documentation describes its cycle (standby,
// leading, how a term ends). A term ends only when every part of its
// workload has stopped, and no term starts while a workload it started may
// still run.
//
// Use Props to run it in an actor tree, or Run from plain Go, once at a
// time: it is one candidate. Status, Tree and Resign may be called from any
// goroutine.
type LeaseSupervisor struct {
	cfg     SupervisorConfig
	log     *slog.Logger
	metrics *metrics
	rand    *rand.Rand // the restart backoff's source in tests; nil means the global one
	shared  *shared
}

// shared is the state of a LeaseSupervisor that outlives its actor's
// incarnations.
type shared struct {
	running atomic.Bool // a Run is under way
	// closing is set when Run is about to return: from then on no term
	// starts, whatever an actor still does.
	closing atomic.Bool
	live    liveWork
	status  atomic.Pointer[Status]
	hold    atomic.Pointer[leasehold.Hold]   // the current term's, for Status
	tree    atomic.Pointer[supervision.Tree] // the current term's workload tree, for Tree
	// actor is the incarnation that accepts Resign: the first actor
	// spawned from Props that still runs.
	actor atomic.Pointer[actorRef]
	seq   atomic.Uint64  // term sequence numbers, across incarnations
	bg    sync.WaitGroup // watch goroutines
}

type actorRef struct {
	sys *actor.ActorSystem
	pid *actor.PID
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
	s := &LeaseSupervisor{cfg: cfg, log: actorsys.Logger(cfg.Logger), metrics: m, shared: &shared{}}
	s.shared.status.Store(&Status{LeaseID: cfg.Lease.LeaseID, OwnerID: cfg.Lease.OwnerID, Since: time.Now()})
	return s, nil
}

// Props returns the Props of the supervisor actor. A failing Watchdog or
// Workload child is stopped, which ends the term. It escalates
// ErrTooManyRestarts, and store errors that retrying cannot fix
// (lease.ErrInvalid, lease.ErrClosed, ErrStoreStopped), to its parent with
// EscalateFailure, never by panicking. Spawn it once: Status and Resign
// follow the first actor spawned.
func (s *LeaseSupervisor) Props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &supervisor{s: s} })
}

// Status returns the supervisor's state as last reported: leading or
// standby, the term and token, since when, the validity, who else holds
// the lease, and the last error.
func (s *LeaseSupervisor) Status() Status {
	st := *s.shared.status.Load()
	st.Stuck = s.shared.live.busy()
	if st.State == StateLeading || st.State == StateStopping {
		st.Stuck = max(st.Stuck-1, 0) // the current term's workload is not stuck
		if h := s.shared.hold.Load(); h != nil {
			st.ValidUntil = h.ValidUntil()
			if st.State == StateLeading {
				st.RenewedAt = h.RenewedAt()
			}
		}
	}
	return st
}

// Resign steps down without stopping, as a preStop hook does before a
// deploy: if this instance leads, its workload is stopped (its context
// cancelled with ErrResigned) and the lease released; either way it stands
// by without competing for holdOff, then competes again.
//
// It returns nil once the lease has been released, or ErrWorkloadStuck (the
// lease then expires at the store), the release's error, ErrNotRunning, or
// ctx's cause.
func (s *LeaseSupervisor) Resign(ctx context.Context, holdOff time.Duration) error {
	ref := s.shared.actor.Load()
	if ref == nil {
		return ErrNotRunning
	}
	reply := make(chan error, 1)
	ref.sys.Root.Send(ref.pid, resignRequest{holdOff: max(holdOff, 0), reply: reply})
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return fmt.Errorf("actors: resign: %w", context.Cause(ctx))
	}
}

// Tree returns the supervision tree the current term runs as its workload
// (WorkloadTree), for snapshots of what the leader runs; nil when this
// instance does not lead or its workload is not a tree.
func (s *LeaseSupervisor) Tree() *supervision.Tree { return s.shared.tree.Load() }

func (s *LeaseSupervisor) emit(ev Event) {
	s.metrics.observe(ev)
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(ev)
	}
}

func (s *LeaseSupervisor) subject() Subject {
	return Subject{LeaseID: s.cfg.Lease.LeaseID, OwnerID: s.cfg.Lease.OwnerID}
}

// logAttrs logs with the lease_id and owner_id attributes, and the token
// when it is not zero.
func (s *LeaseSupervisor) logAttrs(level slog.Level, msg string, token lease.Token, attrs ...slog.Attr) {
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	base := []slog.Attr{slog.String("lease_id", s.cfg.Lease.LeaseID), slog.String("owner_id", s.cfg.Lease.OwnerID)}
	if token != 0 {
		base = append(base, slog.Uint64("token", uint64(token)))
	}
	s.log.LogAttrs(context.Background(), level, msg, append(base, attrs...)...)
}

// opTimeout bounds one acquire or release call.
func (s *LeaseSupervisor) opTimeout() time.Duration { return leasehold.OpTimeout(s.cfg.Lease) }

// opContext bounds one store call of the supervisor: at most the operation
// timeout, and never past until (a validity, the end of a lapse).
func (s *LeaseSupervisor) opContext(until time.Time) (context.Context, context.CancelFunc) {
	if d := time.Now().Add(s.opTimeout()); d.Before(until) {
		until = d
	}
	return context.WithDeadline(context.Background(), until)
}

// retryDelay is the standby poll interval, jittered uniformly in
// [3/4, 5/4] of StandbyRetryInterval.
func (s *LeaseSupervisor) retryDelay() time.Duration {
	d := s.cfg.Lease.EffectiveStandbyRetryInterval()
	return d*3/4 + rand.N(d/2+1)
}

// supervisor is the LeaseSupervisor actor: one incarnation. Its state is
// its State and a few named parts (parts.go).
type supervisor struct {
	s     *LeaseSupervisor
	me    incarnation
	state State
	since time.Time // when it entered state

	timer    oneTimer
	wake     wakeups
	cand     candidacy
	term     *term       // the current term, leading or stopping
	lapsed   lapsedLease // see lapse
	restarts restartLog  // after failed terms
	acq      acquireRetry
	errs     lastError
	wait     waitFor
	last     lastTerm
}

// termEnd says why a term ends.
type termEnd uint8

const (
	endLost     termEnd = iota + 1 // the Hold was poisoned
	endFailed                      // the workload failed
	endStepDown                    // the workload returned nil or stopped itself
	endResigned                    // Resign
)

// term is one leadership term.
type term struct {
	seq     uint64
	hold    *leasehold.Hold
	token   lease.Token
	ctx     context.Context // the workload's
	cancel  context.CancelCauseFunc
	dog     *actor.PID
	work    workloadInstance
	flags   *stopFlags // read by the workload's stop callback
	failure error      // why the workload actor failed, if it did
	stopped parts      // which of its parts have stopped
	end     ending     // set when it starts ending
}

// Internal messages.
type (
	supervisorTick struct{}
	watchEvent     struct {
		gen uint64
		ev  lease.Event
	}
	watchEnded struct {
		gen uint64
		err error // why it could not be opened, if it could not
	}
	// workloadStopped: every part of term seq's workload has stopped.
	workloadStopped struct{ seq uint64 }
	// liveDrained: no workload of this supervisor runs any more.
	liveDrained   struct{ gen uint64 }
	resignRequest struct {
		holdOff time.Duration
		reply   chan<- error
	}
)

// errWatchdogStopped poisons a Hold whose Watchdog stopped by itself.
var errWatchdogStopped = errors.New("actors: watchdog stopped unexpectedly")

// Receive implements actor.Actor: each message is one call.
func (s *supervisor) Receive(c actor.Context) {
	switch msg := c.Message().(type) {
	case *actor.Started:
		s.started(c)
	case supervisorTick:
		s.tick(c)
	case watchEvent:
		s.watchEvent(c, msg)
	case watchEnded:
		s.watchEnded(msg)
	case liveDrained:
		s.liveDrained(c, msg)
	case leasehold.Poison:
		s.poisoned(c, msg)
	case workloadExited:
		s.workloadExited(c, msg)
	case workloadStopped:
		s.workloadStopped(c, msg.seq)
	case resignRequest:
		s.resign(c, msg)
	case *actor.Terminated:
		s.terminated(c, msg.Who)
	case *actor.Stopping, *actor.Restarting:
		s.shutdown(c)
	case *actor.Stopped:
		s.stopped()
	}
}

// stopped lets Status and Resign follow no incarnation, if they followed
// this one.
func (s *supervisor) stopped() {
	if s.me.registered {
		s.s.shared.actor.Store(nil)
	}
}

// started sets the incarnation up and stands by.
func (s *supervisor) started(c actor.Context) {
	s.me.pid, s.me.sys = c.Self(), c.ActorSystem()
	s.register()
	self, root := s.me.pid, s.me.sys.Root
	s.timer.fire = func() { root.Send(self, supervisorTick{}) }
	s.restarts.backoff.Policy, s.restarts.backoff.Rand = s.s.cfg.Restart.backoff(), s.s.rand
	s.acq.backoff.Policy = acquireBackoff(s.s.cfg.Lease.EffectiveStandbyRetryInterval())
	s.lapsed.retries.Policy, s.lapsed.retries.Rand = resumeRetry, s.s.rand
	s.cand.claimTerm = lease.NewTerm()
	if s.s.shared.closing.Load() {
		s.setState(StateStopped)
		return
	}
	s.standby(c)
}

// register makes this incarnation the one Status and Resign follow, unless
// another one runs.
func (s *supervisor) register() {
	s.me.registered = s.s.shared.actor.CompareAndSwap(nil, &actorRef{sys: s.me.sys, pid: s.me.pid})
	if s.me.registered {
		return
	}
	if ref := s.s.shared.actor.Load(); ref != nil && ref.pid.Equal(s.me.pid) {
		s.me.registered = true // restarted in place
		return
	}
	s.s.logAttrs(slog.LevelWarn, "the LeaseSupervisor's Props were spawned twice: "+
		"two candidates of one instance; Status and Resign follow the first", 0)
}

// watchEnded handles the end of a standby watch: polling goes on, and the
// next attempt opens a new watch.
func (s *supervisor) watchEnded(msg watchEnded) {
	if msg.gen != s.wake.gen {
		return
	}
	s.wake.watch = nil
	if msg.err != nil {
		s.s.logAttrs(slog.LevelDebug, "no watch; polling only", 0, slog.Any("error", msg.err))
	}
}

// liveDrained handles the end of the workloads of earlier terms.
func (s *supervisor) liveDrained(c actor.Context, msg liveDrained) {
	if msg.gen != s.wake.drain {
		return
	}
	s.wake.drain = 0
	if s.state == StateStandby {
		s.s.logAttrs(slog.LevelInfo, "the workloads of earlier terms have stopped", 0)
		s.tryAcquire(c)
	}
}

// poisoned handles the Watchdog's Poison: the current term is lost.
func (s *supervisor) poisoned(c actor.Context, msg leasehold.Poison) {
	if t := s.term; t != nil && s.state == StateLeading && t.token == msg.Token {
		s.endTerm(c, endLost, msg.Err)
	}
}

// HandleFailure implements actor.SupervisorStrategy for the supervisor's
// own children: a failing Watchdog or Workload is stopped, never resumed
// or restarted in place, and its termination ends the term.
func (s *supervisor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason, _ any) {
	if t := s.term; t != nil && child.Equal(t.work.pid) {
		err, ok := reason.(error)
		if !ok {
			err = fmt.Errorf("%v", reason)
		}
		t.failure = fmt.Errorf("actors: workload actor failed: %w", err)
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

// setState records a new state and publishes the status.
func (s *supervisor) setState(st State) {
	if st != s.state {
		s.state, s.since = st, time.Now()
	}
	s.publish()
}

// publish makes the current state what Status returns.
func (s *supervisor) publish() {
	if !s.me.registered {
		return
	}
	st := &Status{
		LeaseID: s.s.cfg.Lease.LeaseID, OwnerID: s.s.cfg.Lease.OwnerID,
		State: s.state, Since: s.since, Term: s.last.id, Token: s.last.token,
		Restarts: len(s.restarts.times), HoldOffUntil: s.cand.holdOff,
	}
	if e := s.errs; e.err != nil {
		st.LastError, st.LastErrorAt, st.LastErrorCleared = e.err.Error(), e.at, e.cleared
	}
	if t := s.term; t != nil {
		st.ValidUntil = t.hold.ValidUntil()
		if s.state == StateLeading {
			st.RenewedAt = t.hold.RenewedAt()
		}
	} else {
		st.Holder = s.cand.holder
	}
	if s.state == StateStandby || s.state == StateRestarting {
		st.RetryAt = s.timer.due
		st.Wait, st.WaitUntil = s.wait.reason, s.wait.until
	}
	if s.lapsed.active() {
		st.ResumableUntil = s.lapsed.until
	}
	s.s.shared.status.Store(st)
}

// waiting records why the supervisor waits, and until when (zero: unknown),
// for Status.
func (s *supervisor) waiting(why WaitReason, until time.Time) {
	s.wait = waitFor{reason: why, until: until}
}

// arm (re)schedules the single timer.
func (s *supervisor) arm(d time.Duration) { s.timer.arm(d) }

func (s *supervisor) disarm() { s.timer.disarm() }

// tick handles the timer, unless the tick is stale.
func (s *supervisor) tick(c actor.Context) {
	if !s.timer.fired() {
		return
	}
	switch s.state {
	case StateStandby:
		s.tryAcquire(c)
	case StateRestarting:
		s.standby(c)
	case StateStopping:
		s.stopOverdue(c)
	}
}

// standby enters standby and tries to acquire at once.
func (s *supervisor) standby(c actor.Context) {
	s.setState(StateStandby)
	s.tryAcquire(c)
}
