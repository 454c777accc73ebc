package lock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// keeper is the parent of a Locker's watchdogs: it starts one per lock
// with a lease of its own and one per session, receives their Poison
// messages and stops them, and poisons the guard (or the session) of a
// watchdog that stopped by itself. It is the lock's counterpart of the
// LeaseSupervisor.
type keeper struct {
	owner   keeperOwner
	done    chan struct{} // closed when the keeper has stopped
	self    *actor.PID
	guards  map[guardKey]keptGuard
	closing bool
	// stopping counts the watchdogs the keeper has stopped whose
	// Terminated has not arrived yet; Close is answered once it is zero,
	// so that stopping the keeper never sends Stop to a dead watchdog.
	stopping  int
	closeWait chan<- []*Guard
}

// guardKey names a held lock: a lease ID and the token of one acquisition.
// The watchdog's actor name is token@leaseID, so that its Terminated
// message names its guard.
type guardKey struct {
	id    string
	token lease.Token
}

type keptGuard struct {
	g        *Guard   // the guard of a lock with a lease of its own, or
	s        *session // the session
	dog      *actor.PID
	stopping bool          // the keeper has stopped it
	stopped  chan struct{} // closed when it has terminated, for a release
}

// Messages to the keeper.
type (
	// spawnWatchdog starts the watchdog of a new guard. Nobody waits for
	// it: the keeper handles its messages in order.
	spawnWatchdog struct {
		g   *Guard
		cfg lease.Config
	}
	// spawnSession starts the watchdog of a new session.
	spawnSession struct{ s *session }
	// extendWatchdog hands an Extend to the watchdog of a guard, or
	// answers it with the guard's end when the watchdog is gone.
	extendWatchdog struct {
		key guardKey
		ext leasehold.Extend
	}
	// closeKeeper refuses new watchdogs from now on, ends every Hold
	// (MarkReleased) and answers the guards.
	closeKeeper struct{ reply chan<- []*Guard }
	// stopWatchdog stops the watchdog of a released guard and closes
	// stopped when it has terminated (at once when there is none).
	stopWatchdog struct {
		key     guardKey
		stopped chan struct{}
	}
)

// keeperOwner is what the keeper asks of its Locker: the Props of a
// watchdog, and what to do when a lock or the session ends because its
// watchdog did not start or stopped by itself.
type keeperOwner interface {
	// watchdogProps returns the Props of a watchdog that renews h with
	// cfg, and reports its events when events is true.
	watchdogProps(h *leasehold.Hold, cfg lease.Config, events bool) *actor.Props
	// watchdogFailed ends the lock of h, whose watchdog could not start.
	watchdogFailed(h *leasehold.Hold, err error)
	// watchdogEnded ends the lock of h, whose watchdog stopped, and gives
	// its key back (when it lapsed) if giveBack.
	watchdogEnded(h *leasehold.Hold, giveBack bool)
	// sessionEnded ends s, and every lock under it, with cause, and gives
	// its key back (when it lapsed) if giveBack.
	sessionEnded(s *session, cause error, giveBack bool)
}

var _ keeperOwner = (*Locker)(nil)

func keeperProps(owner keeperOwner, done chan struct{}) *actor.Props {
	// A watchdog that fails is stopped, never restarted in place: its
	// Terminated message then poisons its guard.
	stop := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	// One keeper for the Locker's life: should protoactor ever restart it
	// (which stops its watchdogs first), the restarted actor still knows
	// the guards, and their watchdogs' Terminated messages poison them.
	k := &keeper{owner: owner, done: done, guards: make(map[guardKey]keptGuard)}
	return actor.PropsFromProducer(func() actor.Actor { return k }, actor.WithSupervisor(stop))
}

// Receive implements actor.Actor.
func (k *keeper) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		k.self = c.Self()
	case spawnWatchdog:
		k.spawn(c, m)
	case spawnSession:
		k.spawnSession(c, m.s)
	case extendWatchdog:
		k.extend(c, m)
	case leasehold.Poison:
		// The watchdog has poisoned the Hold (token reads fail, the guard's
		// context is cancelled) and is idle: stop it.
		// When closing, every watchdog is being stopped already.
		if !k.closing {
			k.stop(c, guardKey{m.LeaseID, m.Token}, nil)
		}
	case stopWatchdog:
		k.stop(c, m.key, m.stopped)
	case *actor.Terminated:
		k.terminated(m.Who)
	case closeKeeper:
		k.close(m)
	case *actor.Stopping:
		k.closing = true // protoactor stops the watchdogs now
	case *actor.Stopped:
		close(k.done)
	}
}

// extend hands an Extend to the watchdog of a guard, or answers it with
// the guard's end when the watchdog is gone or stopping.
func (k *keeper) extend(c actor.Context, m extendWatchdog) {
	if kg, ok := k.guards[m.key]; ok && kg.g != nil && !kg.stopping {
		c.Send(kg.dog, m.ext)
		return
	}
	m.ext.Reply <- leasehold.ExtendResult{Err: lease.ErrLost}
}

// close refuses new watchdogs from now on, marks every Hold released, and
// answers m once no watchdog it stopped is still stopping.
func (k *keeper) close(m closeKeeper) {
	k.closing = true
	for _, kg := range k.guards {
		if kg.g != nil {
			kg.g.hold.MarkReleased()
		}
	}
	k.closeWait = m.reply
	k.answerClose()
}

// spawn starts the watchdog of a guard. One that cannot start (the
// keeper is stopping) poisons the guard: its lease would not be renewed.
func (k *keeper) spawn(c actor.Context, m spawnWatchdog) {
	le := m.g.hold.Lease()
	pid, err := k.start(c, k.owner.watchdogProps(m.g.hold, m.cfg, true), le)
	if err != nil {
		k.owner.watchdogFailed(m.g.hold, err)
		return
	}
	k.guards[guardKey{le.ID, le.Token}] = keptGuard{g: m.g, dog: pid}
}

// spawnSession starts the watchdog of a session. One that cannot start
// poisons the session, and so every lock under it.
func (k *keeper) spawnSession(c actor.Context, s *session) {
	le := s.hold.Lease()
	pid, err := k.start(c, k.owner.watchdogProps(s.hold, s.cfg, false), le)
	if err != nil {
		k.owner.sessionEnded(s, fmt.Errorf("%w: %w", ErrWatchdogStopped, err), false)
		return
	}
	k.guards[guardKey{le.ID, le.Token}] = keptGuard{s: s, dog: pid}
}

// start spawns a watchdog named token@leaseID, unless the keeper is
// stopping.
func (k *keeper) start(c actor.Context, props *actor.Props, le lease.Lease) (*actor.PID, error) {
	if k.closing {
		return nil, lease.ErrClosed
	}
	return c.SpawnNamed(props, strconv.FormatUint(uint64(le.Token), 10)+"@"+le.ID)
}

// terminated forgets the guard of a watchdog that stopped, and poisons it
// if it was still held: its lease is no longer renewed.
func (k *keeper) terminated(who *actor.PID) {
	key, ok := parseWatchdogID(who.Id, k.self.Id)
	if !ok {
		return
	}
	kg, ok := k.guards[key]
	if !ok || !kg.dog.Equal(who) {
		return
	}
	delete(k.guards, key)
	if kg.stopped != nil {
		close(kg.stopped)
	}
	if kg.stopping {
		k.stopping--
		k.answerClose()
	}
	if kg.s != nil {
		// A session's watchdog stops after its poison, or by itself: either
		// way, every lock under it is lost. (Close ends the session before
		// it stops the keeper: then there is nothing left to end.) Its key
		// is given back with the locks under it.
		k.owner.sessionEnded(kg.s, ErrWatchdogStopped, !k.closing)
		return
	}
	// Its watchdog has stopped: no renewal can move the revision.
	k.owner.watchdogEnded(kg.g.hold, !k.closing)
}

// stop stops the watchdog of key, once, and closes stopped (if not nil)
// when it has terminated. All stops of single watchdogs go through the
// keeper, so that it knows which children are stopping and never sends Stop
// to a watchdog that is gone (a dead letter).
func (k *keeper) stop(c actor.Context, key guardKey, stopped chan struct{}) {
	kg, ok := k.guards[key]
	if !ok {
		if stopped != nil {
			close(stopped)
		}
		return
	}
	if stopped != nil {
		if kg.stopped != nil {
			close(stopped) // cannot happen: a guard releases once at a time
		} else {
			kg.stopped = stopped
		}
	}
	if !kg.stopping {
		c.Stop(kg.dog)
		kg.stopping = true
		k.stopping++
	}
	k.guards[key] = kg
}

// answerClose answers a pending closeKeeper with the guards still held,
// once no watchdog stopped by the keeper is still stopping.
func (k *keeper) answerClose() {
	if k.closeWait == nil || k.stopping > 0 {
		return
	}
	out := make([]*Guard, 0, len(k.guards))
	for _, kg := range k.guards {
		if kg.g != nil {
			out = append(out, kg.g)
		}
	}
	k.closeWait <- out
	k.closeWait = nil
}

// parseWatchdogID reads the guard key from a watchdog's actor ID,
// parent/token@leaseID.
func parseWatchdogID(id, parent string) (guardKey, bool) {
	name, ok := strings.CutPrefix(id, parent+"/")
	if !ok {
		return guardKey{}, false
	}
	token, leaseID, ok := strings.Cut(name, "@")
	if !ok {
		return guardKey{}, false
	}
	n, err := strconv.ParseUint(token, 10, 64)
	if err != nil {
		return guardKey{}, false
	}
	return guardKey{leaseID, lease.Token(n)}, true
}

// watchdogProps implements keeperOwner.
func (l *Locker) watchdogProps(h *leasehold.Hold, cfg lease.Config, events bool) *actor.Props {
	var report func(leasehold.Report)
	if events && l.cfg.OnEvent != nil {
		report = l.report
	}
	return leasehold.PacedWatchdogProps(l.store, h, cfg, l.cfg.Logger, report, &l.host.pacer)
}

// watchdogFailed implements keeperOwner.
func (l *Locker) watchdogFailed(h *leasehold.Hold, err error) {
	l.unheld() // counted by register
	if h.Poison(lease.LossStoreError, fmt.Errorf("%w: %w", ErrWatchdogStopped, err)) {
		le := h.Lease()
		l.emit(LockPoisoned{Subject: subject(le), Token: le.Token, Reason: lease.LossStoreError, Err: h.Err()})
	}
}

// watchdogEnded implements keeperOwner.
func (l *Locker) watchdogEnded(h *leasehold.Hold, giveBack bool) {
	l.unheld()
	if giveBack {
		l.giveBackLapsed(h)
	}
	if h.Poison(lease.LossStoreError, ErrWatchdogStopped) {
		le := h.Lease()
		l.log.LogAttrs(context.Background(), slog.LevelWarn, "lock: watchdog stopped unexpectedly; lock poisoned",
			slog.String("lease_id", le.ID), slog.String("owner_id", le.OwnerID), slog.Uint64("token", uint64(le.Token)))
		l.emit(LockPoisoned{Subject: subject(le), Token: le.Token, Reason: lease.LossStoreError, Err: h.Err()})
	}
}

// sessionEnded implements keeperOwner.
func (l *Locker) sessionEnded(s *session, cause error, giveBack bool) {
	s.hold.Poison(lease.LossStoreError, cause)
	l.sessionLost(s)
	if giveBack {
		l.giveBackLapsed(s.hold)
	}
}
