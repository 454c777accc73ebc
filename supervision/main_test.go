package supervision_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/supervision"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// boom makes a worker panic.
type boom struct{}

// quit makes a worker stop itself: a normal exit.
type quit struct{}

// journal records what workers do, in order.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	j.lines = append(j.lines, s)
	j.mu.Unlock()
}

func (j *journal) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.lines
	j.lines = nil
	return out
}

// worker returns props of an actor that journals its life, panics on boom
// and stops itself on quit.
func worker(name string, j *journal) *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			if j != nil {
				j.add("start " + name)
			}
		case *actor.Stopping:
			if j != nil {
				j.add("stop " + name)
			}
		case boom:
			panic("boom " + name)
		case quit:
			c.Stop(c.Self())
		}
	})
}

// running is a tree running under Run in a synctest bubble.
type running struct {
	t      *testing.T
	tree   *supervision.Tree
	sys    *actorsys.System
	cancel context.CancelFunc
	done   chan error

	mu          sync.Mutex
	events      []supervision.Event
	deadLetters []string // a quiet library sends none
}

// start runs spec in sys (a new quiet one) until stop is called. Call it in
// a synctest bubble.
func start(t *testing.T, spec supervision.Spec, opts supervision.Options) *running {
	t.Helper()
	r := &running{t: t, sys: actorsys.New(nil), done: make(chan error, 1)}
	r.sys.EventStream.Subscribe(func(m any) {
		if d, ok := m.(*actor.DeadLetterEvent); ok && d.Sender == nil {
			r.mu.Lock()
			r.deadLetters = append(r.deadLetters, fmt.Sprintf("%T to %s", d.Message, d.PID.GetId()))
			r.mu.Unlock()
		}
	})
	opts.System = r.sys.ActorSystem
	opts.Hooks = append(opts.Hooks, r.record)
	tree, err := supervision.New(spec, opts)
	require.NoError(t, err)
	r.tree = tree
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel = cancel
	go func() { r.done <- tree.Run(ctx) }()
	synctest.Wait()
	return r
}

func (r *running) record(e supervision.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// takeEvents returns the events recorded so far, as strings, and forgets them.
func (r *running) takeEvents() []string {
	synctest.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.events))
	for i, e := range r.events {
		out[i] = e.String()
	}
	r.events = nil
	return out
}

// pid returns the PID of the child at path.
func (r *running) pid(path string) *actor.PID {
	r.t.Helper()
	s := r.child(path)
	require.NotNil(r.t, s.PID, "child %s has no PID", path)
	return s.PID
}

// child returns the snapshot of the child at path.
func (r *running) child(path string) supervision.Snapshot {
	r.t.Helper()
	s := r.tree.Snapshot()
	for _, name := range split(path) {
		found := false
		for _, c := range s.Children {
			if c.Name == name {
				s, found = c, true
				break
			}
		}
		require.True(r.t, found, "no child %s", path)
	}
	return s
}

func (r *running) send(path string, msg any) {
	r.sys.Root.Send(r.pid(path), msg)
	synctest.Wait()
}

// stop cancels Run and returns its error, then shuts the system down.
func (r *running) stop() error {
	r.cancel()
	return r.wait()
}

// wait returns Run's error once Run has returned, then shuts the system
// down. It fails the test if the tree sent dead letters: protoactor-go logs
// them, and its dead-letter throttle would outlive the synctest bubble.
func (r *running) wait() error {
	err := <-r.done
	r.sys.Shutdown()
	synctest.Wait()
	r.mu.Lock()
	assert.Empty(r.t, r.deadLetters, "dead letters")
	r.mu.Unlock()
	return err
}

func split(path string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(path); i++ {
		if i == len(path) || path[i] == '/' {
			if i > start {
				out = append(out, path[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// incarnations returns the incarnation of each named child of the root.
func (r *running) incarnations(names ...string) []uint64 {
	out := make([]uint64, len(names))
	for i, n := range names {
		out[i] = r.child(n).Incarnation
	}
	return out
}

var immediate = supervision.Backoff{Immediate: true}

func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}
