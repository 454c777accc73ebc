package lease

import (
	"fmt"
	"sync"
)

// Tenure names one term of a lease for a downstream system: its fencing
// token and its term identity. Two tenures never share a term; they share a
// token only if the store lost acknowledged writes (see Fence).
type Tenure struct {
	Token Token
	Term  string
}

// Fence guards a downstream resource with fencing tokens: it accepts a write
// only if its token is greater than the highest it has accepted, or equal to
// it and from the same term, so that a former owner that still believes it
// holds the lease (paused, partitioned) can never overwrite a newer owner's
// work.
//
// The term check refuses the second tenure of a token that a store issued
// twice (after it lost acknowledged writes). A database applies the same
// rule in the write itself:
//
//	UPDATE outbox SET ..., fence = $token, fence_term = $term
//	 WHERE id = $id AND (fence < $token OR (fence = $token AND fence_term = $term))
//
// and treats "0 rows updated" as a rejection. The zero Fence is ready to use
// and safe for concurrent use.
type Fence struct {
	mu       sync.Mutex
	highest  Tenure
	accepted uint64
	rejected uint64
}

// Admit records t and reports whether a write carrying it may proceed: nil
// if t's token is above the highest admitted so far, or equal to it with the
// same term; otherwise an error matching ErrStaleToken.
func (f *Fence) Admit(t Tenure) error {
	return f.Do(t, nil)
}

// Do runs write while holding the fence, if t is admitted, so that the check
// and the write are atomic with respect to other calls of Do. It returns
// ErrStaleToken (wrapped) without calling write when t is stale, and write's
// error otherwise. A failed write still raises the fence: the token was
// valid, and an older owner must stay locked out.
func (f *Fence) Do(t Tenure, write func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch h := f.highest; {
	case t.Token < h.Token:
		f.rejected++
		return fmt.Errorf("%w: %d < %d", ErrStaleToken, t.Token, h.Token)
	case t.Token == h.Token && t.Term != h.Term && h.Token != 0:
		f.rejected++
		return fmt.Errorf("%w: token %d was admitted for term %q, not %q (did the store lose acknowledged writes?)",
			ErrStaleToken, t.Token, h.Term, t.Term)
	}
	f.highest = t
	f.accepted++
	if write == nil {
		return nil
	}
	return write()
}

// FenceStats counts what a Fence decided.
type FenceStats struct {
	Highest  Tenure
	Accepted uint64
	Rejected uint64
}

// Stats returns the highest admitted tenure and the counts so far.
func (f *Fence) Stats() FenceStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FenceStats{Highest: f.highest, Accepted: f.accepted, Rejected: f.rejected}
}
