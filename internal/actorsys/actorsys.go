// Package actorsys creates protoactor-go actor systems that behave like a
// library should: quiet unless given a logger, and shut down once.
package actorsys

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// discard is a logger that drops everything.
var discard = slog.New(slog.DiscardHandler)

// Logger returns l, or a logger that discards everything when l is nil.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discard
	}
	return l
}

// System is an actor system whose Shutdown may be called more than once.
type System struct {
	*actor.ActorSystem
	once sync.Once
}

// New returns an actor system that logs protoactor-go's own records to
// logger at most at Warn level (nil discards them), and that sends no
// dead-letter noise.
func New(logger *slog.Logger) *System {
	l := Logger(logger)
	if logger != nil {
		l = slog.New(minLevel{logger.Handler(), slog.LevelWarn}).With("lib", "protoactor")
	}
	sys := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return l }),
		actor.WithDeadLetterRequestLogging(false),
	)
	return &System{ActorSystem: sys}
}

// Shutdown shuts the system down; later calls do nothing.
func (s *System) Shutdown() { s.once.Do(s.ActorSystem.Shutdown) }

// minLevel drops records below a level.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(a), h.level}
}
func (h minLevel) WithGroup(n string) slog.Handler { return minLevel{h.Handler.WithGroup(n), h.level} }

// StopAndWait stops pid and waits at most timeout for it to terminate,
// reporting whether it did. Unlike protoactor's StopFuture (always 10 s), it
// takes the timeout as an argument.
func StopAndWait(sys *actor.ActorSystem, pid *actor.PID, timeout time.Duration) bool {
	f := actor.NewFuture(sys, max(timeout, time.Millisecond))
	proc, _ := sys.ProcessRegistry.Get(pid) // a dead PID gives dead letters, which answer Terminated
	proc.SendSystemMessage(pid, &actor.Watch{Watcher: f.PID()})
	sys.Root.Stop(pid)
	return f.Wait() == nil
}
