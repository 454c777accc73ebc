package record

import (
	"context"
	"fmt"

	"github.com/asterforge/aster/lease"
)

var _ lease.SessionStore = (*Store)(nil)

// AcquireUnder implements lease.SessionStore when the inner store does. It
// records an OpAcquire naming the session (Op.Session, Op.SessionTerm) and
// the lease's own term (Op.Term), whose ValidUntil is the session's last
// claimed validity through this Store: a lease under a session is valid
// while its session is, and the session's renewals extend it.
func (s *Store) AcquireUnder(ctx context.Context, c lease.Claim, session lease.Lease) (lease.Acquisition, error) {
	ss, ok := s.inner.(lease.SessionStore)
	if !ok {
		return lease.Acquisition{}, &lease.FieldError{Field: "store",
			Reason: fmt.Sprintf("%T cannot hold leases under a session", s.inner)}
	}
	op := Op{Proc: s.proc, Lease: c.LeaseID, Owner: c.OwnerID, Term: c.Term, Type: OpAcquire, TTL: session.TTL,
		Call: s.now(), Session: session.ID, SessionTerm: session.Term}
	id := s.log.Call(op)
	acq, err := ss.AcquireUnder(ctx, c, session)
	op.Return, op.Result, op.Err = s.now(), result(err), errString(err)
	switch {
	case err == nil && acq.Acquired:
		op.Result, op.OutToken, op.OutRev = ResultOK, uint64(acq.Lease.Token), acq.Lease.Revision
		s.mu.Lock()
		op.ValidUntil = s.valid[session.ID]
		s.mu.Unlock()
	case err == nil:
		op.Result, op.OutOwner, op.OutTerm = ResultStandby, acq.Holder.OwnerID, acq.Holder.Term
	}
	s.log.Return(id, op)
	return acq, err
}

// claimed records the validity claimed for a lease by an acquire or renew.
func (s *Store) claimed(id string, validUntil int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.valid[id] = max(s.valid[id], validUntil)
}
