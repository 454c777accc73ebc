package record_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/chaos/record"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// A lease acquired under a session is recorded as an acquire naming the
// session, with the session's validity.
func TestStoreRecordsAcquireUnder(t *testing.T) {
	dir := t.TempDir()
	log, err := record.Create(filepath.Join(dir, "p.log"))
	require.NoError(t, err)
	mem := leasetest.NewMemStore()
	defer mem.Close()
	cfg := lease.Config{TTL: time.Second, SafetyMargin: 100 * time.Millisecond}
	clock := int64(0)
	now := func() int64 { clock += 10; return clock }
	s := record.NewStore(mem, log, "pa", cfg, now)
	ctx := context.Background()

	sess, err := s.Acquire(ctx, lease.Claim{LeaseID: "session.a", OwnerID: "A", Term: "term-s", TTL: time.Second})
	require.NoError(t, err)
	renewed, err := s.Renew(ctx, sess.Lease)
	require.NoError(t, err)
	acq, err := s.AcquireUnder(ctx, lease.Claim{LeaseID: "l", OwnerID: "A", Term: "term-l", TTL: time.Second}, renewed)
	require.NoError(t, err)
	require.True(t, acq.Acquired)
	standby, err := s.AcquireUnder(ctx, lease.Claim{LeaseID: "l", OwnerID: "B", Term: "term-b", TTL: time.Second}, renewed)
	require.NoError(t, err)
	require.False(t, standby.Acquired)
	require.NoError(t, log.Close())

	h, err := record.ReadLogs(dir)
	require.NoError(t, err)
	require.Len(t, h.Ops, 4)
	op := h.Ops[2]
	assert.Equal(t, record.OpAcquire, op.Type)
	assert.Equal(t, record.ResultOK, op.Result)
	assert.Equal(t, "session.a", op.Session)
	assert.Equal(t, "term-s", op.SessionTerm, "the session's term: the lease is held while that term holds it")
	assert.Equal(t, "term-l", op.Term, "the lease's own term, which its writes carry")
	assert.Equal(t, uint64(acq.Lease.Token), op.OutToken)
	assert.Equal(t, h.Ops[1].ValidUntil, op.ValidUntil, "the session's validity, from its last renewal")
	assert.Equal(t, record.ResultStandby, h.Ops[3].Result)
	assert.Equal(t, "term-l", h.Ops[3].OutTerm, "the holder's term")
}
