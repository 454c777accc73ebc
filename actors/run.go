package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
)

// Run runs the supervisor, for programs that do not use actors, in an actor
// system of its own, until ctx is done; it then shuts down gracefully (the
// workload is cancelled with supervision.ErrShutdown and stopped, the lease
// released) and returns when everything it started has stopped. Once it has
// decided to return, no term starts.
//
// A LeaseSupervisor is one candidate: a call of Run while another runs
// returns ErrRunning at once.
//
// It returns nil after a clean shutdown. It returns early, after the same
// shutdown, with the escalated error when the supervisor gives up: one
// matching ErrTooManyRestarts, or a store error that retrying cannot fix
// (lease.ErrInvalid, lease.ErrClosed, or ErrStoreStopped wrapping the
// error of a store that stopped for good: exit, and let the process be
// restarted). An error matching ErrWorkloadStuck
// says that a workload of one of its terms still runs when Run returns: a
// function workload that ignores its context is the one thing Run cannot
// stop. A workload that stopped late, but before Run returned, is not an
// error.
func (s *LeaseSupervisor) Run(ctx context.Context) error {
	sh := s.shared
	if !sh.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer sh.running.Store(false)
	sh.closing.Store(false)

	sys := actorsys.New(s.cfg.Logger)
	defer sys.Shutdown()
	failed := make(chan error, 1)
	host := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &runHost{child: s.Props(), failed: failed}
	}))

	var err error
	select {
	case <-ctx.Done():
	case err = <-failed:
	}
	sh.closing.Store(true) // from now on no term starts
	budget := s.shutdownBudget()
	if !actorsys.StopAndWait(sys.ActorSystem, host, budget) {
		err = errors.Join(err, fmt.Errorf("%w: the lease supervisor did not stop within %v", ErrWorkloadStuck, budget))
	} else if n := sh.live.busy(); n > 0 {
		err = errors.Join(err, fmt.Errorf("%w: %d workloads still run (tokens %v)", ErrWorkloadStuck, n, sh.live.tokens()))
	}
	if !waitGroup(&sh.bg, budget) {
		s.logAttrs(slog.LevelWarn, "a watch of the store did not end within the shutdown budget", 0,
			slog.Duration("budget", budget))
	}
	return err
}

// shutdownBudget bounds a graceful shutdown: an acquisition in flight, the
// workload's stop, the watchdog's stop and the release, with a second of
// slack.
func (s *LeaseSupervisor) shutdownBudget() time.Duration {
	return 2*s.opTimeout() + 2*s.cfg.Lease.EffectiveStopTimeout() + time.Second
}

// waitGroup waits for wg at most timeout and reports whether it finished.
func waitGroup(wg interface{ Wait() }, timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// runHost is the parent of a supervisor started by Run: it receives the
// supervisor's escalation.
type runHost struct {
	child  *actor.Props
	failed chan<- error
}

func (h *runHost) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		c.Spawn(h.child)
	}
}

// HandleFailure implements actor.SupervisorStrategy: an escalation ends Run.
func (h *runHost) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason, _ any) {
	err, ok := reason.(error)
	if !ok {
		err = fmt.Errorf("actors: lease supervisor failed: %v", reason)
	}
	select {
	case h.failed <- err:
	default:
	}
	sup.StopChildren(child)
}
