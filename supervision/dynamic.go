package supervision

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Paths name supervisors and children relative to the root supervisor:
// "" is the root itself, "workers" its child, "workers/w1" a grandchild.

type op uint8

const (
	opStart op = iota
	opStop
	opRestart
)

// request is a dynamic operation, routed down the tree to the supervisor
// at path and answered on reply (buffered, so that no supervisor blocks).
type request struct {
	op    op
	path  []string // supervisors still to descend into
	name  string   // the child acted on
	spec  ChildSpec
	reply chan result
}

type result struct {
	pid *actor.PID
	err error
}

// StartChild adds spec as the last child of the supervisor at parent ("" for
// the root) and starts it, returning its PID once it has processed Started.
// Like the other dynamic operations, it waits for the supervisor, which may
// be busy starting or stopping children: ctx bounds the wait.
// The child is part of the running tree until stopped with StopChild or, if
// temporary, until it exits; it is not added to the Spec, so it is gone when
// the tree (or the supervisor) is restarted.
func (t *Tree) StartChild(ctx context.Context, parent string, spec ChildSpec) (*actor.PID, error) {
	at := strings.Join(append([]string{t.spec.Name}, split(parent)...), "/")
	if err := errors.Join(validateChild(&spec, at, map[*Spec]bool{}, nil)...); err != nil {
		return nil, err
	}
	r := &request{op: opStart, path: split(parent), name: spec.Name, spec: normaliseChild(spec)}
	return t.call(ctx, r)
}

// StopChild stops the child at path within its shutdown time and removes
// it from its supervisor. If it does not stop in time, it is abandoned and
// the error wraps ErrUnstopped.
func (t *Tree) StopChild(ctx context.Context, path string) error {
	parent, name, err := parentAndName(path)
	if err != nil {
		return err
	}
	_, err = t.call(ctx, &request{op: opStop, path: parent, name: name})
	return err
}

// RestartChild stops the child at path, if it runs, and starts a new
// incarnation at once, cancelling any pending backoff. It does not count
// towards the restart intensity. It also starts a transient child that has
// exited normally.
func (t *Tree) RestartChild(ctx context.Context, path string) (*actor.PID, error) {
	parent, name, err := parentAndName(path)
	if err != nil {
		return nil, err
	}
	return t.call(ctx, &request{op: opRestart, path: parent, name: name})
}

// Children lists the children of the supervisor at parent ("" for the
// root), from a snapshot.
func (t *Tree) Children(parent string) ([]Snapshot, error) {
	s := t.root.snapshot()
	for _, name := range split(parent) {
		var next *Snapshot
		for i := range s.Children {
			if s.Children[i].Name == name {
				next = &s.Children[i]
			}
		}
		if next == nil || next.Kind != KindSupervisor {
			return nil, errUnknown(t.spec.Name + "/" + parent)
		}
		s = *next
	}
	return s.Children, nil
}

// Counts counts a supervisor's children, as OTP's count_children does.
type Counts struct {
	Specs       int // children, running or not
	Active      int // children running
	Supervisors int // nested trees
	Workers     int // actors and funcs
}

// Count counts the children of the supervisor at parent ("" for the root).
func (t *Tree) Count(parent string) (Counts, error) {
	kids, err := t.Children(parent)
	if err != nil {
		return Counts{}, err
	}
	var n Counts
	for _, k := range kids {
		n.Specs++
		if k.State == StateRunning {
			n.Active++
		}
		if k.Kind == KindSupervisor {
			n.Supervisors++
		} else {
			n.Workers++
		}
	}
	return n, nil
}

func (t *Tree) call(ctx context.Context, r *request) (*actor.PID, error) {
	inst := t.current()
	if inst == nil || inst.rootPID() == nil {
		return nil, ErrNotRunning
	}
	r.reply = make(chan result, 1)
	inst.sys.Root.Send(inst.rootPID(), r)
	select {
	case res := <-r.reply:
		return res.pid, res.err
	case <-inst.done:
		return nil, ErrNotRunning
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func split(path string) []string {
	path = strings.Trim(path, "/")
	if path == "" {
		return nil
	}
	return strings.Split(path, "/")
}

func parentAndName(path string) ([]string, string, error) {
	parts := split(path)
	if len(parts) == 0 {
		return nil, "", errUnknown(path)
	}
	return parts[:len(parts)-1], parts[len(parts)-1], nil
}

func errUnknown(path string) error {
	return &pathError{path, ErrUnknownChild}
}

type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.err.Error() + ": " + e.path }
func (e *pathError) Unwrap() error { return e.err }

// onRequest routes a request down the tree, or serves it.
func (s *supervisor) onRequest(r *request) {
	if len(r.path) > 0 {
		c := s.byName(r.path[0])
		switch {
		case c == nil || c.kind != KindSupervisor:
			r.reply <- result{err: errUnknown(s.cfg.path + "/" + strings.Join(r.path, "/"))}
		case c.pid == nil:
			r.reply <- result{err: &pathError{c.path, ErrNotRunning}}
		default:
			r.path = r.path[1:]
			s.sys.Root.Send(c.pid, r)
		}
		return
	}
	if s.state != StateRunning {
		r.reply <- result{err: &pathError{s.cfg.path, ErrNotRunning}}
		return
	}
	c := s.byName(r.name)
	if r.op != opStart && c == nil {
		r.reply <- result{err: errUnknown(s.cfg.path + "/" + r.name)}
		return
	}
	switch r.op {
	case opStart:
		r.reply <- s.startDynamic(c, r.spec)
	case opStop:
		r.reply <- s.stopDynamic(c)
	case opRestart:
		r.reply <- s.restartDynamic(c)
	}
}

func (s *supervisor) startDynamic(existing *child, spec ChildSpec) result {
	if existing != nil {
		return result{err: &pathError{existing.path, ErrChildExists}}
	}
	c := s.newChild(spec)
	s.children = append(s.children, c)
	if err := s.startChild(c); err != nil {
		s.remove(c)
		s.publish()
		return result{err: err}
	}
	s.emitStarted(c)
	return result{pid: c.pid}
}

func (s *supervisor) stopDynamic(c *child) result {
	pid := c.pid
	stopped := s.stopChild(c)
	s.remove(c)
	s.publish()
	s.armTimer()
	if !stopped {
		return result{err: &UnstoppedError{Children: []Unstopped{{Path: c.path, PID: pid, Timeout: c.spec.Shutdown}}}}
	}
	return result{}
}

func (s *supervisor) restartDynamic(c *child) result {
	s.stopChild(c) // also cancels a pending restart: the state leaves backoff
	s.armTimer()
	if err := s.startChild(c); err != nil {
		c.failure.record(err)
		s.afterExit(c, err)
		return result{err: err}
	}
	c.restarts++
	s.publish()
	s.inst.publish(ChildRestarted{
		Time: time.Now(), Supervisor: s.cfg.path, Child: c.spec.Name, PID: c.pid,
		Incarnation: c.incarnation, Restarts: c.restarts, Reason: ErrRestartRequested,
	})
	return result{pid: c.pid}
}
