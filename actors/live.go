package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/lease"
)

// liveWork is the set of workloads a LeaseSupervisor started that may still
// be running. It belongs to the LeaseSupervisor, not to one incarnation of
// its actor, so that a restarted actor (or a second actor spawned from the
// same Props) knows about a stuck workload of an earlier one: no term
// starts while the set is not empty.
type liveWork struct {
	mu      sync.Mutex
	terms   map[uint64]liveTerm
	waiters map[uint64]func() // called once when the set becomes empty
	nextW   uint64
}

type liveTerm struct {
	token lease.Token
	since time.Time
}

// add records the workload of term seq as running.
func (w *liveWork) add(seq uint64, token lease.Token) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.terms == nil {
		w.terms = make(map[uint64]liveTerm)
	}
	w.terms[seq] = liveTerm{token: token, since: time.Now()}
}

// remove records that the workload of term seq has stopped.
func (w *liveWork) remove(seq uint64) {
	w.mu.Lock()
	if _, ok := w.terms[seq]; !ok {
		w.mu.Unlock()
		return
	}
	delete(w.terms, seq)
	var wake []func()
	if len(w.terms) == 0 {
		for _, fn := range w.waiters {
			wake = append(wake, fn)
		}
		w.waiters = nil
	}
	w.mu.Unlock()
	for _, fn := range wake {
		fn()
	}
}

// busy reports how many workloads may still run.
func (w *liveWork) busy() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.terms)
}

// onDrained calls fn once, from the goroutine that removes the last
// workload, when none runs any more; at once (and ok is false) if none runs
// now. cancel forgets fn.
func (w *liveWork) onDrained(fn func()) (cancel func(), ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.terms) == 0 {
		return func() {}, false
	}
	if w.waiters == nil {
		w.waiters = make(map[uint64]func())
	}
	w.nextW++
	id := w.nextW
	w.waiters[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.waiters, id)
	}, true
}

// tokens returns the tokens of the workloads that may still run.
func (w *liveWork) tokens() []lease.Token {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]lease.Token, 0, len(w.terms))
	for _, t := range w.terms {
		out = append(out, t.token)
	}
	return out
}

// deathWatch is a process of the actor system that watches one actor and
// calls fn once when it has terminated. Unlike a parent's Terminated
// message, it reaches fn whatever happened to the actor that spawned the
// watched one (stopped, restarted).
type deathWatch struct {
	sys  *actor.ActorSystem
	self *actor.PID
	once sync.Once
	fn   func()
}

// watchDeath calls fn once pid has terminated (at once if it is gone).
func watchDeath(sys *actor.ActorSystem, pid *actor.PID, fn func()) {
	d := &deathWatch{sys: sys, fn: fn}
	d.self, _ = sys.ProcessRegistry.Add(d, "$deathwatch"+sys.ProcessRegistry.NextId()) // NextId is unique
	proc, _ := sys.ProcessRegistry.Get(pid)                                            // a dead PID gives dead letters, which answer Terminated
	proc.SendSystemMessage(pid, &actor.Watch{Watcher: d.self})
}

func (d *deathWatch) SendUserMessage(*actor.PID, any) {}

func (d *deathWatch) SendSystemMessage(_ *actor.PID, message any) {
	if _, ok := message.(*actor.Terminated); ok {
		d.once.Do(func() {
			d.sys.ProcessRegistry.Remove(d.self)
			d.fn()
		})
	}
}

func (d *deathWatch) Stop(*actor.PID) {}
