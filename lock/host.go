package lock

import (
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/internal/leasehold"
)

// host is where a Locker's watchdogs run: the actor system and the keeper,
// and the pacer of their first renewals.
//
// They are started by the first message to the keeper (the first watchdog
// due, or the session's), not by New: an actor system of our own costs
// milliseconds of CPU, and a Locker whose locks are all released before
// their watchdog is due (a short critical section) never needs one. Close
// closes the host first, so that nothing starts it after.
type host struct {
	mu     sync.Mutex
	state  hostState
	sys    *actor.ActorSystem
	own    *actorsys.System // nil when the system was given
	keeper *actor.PID
	done   chan struct{}   // closed when the keeper actor has stopped
	pacer  leasehold.Pacer // spreads the first renewals of locks taken in a burst
	// starting counts the goroutines starting the host ahead of need
	// (Locker.startHost).
	starting sync.WaitGroup
}

// hostState is where a host is in its life. The zero value is a host that
// has not started.
type hostState uint8

const (
	hostIdle   hostState = iota // not started, and never will be once closed
	hostUp                      // the system and the keeper are running
	hostClosed                  // closed by Close; up fails from now on
)

// up starts the actor system (unless sys is given) and the keeper, unless
// they are running, and reports whether they are. It reports false once the
// host is closed.
func (h *host) up(sys *actor.ActorSystem, logger *slog.Logger, keeper func() *actor.Props) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch h.state {
	case hostUp:
		return true
	case hostClosed:
		return false
	}
	h.sys = sys
	if h.sys == nil {
		h.own = actorsys.New(logger)
		h.sys = h.own.ActorSystem
	}
	h.keeper = h.sys.Root.SpawnPrefix(keeper(), "aster-lock")
	h.state = hostUp
	return true
}

// idle reports whether the host has neither started nor closed; if so, it
// counts one goroutine about to start it (starting), before close can
// return, so that Close's wait for them never races with the count.
func (h *host) idle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != hostIdle {
		return false
	}
	h.starting.Add(1)
	return true
}

// close makes later calls to up fail, and reports whether the host had
// started (the keeper must then be stopped, and the system shut down).
func (h *host) close() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	wasUp := h.state == hostUp
	h.state = hostClosed
	return wasUp
}

// send hands msg to the keeper; up must have reported true.
func (h *host) send(msg any) { h.sys.Root.Send(h.keeper, msg) }
