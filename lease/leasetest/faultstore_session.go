package leasetest

import (
	"context"
	"fmt"

	"github.com/asterforge/aster/lease"
)

var _ lease.SessionStore = (*FaultStore)(nil)

// AcquireUnder implements lease.SessionStore when the inner store does
// (otherwise it fails with an error matching lease.ErrInvalid). It counts
// as an OpAcquire: the faults planned for acquisitions apply to it.
func (s *FaultStore) AcquireUnder(ctx context.Context, c lease.Claim, session lease.Lease) (lease.Acquisition, error) {
	ss, ok := s.inner.(lease.SessionStore)
	if !ok {
		return lease.Acquisition{}, &lease.FieldError{Field: "store",
			Reason: fmt.Sprintf("the inner store %T cannot hold leases under a session", s.inner)}
	}
	ctx, drop, err := s.before(ctx, OpAcquire)
	if err != nil {
		return lease.Acquisition{}, err
	}
	a, err := ss.AcquireUnder(ctx, c, session)
	if drop && err == nil {
		return lease.Acquisition{}, dropped(OpAcquire)
	}
	return a, err
}
