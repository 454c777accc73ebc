package record

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNowIsMonotonic(t *testing.T) {
	a := Now()
	b := Now()
	assert.LessOrEqual(t, a, b)
	assert.Positive(t, a)
}

func TestLogRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.log")
	l, err := Create(path)
	require.NoError(t, err)

	acq := Op{Proc: "p1", Lease: "l", Owner: "o", Type: OpAcquire, TTL: 1e9, Call: 10}
	id := l.Call(acq)
	done := acq
	done.Return, done.Result, done.OutToken, done.OutRev, done.ValidUntil = 20, ResultOK, 5, 5, 900
	l.Return(id, done)
	l.Start(Workload{Proc: "p1", Lease: "l", Owner: "o", Token: 5, Start: 21})
	get := IDOp{Proc: "p1", Request: "r1", Type: "get", Call: 25}
	gid := l.IDCall(get)
	gotGet := get
	gotGet.Return, gotGet.Found = 26, true
	l.IDReturn(gid, gotGet)
	l.IDCall(IDOp{Proc: "p1", Request: "r1", Type: "put", Call: 27})
	l.Call(Op{Proc: "p1", Lease: "l", Owner: "o", Type: OpRenew, Token: 5, Rev: 5, Call: 30})
	require.NoError(t, l.Err())
	require.NoError(t, l.Close())

	// A kill can cut the last line short.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"k":"ret","id":2,"op":{"pro`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	h, err := ReadLogs(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, h.Ops, 2)
	assert.Equal(t, done, h.Ops[0])
	assert.Equal(t, Never, h.Ops[1].Return, "a call that never returned is pending")
	assert.Equal(t, ResultUnknown, h.Ops[1].Result)
	require.Len(t, h.Workloads, 1)
	assert.Equal(t, Never, h.Workloads[0].Stop, "a workload without a stop record ran until the end")
	require.Len(t, h.IDOps, 2)
	assert.Equal(t, gotGet, h.IDOps[0])
	assert.Equal(t, Never, h.IDOps[1].Return, "an ID store call that never returned")
}

func TestLogRejectsGarbageInTheMiddle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.log")
	require.NoError(t, os.WriteFile(path, []byte("nonsense\n{\"k\":\"start\",\"w\":{}}\n"), 0o644))
	_, err := ReadLog(path)
	require.Error(t, err)
}

func TestTailInFlight(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.log")
	l, err := Create(path)
	require.NoError(t, err)
	defer l.Close()
	tail := NewTail(path)

	ops, err := tail.InFlight()
	require.NoError(t, err)
	assert.Empty(t, ops)

	renew := Op{Lease: "l", Type: OpRenew, Call: 1}
	id := l.Call(renew)
	ops, err = tail.InFlight()
	require.NoError(t, err)
	assert.Equal(t, []Op{renew}, ops)

	l.Return(id, renew)
	ops, err = tail.InFlight()
	require.NoError(t, err)
	assert.Empty(t, ops)
}
