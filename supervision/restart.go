package supervision

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/backoff"
)

func (b Backoff) policy() backoff.Policy {
	return backoff.Policy{
		Base:       b.Base,
		Cap:        b.Cap,
		Multiplier: b.Multiplier,
		Jitter:     backoff.Jitter(b.Jitter),
		ResetAfter: b.ResetAfter,
	}
}

// onExit handles a child incarnation that exited by itself: reason is nil
// for a normal exit (it stopped) and the failure for an abnormal one (it
// escalated; it is suspended, not yet stopped). Messages about incarnations
// the supervisor has already dealt with are ignored.
func (s *supervisor) onExit(pid *actor.PID, reason error) {
	c := s.byPID(pid)
	if c == nil || c.state != StateRunning || s.state != StateRunning {
		if reason == nil && c == nil {
			s.link.forget(pid)
		}
		return
	}
	s.inst.publish(ChildExited{
		Time: time.Now(), Supervisor: s.cfg.path, Child: c.spec.Name,
		PID: pid, Incarnation: c.incarnation, Normal: reason == nil, Reason: reason,
	})
	if reason == nil {
		s.link.forget(pid)
	} else {
		c.failure.record(reason)
		c.state = StateStopping
		s.publish()
		s.stopIncarnation(c, pid, c.incarnation)
	}
	c.pid = nil
	c.state = StateStopped
	s.afterExit(c, reason)
}

// afterExit applies c's restart type to an exit.
func (s *supervisor) afterExit(c *child, reason error) {
	switch {
	case c.spec.Restart == Temporary:
		s.remove(c)
		s.publish()
	case doNotRestart(reason):
		c.next.held = true
		s.publish()
	case c.spec.Restart == Transient && reason == nil:
		s.publish()
	default:
		s.restart(c, reason)
	}
}

// doNotRestart reports whether a started child's exit reason asks for no
// restart. A failure to start (a *StartError, a nested tree's
// *IntensityError) is the supervisor's own reason, not the child's.
func doNotRestart(reason error) bool {
	switch reason.(type) {
	case nil, *StartError, *IntensityError:
		return false
	}
	return errors.Is(reason, ErrDoNotRestart)
}

// restart counts a restart against the intensity, stops the rest of c's
// group as the strategy says, and schedules the group's restart after c's
// backoff delay.
func (s *supervisor) restart(c *child, reason error) {
	now := time.Now()
	if !s.allowRestart(now) {
		spec := s.cfg.spec
		s.inst.publish(IntensityExceeded{
			Time: now, Supervisor: s.cfg.path, Child: c.spec.Name, Reason: reason,
			Intensity: spec.Intensity, Period: spec.Period,
		})
		s.fail(&IntensityError{
			Supervisor: s.cfg.path, Child: c.spec.Name, Reason: reason,
			Intensity: spec.Intensity, Period: spec.Period,
		})
		return
	}
	group := s.group(c)
	for i := len(group) - 1; i >= 0; i-- {
		if group[i] != c {
			s.stopChild(group[i])
		}
	}
	delay, attempt := c.nextDelay(now)
	due := now.Add(delay)
	why := reason
	if why == nil {
		why = fmt.Errorf("child %q exited normally", c.spec.Name)
	}
	for _, g := range group {
		if g != c && g.spec.Restart == Temporary {
			s.remove(g) // temporary children are never restarted
			continue
		}
		g.state = StateBackoff
		if g != c {
			g.next.schedule(due, fmt.Errorf("sibling %q: %w", c.spec.Name, why))
		} else {
			g.next.schedule(due, why)
		}
	}
	s.publish()
	s.inst.publish(BackoffScheduled{
		Time: now, Supervisor: s.cfg.path, Child: c.spec.Name,
		Attempt: attempt, Delay: delay, Reason: reason,
	})
	if delay <= 0 && !s.inStartDue {
		s.startDue()
		return
	}
	s.armTimer()
}

// nextDelay returns the delay before c's next restart and how many
// consecutive failures it has had.
func (c *child) nextDelay(now time.Time) (time.Duration, int) {
	return c.next.delay(now, c.spec.Backoff.Immediate)
}

// allowRestart records a restart at now and reports whether it is within
// the intensity.
func (s *supervisor) allowRestart(now time.Time) bool {
	spec := s.cfg.spec
	if spec.Intensity < 0 {
		return false
	}
	kept := s.restarts[:0]
	for _, t := range s.restarts {
		if now.Sub(t) < spec.Period {
			kept = append(kept, t)
		}
	}
	s.restarts = append(kept, now)
	return len(s.restarts) <= spec.Intensity
}

// group returns the children to restart with c, in start order. As in
// OTP, that is every child of the group, running or not, except those that
// exited with ErrDoNotRestart: a transient child that exited normally is
// started again with its group. (Temporary children are removed when they
// exit, so only running ones are in the group; they are stopped, and
// removed instead of restarted.)
func (s *supervisor) group(c *child) []*child {
	if s.cfg.spec.Strategy == OneForOne {
		return []*child{c}
	}
	var out []*child
	seen := false
	for _, x := range s.children {
		if x == c {
			seen = true
			out = append(out, x)
			continue
		}
		if s.cfg.spec.Strategy == RestForOne && !seen {
			continue
		}
		if !x.next.held {
			out = append(out, x)
		}
	}
	return out
}

// startDue starts, in start order, every child whose restart is due, then
// arms the timer for the next one.
func (s *supervisor) startDue() {
	s.inStartDue = true
	defer func() { s.inStartDue = false }()
	for s.state == StateRunning {
		c := s.firstDue(time.Now())
		if c == nil {
			break
		}
		s.restartNow(c)
	}
	if s.state == StateRunning {
		s.armTimer()
	}
}

func (s *supervisor) firstDue(now time.Time) *child {
	for _, c := range s.children {
		if c.state == StateBackoff && !c.next.dueAt.After(now) {
			return c
		}
	}
	return nil
}

// restartNow starts a new incarnation of c. A start that fails is an
// abnormal exit of c.
func (s *supervisor) restartNow(c *child) {
	why := c.next.take()
	if err := s.startChild(c); err != nil {
		c.failure.record(err)
		s.inst.publish(ChildExited{
			Time: time.Now(), Supervisor: s.cfg.path, Child: c.spec.Name,
			Incarnation: c.incarnation + 1, Reason: err,
		})
		s.afterExit(c, err)
		return
	}
	c.restarts++
	s.publish()
	s.inst.publish(ChildRestarted{
		Time: time.Now(), Supervisor: s.cfg.path, Child: c.spec.Name, PID: c.pid,
		Incarnation: c.incarnation, Restarts: c.restarts, Reason: why,
	})
}

// armTimer makes the backoff timer fire at the earliest due restart. A
// timer it replaces, or one that fires after the restart it was for was
// cancelled or done, carries an old epoch and is ignored.
func (s *supervisor) armTimer() {
	var due time.Time
	for _, c := range s.children {
		if c.state == StateBackoff && (due.IsZero() || c.next.dueAt.Before(due)) {
			due = c.next.dueAt
		}
	}
	if due.IsZero() {
		s.cancelTimer()
		return
	}
	if s.timer != nil && s.timerDue.Equal(due) {
		return
	}
	s.cancelTimer()
	epoch, self, root := s.timerEpoch, s.self, s.sys.Root
	s.timerDue = due
	s.timer = time.AfterFunc(time.Until(due), func() { root.Send(self, restartDue{epoch}) })
}

func (s *supervisor) cancelTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.timerEpoch++
}
