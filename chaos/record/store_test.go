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

func TestStoreRecordsOperations(t *testing.T) {
	dir := t.TempDir()
	log, err := record.Create(filepath.Join(dir, "p.log"))
	require.NoError(t, err)
	mem := leasetest.NewMemStore()
	defer mem.Close()
	cfg := lease.Config{TTL: time.Second, SafetyMargin: 100 * time.Millisecond}
	clock := int64(0)
	now := func() int64 { clock += 10; return clock }
	a := record.NewStore(mem, log, "pa", cfg, now)
	b := record.NewStore(mem, log, "pb", cfg, now)
	ctx := context.Background()

	acq, err := a.Acquire(ctx, lease.Claim{LeaseID: "l", OwnerID: "A", Term: "term-A", TTL: time.Second})
	require.NoError(t, err)
	require.True(t, acq.Acquired)
	sb, err := b.Acquire(ctx, lease.Claim{LeaseID: "l", OwnerID: "B", Term: "term-B", TTL: time.Second})
	require.NoError(t, err)
	require.False(t, sb.Acquired)
	renewed, err := a.Renew(ctx, acq.Lease)
	require.NoError(t, err)
	_, err = a.Renew(ctx, acq.Lease)
	require.ErrorIs(t, err, lease.ErrLost, "the old revision is stale")
	require.NoError(t, a.Release(ctx, renewed))
	require.NoError(t, log.Close())

	h, err := record.ReadLogs(dir)
	require.NoError(t, err)
	require.Len(t, h.Ops, 5)
	want := []struct {
		typ record.OpType
		res record.Result
	}{
		{record.OpAcquire, record.ResultOK}, {record.OpAcquire, record.ResultStandby},
		{record.OpRenew, record.ResultOK}, {record.OpRenew, record.ResultLost}, {record.OpRelease, record.ResultOK},
	}
	for i, w := range want {
		assert.Equal(t, w.typ, h.Ops[i].Type, "op %d", i)
		assert.Equal(t, w.res, h.Ops[i].Result, "op %d", i)
		assert.Less(t, h.Ops[i].Call, h.Ops[i].Return)
	}
	assert.Equal(t, uint64(acq.Lease.Token), h.Ops[0].OutToken)
	assert.Equal(t, h.Ops[0].Call+int64(900*time.Millisecond), h.Ops[0].ValidUntil, "call + TTL - margin")
	assert.Equal(t, "A", h.Ops[1].OutOwner)
	assert.Equal(t, "term-A", h.Ops[0].Term, "the claim's term")
	assert.Equal(t, "term-B", h.Ops[1].Term)
	assert.Equal(t, "term-A", h.Ops[1].OutTerm, "the holder's term")
	assert.Equal(t, "term-A", h.Ops[2].Term, "the held lease's term")
	assert.Equal(t, renewed.Revision, h.Ops[2].OutRev)
	assert.Equal(t, h.Ops[2].Call+int64(900*time.Millisecond), h.Ops[2].ValidUntil)
	assert.NotEmpty(t, h.Ops[3].Err)
}
