package supervision

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// State is the state of a supervisor or child. The zero value is
// StateStopped.
type State uint8

const (
	// StateStopped: not running. A transient child after a normal exit, a
	// child stopped with its supervisor, a tree that is not running.
	StateStopped State = iota
	// StateStarting: being started; its Started is being processed.
	StateStarting
	// StateRunning: running.
	StateRunning
	// StateBackoff: exited, and waiting for its restart (see NextRestart).
	StateBackoff
	// StateStopping: being stopped.
	StateStopping
	// StateFailed: a supervisor that escalated a failure to its parent.
	StateFailed
)

var stateNames = [...]string{"stopped", "starting", "running", "backoff", "stopping", "failed"}

func (s State) String() string { return enumString(stateNames[:], int(s), "State") }

// MarshalText makes a State readable in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Snapshot is the state of a supervisor or child at one moment, with its
// children for a supervisor. Take one with Tree.Snapshot; it never waits
// for a supervisor. It marshals to JSON, and String prints it as a tree.
type Snapshot struct {
	Name     string
	Path     string // names from the root, joined with '/'
	Kind     Kind
	Strategy Strategy    // for supervisors
	Restart  RestartType // for children
	State    State

	// PID is the current incarnation's PID (nil when it is not running).
	// Send to it directly: the supervisor is not on the message path.
	PID *actor.PID

	Incarnation uint64 // incarnations started so far
	Restarts    int    // restarts so far

	LastFailure   error     // why the child last exited abnormally
	LastFailureAt time.Time // when
	NextRestart   time.Time // when a child in StateBackoff restarts

	Children []Snapshot // for supervisors, in start order

	Time          time.Time // when the snapshot was taken (root only)
	DroppedEvents uint64    // events dropped so far (root only)
}

type snapshotJSON struct {
	Name          string      `json:"name"`
	Path          string      `json:"path"`
	Kind          Kind        `json:"kind"`
	Strategy      *Strategy   `json:"strategy,omitempty"`
	Restart       RestartType `json:"restart"`
	State         State       `json:"state"`
	PID           string      `json:"pid,omitempty"`
	Incarnation   uint64      `json:"incarnation"`
	Restarts      int         `json:"restarts"`
	LastFailure   string      `json:"last_failure,omitempty"`
	LastFailureAt time.Time   `json:"last_failure_at,omitzero"`
	NextRestart   time.Time   `json:"next_restart,omitzero"`
	Children      []Snapshot  `json:"children,omitempty"`
	Time          time.Time   `json:"time,omitzero"`
	DroppedEvents uint64      `json:"dropped_events,omitempty"`
}

// MarshalJSON encodes the snapshot with lower-case keys, enums and errors
// as strings, the PID as its id, and zero times left out.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	j := snapshotJSON{
		Name: s.Name, Path: s.Path, Kind: s.Kind, Restart: s.Restart, State: s.State,
		Incarnation: s.Incarnation, Restarts: s.Restarts,
		LastFailureAt: s.LastFailureAt, NextRestart: s.NextRestart,
		Children: s.Children, Time: s.Time, DroppedEvents: s.DroppedEvents,
	}
	if s.Kind == KindSupervisor {
		j.Strategy = &s.Strategy
	}
	if s.PID != nil {
		j.PID = s.PID.Id
	}
	if s.LastFailure != nil {
		j.LastFailure = s.LastFailure.Error()
	}
	return json.Marshal(j)
}

// String prints the snapshot as a text tree, one line per node:
//
//	app (supervisor, one-for-one) running pid=app
//	├── db (actor, permanent) running pid=app/db incarnation=1
//	└── workers (supervisor, rest-for-one, permanent) running pid=app/workers incarnation=1
//	    └── w1 (func, transient) backoff incarnation=2 restarts=1 next restart in 200ms failed: boom
//
// Times are shown relative to the snapshot's Time.
func (s Snapshot) String() string {
	var b strings.Builder
	s.write(&b, "", "", s.Time)
	return b.String()
}

func (s *Snapshot) write(b *strings.Builder, first, rest string, now time.Time) {
	b.WriteString(first)
	b.WriteString(s.Name)
	b.WriteString(" (")
	b.WriteString(s.Kind.String())
	if s.Kind == KindSupervisor {
		b.WriteString(", " + s.Strategy.String())
	}
	if s.Path != s.Name { // not the root
		b.WriteString(", " + s.Restart.String())
	}
	b.WriteString(") " + s.State.String())
	if s.PID != nil {
		b.WriteString(" pid=" + s.PID.Id)
	}
	if s.Incarnation > 0 {
		fmt.Fprintf(b, " incarnation=%d", s.Incarnation)
	}
	if s.Restarts > 0 {
		fmt.Fprintf(b, " restarts=%d", s.Restarts)
	}
	if !s.NextRestart.IsZero() {
		if now.IsZero() {
			fmt.Fprintf(b, " next restart at %s", s.NextRestart.Format(time.RFC3339Nano))
		} else {
			fmt.Fprintf(b, " next restart in %v", s.NextRestart.Sub(now).Round(time.Millisecond))
		}
	}
	if s.LastFailure != nil {
		if !now.IsZero() && !s.LastFailureAt.IsZero() {
			fmt.Fprintf(b, " failed %v ago", now.Sub(s.LastFailureAt))
		} else {
			b.WriteString(" failed")
		}
		b.WriteString(": " + firstLine(s.LastFailure.Error()))
	}
	if s.DroppedEvents > 0 {
		fmt.Fprintf(b, " dropped-events=%d", s.DroppedEvents)
	}
	b.WriteByte('\n')
	for i := range s.Children {
		if i == len(s.Children)-1 {
			s.Children[i].write(b, rest+"└── ", rest+"    ", now)
		} else {
			s.Children[i].write(b, rest+"├── ", rest+"│   ", now)
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// Snapshot returns the state of the whole tree. It reads what each
// supervisor last published and never waits for one, so it can be taken
// while supervisors are busy restarting, and from inside a child.
func (t *Tree) Snapshot() Snapshot {
	s := t.root.snapshot()
	s.Time = time.Now()
	s.DroppedEvents = t.dropped.Load()
	return s
}

// liveNode is where a supervisor publishes its state for snapshots: an
// immutable view, replaced on every change.
type liveNode struct{ v atomic.Pointer[nodeView] }

type nodeView struct {
	self Snapshot // without Children
	kids []kidView
}

type kidView struct {
	snap Snapshot  // without Children
	sub  *liveNode // a nested tree's node, or nil
}

func (n *liveNode) store(v *nodeView) { n.v.Store(v) }

func (n *liveNode) snapshot() Snapshot {
	v := n.v.Load()
	s := v.self
	s.Children = make([]Snapshot, len(v.kids))
	for i, k := range v.kids {
		s.Children[i] = k.snap
		if k.sub != nil {
			s.Children[i].Children = k.sub.snapshot().Children
		}
	}
	return s
}

// specView is the view of a supervisor that has not started: its spec.
func specView(spec *Spec, name, path string) *nodeView {
	v := &nodeView{self: Snapshot{Name: name, Path: path, Kind: KindSupervisor, Strategy: spec.Strategy}}
	for _, cs := range spec.Children {
		k := kidView{snap: Snapshot{
			Name: cs.Name, Path: path + "/" + cs.Name, Kind: cs.kind(), Restart: cs.Restart,
		}}
		if cs.Tree != nil {
			k.snap.Strategy = cs.Tree.Strategy
			k.sub = &liveNode{}
			k.sub.store(specView(cs.Tree, cs.Name, k.snap.Path))
		}
		v.kids = append(v.kids, k)
	}
	return v
}

// publish replaces the supervisor's published view.
func (s *supervisor) publish() {
	v := &nodeView{self: Snapshot{
		Name: nameOf(s.cfg.path), Path: s.cfg.path, Kind: KindSupervisor,
		Strategy: s.cfg.spec.Strategy, State: s.state, PID: s.self,
	}}
	v.kids = make([]kidView, len(s.children))
	for i, c := range s.children {
		k := Snapshot{
			Name: c.spec.Name, Path: c.path, Kind: c.kind, Restart: c.spec.Restart,
			State: c.state, PID: c.pid, Incarnation: c.incarnation, Restarts: c.restarts,
			LastFailure: c.failure.err, LastFailureAt: c.failure.at,
		}
		if c.state == StateBackoff {
			k.NextRestart = c.next.dueAt
		}
		if c.spec.Tree != nil {
			k.Strategy = c.spec.Tree.Strategy
		}
		v.kids[i] = kidView{snap: k, sub: c.node}
	}
	s.cfg.node.store(v)
}

func nameOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}
