package lock

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// keeper is the parent of a Locker's watchdogs: it starts one per held
// lock, receives their Poison messages and stops them, and poisons the
// guard of a watchdog that stopped by itself. It is the lock's counterpart
// of the LeaseSupervisor.
type keeper struct {
	l       *Locker
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
	g        *Guard
	dog      *actor.PID
	stopping bool          // the keeper has stopped it
	stopped  chan struct{} // closed when it has terminated, for a release
}

// Messages to the keeper.
type (
	// spawnWatchdog starts the watchdog of a new guard; the answer is nil,
	// or lease.ErrClosed once the Locker is closing.
	spawnWatchdog struct {
		g     *Guard
		cfg   lease.Config
		reply chan<- error
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

func keeperProps(l *Locker) *actor.Props {
	// A watchdog that fails is stopped, never restarted in place: its
	// Terminated message then poisons its guard.
	stop := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	// One keeper for the Locker's life: should protoactor ever restart it
	// (which stops its watchdogs first), the restarted actor still knows
	// the guards, and their watchdogs' Terminated messages poison them.
	k := &keeper{l: l, guards: make(map[guardKey]keptGuard)}
	return actor.PropsFromProducer(func() actor.Actor { return k }, actor.WithSupervisor(stop))
}

// Receive implements actor.Actor.
func (k *keeper) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		k.self = c.Self()
	case spawnWatchdog:
		m.reply <- k.spawn(c, m)
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
		k.closing = true
		for _, kg := range k.guards {
			kg.g.hold.MarkReleased()
		}
		k.closeWait = m.reply
		k.answerClose()
	case *actor.Stopping:
		k.closing = true // protoactor stops the watchdogs now
	case *actor.Stopped:
		close(k.l.keeperDone)
	}
}

func (k *keeper) spawn(c actor.Context, m spawnWatchdog) error {
	if k.closing {
		return lease.ErrClosed
	}
	le := m.g.hold.Lease()
	var report func(leasehold.Report)
	if k.l.cfg.OnEvent != nil {
		report = k.l.report
	}
	props := leasehold.WatchdogProps(k.l.store, m.g.hold, m.cfg, k.l.cfg.Logger, report)
	pid, err := c.SpawnNamed(props, strconv.FormatUint(uint64(le.Token), 10)+"@"+le.ID)
	if err != nil {
		return err
	}
	m.g.setWatchdog(pid)
	k.guards[guardKey{le.ID, le.Token}] = keptGuard{g: m.g, dog: pid}
	k.l.held.Add(1)
	k.l.metrics.held.Add(context.Background(), 1)
	return nil
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
	k.l.held.Add(-1)
	k.l.metrics.held.Add(context.Background(), -1)
	if kg.stopped != nil {
		close(kg.stopped)
	}
	if kg.stopping {
		k.stopping--
		k.answerClose()
	}
	h := kg.g.hold
	if h.Poison(lease.LossStoreError, ErrWatchdogStopped) {
		le := h.Lease()
		k.l.log.LogAttrs(context.Background(), slog.LevelWarn, "lock: watchdog stopped unexpectedly; lock poisoned",
			slog.String("lease_id", le.ID), slog.String("owner_id", le.OwnerID), slog.Uint64("token", uint64(le.Token)))
		k.l.emit(actors.Poisoned{Subject: subject(le), Token: le.Token, Reason: lease.LossStoreError, Err: h.Err()})
	}
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
		out = append(out, kg.g)
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
