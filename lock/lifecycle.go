package lock

import (
	"context"
	"fmt"
	"sync"
)

// lifecycle is a Locker's life: the Acquire and TryAcquire calls in
// progress, and Close. Its mutex orders every message to the keeper before
// Close's (Locker.sendKeeper).
type lifecycle struct {
	mu        sync.Mutex
	closed    bool
	calls     int           // Acquire and TryAcquire calls in progress
	closing   chan struct{} // closed when Close starts
	callsDone chan struct{} // closed once closed and calls == 0
	closeDone chan struct{} // closed when Close has finished
	closeErr  error         // Close's result, once closeDone is closed

	// bg ends when Close starts; lapses counts the lost locks whose keys
	// are being given back (lapse.go).
	bg       context.Context
	bgCancel context.CancelFunc
	lapses   sync.WaitGroup
}

// init makes lc ready for a new Locker.
func (lc *lifecycle) init() {
	lc.closing = make(chan struct{})
	lc.callsDone = make(chan struct{})
	lc.closeDone = make(chan struct{})
	lc.bg, lc.bgCancel = context.WithCancel(context.Background())
}

// begin counts a call in progress, or reports false after Close.
func (lc *lifecycle) begin() bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		return false
	}
	lc.calls++
	return true
}

// end counts a call that returned.
func (lc *lifecycle) end() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.calls--
	if lc.closed && lc.calls == 0 {
		close(lc.callsDone)
	}
}

// inProgress returns the number of calls in progress.
func (lc *lifecycle) inProgress() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.calls
}

func (lc *lifecycle) isClosed() bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.closed
}

// whileOpen runs f unless Close has started, and reports whether it ran.
// Close cannot start while f runs.
func (lc *lifecycle) whileOpen(f func()) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		return false
	}
	f()
	return true
}

// startClose marks the Locker closed: calls refuse to start, bg ends, and
// closing is closed. It reports false when Close had started already.
func (lc *lifecycle) startClose() bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		return false
	}
	lc.closed = true
	close(lc.closing)
	lc.bgCancel()
	if lc.calls == 0 {
		close(lc.callsDone)
	}
	return true
}

// closeResult returns the result of the Close that started first, once it has
// finished, or an error when ctx ends first.
func (lc *lifecycle) closeResult(ctx context.Context) error {
	select {
	case <-lc.closeDone:
		return lc.closeErr
	case <-ctx.Done():
		return fmt.Errorf("lock: close: %w", ctx.Err())
	}
}
