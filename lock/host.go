package lock

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/internal/leasehold"
)

// host is where a Locker's watchdogs run: the actor system and the keeper,
// and the pacer of their first renewals.
// New starts them in the background (an actor system of our own costs
// milliseconds); started is closed once they are there.
type host struct {
	started chan struct{}
	sys     *actor.ActorSystem
	own     *actorsys.System // nil when the system was given
	keeper  *actor.PID
	done    chan struct{}   // closed when the keeper actor has stopped
	pacer   leasehold.Pacer // spreads the first renewals of locks taken in a burst
}

// start starts the actor system, unless sys is given, and the keeper.
func (h *host) start(sys *actor.ActorSystem, logger *slog.Logger, keeper *actor.Props) {
	defer close(h.started)
	h.sys = sys
	if h.sys == nil {
		h.own = actorsys.New(logger)
		h.sys = h.own.ActorSystem
	}
	h.keeper = h.sys.Root.SpawnPrefix(keeper, "aster-lock")
}

// send hands msg to the keeper; start must have finished.
func (h *host) send(msg any) { h.sys.Root.Send(h.keeper, msg) }
