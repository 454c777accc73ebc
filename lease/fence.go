package lease

import (
	"fmt"
	"sync"
)

// Fence guards a downstream resource with fencing tokens: it accepts a write
// only if its token is at least the highest token it has accepted, so that a
// former owner that still believes it holds the lease (paused, partitioned)
// can never overwrite a newer owner's work.
//
// A database applies the same rule in the write itself:
//
//	UPDATE outbox SET ..., fence = $token WHERE id = $id AND fence <= $token
//
// and treats "0 rows updated" as a rejection. The zero Fence is ready to use
// and safe for concurrent use.
type Fence struct {
	mu       sync.Mutex
	highest  Token
	accepted uint64
	rejected uint64
}

// Admit records token and reports whether a write carrying it may proceed:
// nil if token >= the highest admitted so far, or an error matching
// ErrStaleToken.
func (f *Fence) Admit(token Token) error {
	return f.Do(token, nil)
}

// Do runs write while holding the fence, if token is admitted, so that the
// check and the write are atomic with respect to other calls of Do. It
// returns ErrStaleToken (wrapped) without calling write when token is stale,
// and write's error otherwise. A failed write still raises the fence: the
// token was valid, and an older owner must stay locked out.
func (f *Fence) Do(token Token, write func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token < f.highest {
		f.rejected++
		return fmt.Errorf("%w: %d < %d", ErrStaleToken, token, f.highest)
	}
	f.highest = token
	f.accepted++
	if write == nil {
		return nil
	}
	return write()
}

// FenceStats counts what a Fence decided.
type FenceStats struct {
	Highest  Token
	Accepted uint64
	Rejected uint64
}

// Stats returns the highest admitted token and the counts so far.
func (f *Fence) Stats() FenceStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FenceStats{Highest: f.highest, Accepted: f.accepted, Rejected: f.rejected}
}
