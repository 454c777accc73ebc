package shard

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
)

// The parts of the Host actor's state, each with its own small methods.
// Only the Host's actor uses them.

// fleetWatch is the fleet's watch and the view it feeds.
type fleetWatch struct {
	view   *view
	ready  bool               // the first snapshot has arrived
	cancel context.CancelFunc // nil while no watch runs
	gen    uint64             // the current watch's: messages of older ones are dropped
	pause  time.Duration      // before the watch is opened again
}

// current reports whether gen is the current watch's.
func (w *fleetWatch) current(gen uint64) bool { return gen == w.gen }

// stop cancels the watch, if one runs.
func (w *fleetWatch) stop() {
	if w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
}

// backOff returns the pause before the watch is opened again, and doubles
// the next one, up to rewatchMax.
func (w *fleetWatch) backOff() time.Duration {
	d := w.pause
	w.pause = min(2*w.pause, rewatchMax)
	return d
}

// fleetPlan is what the Host places, over whom, and where it last placed
// it.
type fleetPlan struct {
	shards          []string                     // the declared shards, sorted
	placed          map[string]string            // shard -> the OwnerID the placement puts it on
	members         map[string]map[string]string // OwnerID -> Meta, as last reported
	unbalancedSince time.Time                    // zero while balanced
}

// balanced reports whether the view was balanced at the last placement.
func (p *fleetPlan) balanced() bool { return p.unbalancedSince.IsZero() }

// owned counts the shards placed on owner.
func (p *fleetPlan) owned(owner string) int {
	n := 0
	for _, s := range p.shards {
		if p.placed[s] == owner {
			n++
		}
	}
	return n
}

// phase is where a local shard supervisor is.
type phase uint8

const (
	phaseRunning   phase = iota // competing for, or leading, the shard
	phaseResigning              // Resign was called; it stops afterwards
	phaseStopping               // told to stop
)

// local is one shard supervisor (or the membership's) this Host runs.
type local struct {
	shard string // "" for the membership
	sup   *actors.LeaseSupervisor
	pid   *actor.PID
	phase phase
	token lease.Token // the last term's
	err   error       // why the handover was not clean
}

// runs are the supervisors the Host runs, its children, and the shards it
// may not run for a while.
type runs struct {
	byShard     map[string]*local
	byPID       map[string]*local    // by PID id, with the membership
	member      *local               // the membership's, nil while none runs
	quarantined map[string]time.Time // shard ("" for the membership) -> until when
}

func newRuns() runs {
	return runs{byShard: map[string]*local{}, byPID: map[string]*local{}, quarantined: map[string]time.Time{}}
}

// add records a shard's supervisor.
func (r *runs) add(l *local) {
	r.byShard[l.shard] = l
	r.byPID[l.pid.Id] = l
}

// addMember records the membership's supervisor.
func (r *runs) addMember(l *local) {
	r.member = l
	r.byPID[l.pid.Id] = l
}

// remove forgets the supervisor that ran as pid, and returns it (nil when
// none did).
func (r *runs) remove(pid *actor.PID) *local {
	l := r.byPID[pid.Id]
	if l == nil {
		return nil
	}
	delete(r.byPID, pid.Id)
	switch {
	case l == r.member:
		r.member = nil
	case r.byShard[l.shard] == l:
		delete(r.byShard, l.shard)
	}
	return l
}

// idle reports whether no supervisor runs.
func (r *runs) idle() bool { return r.member == nil && len(r.byShard) == 0 }

// supervisors returns the shards' supervisors, for Status.
func (r *runs) supervisors() map[string]*actors.LeaseSupervisor {
	sups := make(map[string]*actors.LeaseSupervisor, len(r.byShard))
	for s, l := range r.byShard {
		sups[s] = l.sup
	}
	return sups
}

// stage is where the Host is in the fleet. The zero value is stageJoining.
type stage uint8

const (
	stageJoining  stage = iota // its membership lease has not been in its view yet
	stageMember                // it has seen itself a member: it keeps itself in the fleet
	stageDraining              // it leaves the fleet (Drain, or the end of Run)
)

// life is where the Host is: its stage, the State it reports, and the
// callers of Drain waiting for it to end.
type life struct {
	stage     stage
	state     State
	since     time.Time      // when it entered state
	drainWait []chan<- error // answered once drained
	drainErrs []error        // the handovers that were not clean
}

// draining reports whether the Host leaves the fleet.
func (l *life) draining() bool { return l.stage == stageDraining }

// next is the State the stage means; StateDrained is final.
func (l *life) next() State {
	switch {
	case l.state == StateDrained:
		return StateDrained
	case l.stage == stageDraining:
		return StateDraining
	case l.stage == stageMember:
		return StateActive
	default:
		return StateJoining
	}
}

// enter makes st the State, and reports whether it was another.
func (l *life) enter(st State) bool {
	if st == l.state {
		return false
	}
	l.state, l.since = st, time.Now()
	return true
}

// tally is what Status counts: the moves, and the last error.
type tally struct {
	movedIn    uint64
	handedOver uint64
	lastErr    error
	lastErrAt  time.Time
}

// failed records err as the last error.
func (t *tally) failed(err error) { t.lastErr, t.lastErrAt = err, time.Now() }

// timers are the Host actor's timers. Each sends the actor a message; they
// are stopped when it stops.
type timers struct {
	settleArmed bool        // settle runs: a placement is due
	settle      *time.Timer // reconcileTick
	sweep       *time.Timer // sweepTick
	rewatch     *time.Timer // rewatchTick
	recheck     *time.Timer // recheckTick: when an unproven member stops counting
	recheckAt   time.Time   // when recheck fires; zero when it does not
}

// stop stops every timer.
func (t *timers) stop() {
	for _, tm := range []*time.Timer{t.sweep, t.settle, t.rewatch, t.recheck} {
		if tm != nil {
			tm.Stop()
		}
	}
}

// after returns t, or a timer made by time.AfterFunc the first time, set
// to call f after d.
func after(t *time.Timer, d time.Duration, f func()) *time.Timer {
	if t == nil {
		return time.AfterFunc(d, f)
	}
	t.Reset(d)
	return t
}
