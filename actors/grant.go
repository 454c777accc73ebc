package actors

import (
	"context"
	"time"

	"github.com/asterforge/aster/internal/leasehold"
	"github.com/asterforge/aster/lease"
)

// Granted is sent to a workload actor given as Props, right after its
// Started message: the token of the lease, the context of its term
// (cancelled with a *lease.LostError when the lease is lost, and with
// supervision.ErrShutdown, ErrResigned or ErrWorkloadExited when the term
// ends otherwise), and the Term, whose Token reads the token on the clock
// before each fenced write.
type Granted struct {
	Token   lease.Token
	Context context.Context
	Term    Term
}

// Term is a workload's read-only view of the lease it runs under: it reads
// the token on the clock and tells when the lease is lost, but cannot end,
// release or extend it. The zero Term belongs to no lease: its Token fails
// with ErrNoTerm.
type Term struct{ h *leasehold.Hold }

// LeaseID returns the ID of the term's lease, "" for the zero Term.
func (t Term) LeaseID() string {
	if t.h == nil {
		return ""
	}
	return t.h.Lease().ID
}

// ID returns the term's identity (lease.Claim.Term), "" for the zero Term.
func (t Term) ID() string {
	if t.h == nil {
		return ""
	}
	return t.h.Lease().Term
}

// Token returns the fencing token while the lease is held and valid,
// checked against the clock: it fails (matching lease.ErrLost) as soon as
// the lease is lost or its validity has passed, even before the workload's
// context is cancelled (as after the process was paused), and with the
// cause once the term has ended. Call it right before every fenced write.
func (t Term) Token() (lease.Token, error) {
	if t.h == nil {
		return 0, ErrNoTerm
	}
	return t.h.Token()
}

// Tenure returns the token and the term's identity, as a lease.Fence takes
// them, checked on the clock as Token is.
func (t Term) Tenure() (lease.Tenure, error) {
	tok, err := t.Token()
	if err != nil {
		return lease.Tenure{}, err
	}
	return lease.Tenure{Token: tok, Term: t.ID()}, nil
}

// Remaining returns how long the lease stays valid without another
// renewal, or 0 once it has ended or expired.
func (t Term) Remaining() time.Duration {
	if t.h == nil {
		return 0
	}
	return t.h.Remaining()
}

// ValidUntil returns until when the term may act, on this process's
// monotonic clock.
func (t Term) ValidUntil() time.Time {
	if t.h == nil {
		return time.Time{}
	}
	return t.h.ValidUntil()
}

// Lost returns a channel closed when the term's lease ends: lost, or given
// up at the end of the term. A nil channel (never closed) for the zero Term.
func (t Term) Lost() <-chan struct{} {
	if t.h == nil {
		return nil
	}
	return t.h.Lost()
}

// Err returns nil while the lease is held, and why it ended afterwards (a
// *lease.LostError when lost, lease.ErrReleased when given up).
func (t Term) Err() error {
	if t.h == nil {
		return ErrNoTerm
	}
	return t.h.Err()
}

type termKey struct{}

// withTerm returns ctx carrying t, for TermFrom and TokenFrom.
func withTerm(ctx context.Context, t Term) context.Context {
	return context.WithValue(ctx, termKey{}, t)
}

// TermFrom returns the Term of the lease that a workload function's context
// belongs to.
func TermFrom(ctx context.Context) (Term, bool) {
	t, ok := ctx.Value(termKey{}).(Term)
	return t, ok && t.h != nil
}

// TokenFrom returns the fencing token of the lease a WorkloadFunc runs
// under, checked against the clock (Term.Token). It fails with ErrNoTerm
// for a context that belongs to no workload.
func TokenFrom(ctx context.Context) (lease.Token, error) {
	t, ok := TermFrom(ctx)
	if !ok {
		return 0, ErrNoTerm
	}
	return t.Token()
}
