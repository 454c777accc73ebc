package actors

import (
	"context"
	"errors"

	"github.com/asterforge/aster/lease"
)

// ErrNoHold is returned by TokenFrom for a context that does not belong to a
// workload of a LeaseSupervisor.
var ErrNoHold = errors.New("actors: the context carries no lease hold")

type holdKey struct{}

// withHold returns ctx carrying h, for TokenFrom and HoldFrom.
func withHold(ctx context.Context, h *Hold) context.Context {
	return context.WithValue(ctx, holdKey{}, h)
}

// HoldFrom returns the Hold of the lease that a workload function's context
// belongs to.
func HoldFrom(ctx context.Context) (*Hold, bool) {
	h, ok := ctx.Value(holdKey{}).(*Hold)
	return h, ok && h != nil
}

// TokenFrom returns the fencing token of the lease a WorkloadFunc runs
// under, checked against the clock: it fails (matching lease.ErrLost) as soon
// as the lease is poisoned or its validity has passed, even when the
// cancellation of ctx has not reached the workload yet, as after the process
// was paused. Call it right before every fenced write, rather than reusing
// the token the function was started with.
func TokenFrom(ctx context.Context) (lease.Token, error) {
	h, ok := HoldFrom(ctx)
	if !ok {
		return 0, ErrNoHold
	}
	return h.Token()
}
