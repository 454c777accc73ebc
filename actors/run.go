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

// Run runs the supervisor in an actor system of its own until ctx is done,
// for programs that do not use actors, then shuts it down gracefully (the
// workload cancelled with supervision.ErrShutdown and stopped, the lease
// released). It returns when everything it started has stopped: nil after a
// clean shutdown, ErrRunning at once while another Run is under way, early
// with the escalated error when the supervisor gives up (ErrTooManyRestarts,
// lease.ErrInvalid, lease.ErrClosed, ErrStoreStopped: exit and let the
// process restart), and an error matching ErrWorkloadStuck if a workload
// ignores its context and still runs.
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
