package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asterforge/aster/lease"
)

// startWatch opens the fleet's watch on a goroutine that forwards its
// events.
func (a *hostActor) startWatch() {
	ctx, cancel := context.WithCancel(context.Background())
	a.watch.gen++
	a.watch.cancel = cancel
	gen, root, self := a.watch.gen, a.sys.Root, a.self
	dir, prefix := a.h.cfg.directory(), a.h.cfg.Prefix+"."
	a.h.bg.Go(func() {
		defer cancel()
		current, changes, err := dir.WatchPrefix(ctx, prefix)
		if err != nil {
			if ctx.Err() == nil {
				root.Send(self, dirEnded{gen: gen, err: err})
			}
			return
		}
		root.Send(self, dirSnapshot{gen: gen, evs: current})
		for ev := range changes {
			batch := []lease.Event{ev}
		more:
			for len(batch) < maxBatch {
				select {
				case ev, ok := <-changes:
					if !ok {
						break more
					}
					batch = append(batch, ev)
				default:
					break more
				}
			}
			root.Send(self, dirEvents{gen: gen, evs: batch})
		}
		if ctx.Err() == nil {
			root.Send(self, dirEnded{gen: gen})
		}
	})
}

// watchEnded opens the watch again after a pause, or gives up when the
// store refuses it for good.
func (a *hostActor) watchEnded(msg dirEnded) {
	if !a.watch.current(msg.gen) {
		return
	}
	a.watch.cancel = nil
	if err := a.h.cfg.storeStopped(msg.err); err != nil && (errors.Is(err, lease.ErrInvalid) || storeGone(err)) {
		a.fail(fmt.Errorf("shard: the store refuses the fleet's watch: %w", err))
		return
	}
	if msg.err != nil {
		a.tally.failed(msg.err)
	}
	pause := a.watch.backOff()
	a.logAttrs(slog.LevelWarn, "the fleet's watch ended; opening it again", slog.Any("error", msg.err),
		slog.Duration("pause", pause))
	a.timers.rewatch = time.AfterFunc(pause, a.send(rewatchTick{gen: a.watch.gen}))
}

// rewatchNow opens the watch again after the pause, unless another was
// opened meanwhile.
func (a *hostActor) rewatchNow(msg rewatchTick) {
	if a.watch.current(msg.gen) && a.watch.cancel == nil {
		a.startWatch()
	}
}
