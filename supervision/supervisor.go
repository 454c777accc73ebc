package supervision

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/backoff"
)

// supConfig is what a supervisor actor is made from; it outlives the
// supervisor's incarnations.
type supConfig struct {
	tree *Tree
	spec *Spec // normalised
	path string
	node *liveNode // where the supervisor publishes its state
	inst *instance // nil for a root spawned from Props: made at start
}

// supervisor is the actor behind every (sub)tree. All its state is owned by
// its Receive. It blocks while it starts or stops children, each wait
// bounded by the child's start or shutdown time; backoff delays never block
// it (they are timers that send it a restartDue).
type supervisor struct {
	cfg  *supConfig
	root bool
	inst *instance
	ctx  actor.Context // the context of the message being processed
	self *actor.PID
	sys  *actor.ActorSystem
	link *link

	state    State
	children []*child
	restarts []time.Time // restart times within the current period

	timer      *time.Timer // fires restartDue at the earliest due restart
	timerEpoch uint64      // a restartDue with another epoch is stale
	timerDue   time.Time
	inStartDue bool
}

// child is a supervisor's view of one child across its incarnations: what
// it is (from its spec), its current incarnation, the restart it waits for,
// and its last failure.
type child struct {
	spec  ChildSpec // normalised
	kind  Kind
	path  string
	props *actor.Props
	node  *liveNode // a nested tree's published state

	pid         *actor.PID // current incarnation; nil when not running
	incarnation uint64
	state       State
	restarts    int

	next    nextRestart // when and why it starts again
	failure failure     // its last abnormal exit
}

// nextRestart is what a child's next restart depends on.
type nextRestart struct {
	held     bool // it exited with ErrDoNotRestart: no restart until started by hand
	bo       backoff.Backoff
	attempts int // consecutive failures, for Immediate backoffs
	dueAt    time.Time
	why      error // why the pending restart happens
}

// schedule records a restart due at due, for why.
func (n *nextRestart) schedule(due time.Time, why error) { n.dueAt, n.why = due, why }

// take returns why the pending restart happens, and forgets it.
func (n *nextRestart) take() error {
	why := n.why
	n.why = nil
	return why
}

// started records that an incarnation started: a held child is released.
func (n *nextRestart) started(now time.Time) {
	n.held = false
	n.bo.Started(now)
}

// delay returns the delay before the next restart and how many
// consecutive failures there have been: none for an Immediate backoff.
func (n *nextRestart) delay(now time.Time, immediate bool) (time.Duration, int) {
	if immediate {
		n.attempts++
		return 0, n.attempts
	}
	d := n.bo.Failed(now)
	return d, n.bo.Attempt()
}

// failure is a child's last abnormal exit.
type failure struct {
	err error
	at  time.Time
}

// record makes err, now, the last failure.
func (f *failure) record(err error) { f.err, f.at = err, time.Now() }

// restartDue is sent by the backoff timer.
type restartDue struct{ epoch uint64 }

func newSupervisor(cfg *supConfig) *supervisor {
	return &supervisor{cfg: cfg, root: cfg.node == cfg.tree.root}
}

// Receive implements actor.Actor.
func (s *supervisor) Receive(ctx actor.Context) {
	s.ctx = ctx
	defer func() { s.ctx = nil }()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.start()
	case *actor.Stopping, *actor.Restarting:
		s.shutdown()
	case childFailed:
		s.onExit(m.pid, m.reason)
	case childExited:
		s.onExit(m.pid, nil)
	case restartDue:
		if m.epoch == s.timerEpoch && s.state == StateRunning {
			s.startDue() // restarts only children whose due time has come
		}
	case *request:
		s.onRequest(m)
	}
}

func (s *supervisor) start() {
	s.self, s.sys = s.ctx.Self(), s.ctx.ActorSystem()
	s.inst = s.cfg.inst
	if s.inst == nil {
		s.inst = newInstance(s.cfg.tree, s.sys)
	}
	if s.root {
		if err := s.cfg.tree.claim(s.inst); err != nil {
			// Another instance runs and publishes: leave its view alone.
			s.state = StateFailed
			if s.cfg.inst == nil {
				s.inst.finish()
			}
			escalate(s.ctx, &StartError{Path: s.cfg.path, Reason: err})
			return
		}
		s.inst.root.Store(s.self)
	}
	s.link = newLink(s.sys, s.self, s.inst)
	s.state = StateStarting
	for _, cs := range s.cfg.spec.Children {
		s.children = append(s.children, s.newChild(cs))
	}
	s.publish()
	for i, c := range s.children {
		if err := s.startChild(c); err != nil {
			for j := i - 1; j >= 0; j-- {
				s.stopChild(s.children[j])
			}
			s.fail(err)
			return
		}
		s.emitStarted(c)
	}
	s.state = StateRunning
	s.publish()
	if s.root {
		s.cfg.tree.markUp(s.inst)
	}
}

func (s *supervisor) newChild(cs ChildSpec) *child {
	c := &child{
		spec: cs,
		kind: cs.kind(),
		path: s.cfg.path + "/" + cs.Name,
		next: nextRestart{bo: backoff.Backoff{Policy: cs.Backoff.policy()}},
	}
	switch c.kind {
	case KindActor:
		c.props = cs.Props
	case KindFunc:
		fn := cs.Func
		if fn == nil {
			fn = cs.Service.Serve
		}
		c.props = funcProps(fn)
	case KindSupervisor:
		c.node = &liveNode{}
		c.node.store(specView(cs.Tree, cs.Name, c.path))
		cfg := &supConfig{tree: s.cfg.tree, spec: cs.Tree, path: c.path, node: c.node, inst: s.inst}
		c.props = actor.PropsFromProducer(func() actor.Actor { return newSupervisor(cfg) })
	}
	return c
}

// startChild spawns a new incarnation of c and waits, at most its start
// timeout, until it has processed Started. On failure the incarnation is
// stopped and a *StartError returned.
func (s *supervisor) startChild(c *child) error {
	c.state = StateStarting
	s.publish()
	pid, err := s.spawnIncarnation(c)
	if err != nil {
		c.state = StateStopped
		return &StartError{Path: c.path, Reason: err}
	}
	rec := s.link.track(pid)
	timeout := time.NewTimer(c.spec.StartTimeout)
	defer timeout.Stop()
	select {
	case <-rec.ready:
	case <-rec.failed:
	case <-rec.exited:
	case <-timeout.C:
	}
	// Ready wins: a child that failed after it processed Started has
	// started, and its failure is handled as any other.
	switch {
	case closed(rec.ready):
	case closed(rec.failed):
		s.stopIncarnation(c, pid, c.incarnation+1)
		c.state = StateStopped
		var se *StartError
		if reason := rec.failure(); errors.As(reason, &se) {
			return reason
		}
		return &StartError{Path: c.path, Reason: rec.failure()}
	case closed(rec.exited):
		// It stopped itself at once: started, then a normal exit, which
		// its childExited message will report.
	default:
		s.stopIncarnation(c, pid, c.incarnation+1)
		c.state = StateStopped
		return &StartError{Path: c.path, Reason: fmt.Errorf("not started within %v", c.spec.StartTimeout)}
	}
	c.pid = pid
	c.incarnation++
	c.state = StateRunning
	c.next.started(time.Now())
	s.publish()
	return nil
}

// spawnIncarnation spawns a new incarnation of c under its id: the
// supervisor's id, '/', and its name. protoactor-go registers one actor per
// id, and an abandoned incarnation keeps its id until it exits; while it
// does, the new incarnation takes the id with the suffix "#n", n being its
// incarnation number, or the first number above it whose id is free. Names
// contain no '#', so a suffixed id is never another child's.
func (s *supervisor) spawnIncarnation(c *child) (*actor.PID, error) {
	id := s.self.Id + "/" + c.spec.Name
	pid, err := spawnChild(s.sys, s.link, id, c.props)
	// Each id taken is held by a live actor, so this ends.
	for n := c.incarnation + 1; errors.Is(err, actor.ErrNameExists); n++ {
		pid, err = spawnChild(s.sys, s.link, fmt.Sprintf("%s#%d", id, n), c.props)
	}
	return pid, err
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stopIncarnation stops pid and waits, at most c's shutdown time, for it
// to exit. It reports whether it did; if not, the incarnation is abandoned.
func (s *supervisor) stopIncarnation(c *child, pid *actor.PID, incarnation uint64) bool {
	rec := s.link.track(pid)
	stopUnlessExited(s.sys, pid, rec)
	timeout := time.NewTimer(c.spec.Shutdown)
	defer timeout.Stop()
	select {
	case <-rec.exited:
		s.link.forget(pid)
		return true
	case <-timeout.C:
		s.link.abandon(pid, Unstopped{Path: c.path, PID: pid, Timeout: c.spec.Shutdown})
		s.inst.publish(StopTimedOut{
			Time: time.Now(), Supervisor: s.cfg.path, Child: c.spec.Name,
			PID: pid, Incarnation: incarnation, Timeout: c.spec.Shutdown,
		})
		return false
	}
}

// stopChild stops c's running incarnation, if any.
func (s *supervisor) stopChild(c *child) (stopped bool) {
	if c.pid == nil {
		if c.state != StateStopped {
			c.state = StateStopped
			s.publish()
		}
		return true
	}
	pid := c.pid
	c.state = StateStopping
	s.publish()
	stopped = s.stopIncarnation(c, pid, c.incarnation)
	if stopped {
		s.inst.publish(ChildStopped{
			Time: time.Now(), Supervisor: s.cfg.path, Child: c.spec.Name,
			PID: pid, Incarnation: c.incarnation,
		})
	}
	c.pid = nil
	c.state = StateStopped
	s.publish()
	return stopped
}

// shutdown stops every child in reverse order, then the supervisor.
func (s *supervisor) shutdown() {
	if s.link == nil || s.state == StateStopped {
		return
	}
	if s.state != StateFailed {
		s.state = StateStopping
	}
	s.cancelTimer()
	s.publish()
	for i := len(s.children) - 1; i >= 0; i-- {
		s.stopChild(s.children[i])
	}
	if s.state != StateFailed {
		s.state = StateStopped
	}
	s.publish()
	s.link.close()
	if s.root {
		s.inst.finish()
	}
}

// fail stops every child and escalates err to the supervisor's parent.
func (s *supervisor) fail(err error) {
	s.cancelTimer()
	for i := len(s.children) - 1; i >= 0; i-- {
		s.stopChild(s.children[i])
	}
	s.state = StateFailed
	s.publish()
	s.inst.publish(Escalated{Time: time.Now(), Supervisor: s.cfg.path, Reason: err})
	escalate(s.ctx, err)
}

func (s *supervisor) emitStarted(c *child) {
	s.inst.publish(ChildStarted{
		Time: time.Now(), Supervisor: s.cfg.path, Child: c.spec.Name,
		PID: c.pid, Incarnation: c.incarnation,
	})
}

func (s *supervisor) byPID(pid *actor.PID) *child {
	for _, c := range s.children {
		if c.pid == pid {
			return c
		}
	}
	return nil
}

func (s *supervisor) byName(name string) *child {
	for _, c := range s.children {
		if c.spec.Name == name {
			return c
		}
	}
	return nil
}

func (s *supervisor) remove(c *child) {
	for i, x := range s.children {
		if x == c {
			s.children = append(s.children[:i:i], s.children[i+1:]...)
			return
		}
	}
}
