package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Board is state that waiters can wait on: embed it, hold Mu while reading
// or changing the state, and call Touch after every change.
type Board struct {
	Mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
}

// Touch wakes every waiter. Mu must be held.
func (b *Board) Touch() {
	if b.changed != nil {
		close(b.changed)
	}
	b.changed = make(chan struct{})
}

// WaitFor waits until cond, evaluated with Mu held, holds, at most timeout.
// It returns an error naming what when it does not.
func (b *Board) WaitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		b.Mu.Lock()
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		ok, ch := cond(), b.changed
		b.Mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-t.C:
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		}
	}
}

// ChildContext is the context of a process started by an orchestrator: it
// ends on SIGTERM or SIGINT, or when standard input reaches EOF because the
// orchestrator has gone.
func ChildContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	return ctx, stop
}
