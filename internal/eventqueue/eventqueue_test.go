package eventqueue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestQueueKeepsTheLatestOfEachLease(t *testing.T) {
	q := New()
	q.Push(lease.Event{LeaseID: "a", Kind: lease.EventHeld, Revision: 1})
	q.Push(lease.Event{LeaseID: "b", Kind: lease.EventHeld, Revision: 2})
	q.Push(lease.Event{LeaseID: "a", Kind: lease.EventFree, Revision: 3})
	out := make(chan lease.Event)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Pump(ctx, out); close(done) }()
	assert.Equal(t, lease.Event{LeaseID: "a", Kind: lease.EventFree, Revision: 3}, <-out, "a first: it changed first")
	assert.Equal(t, uint64(2), (<-out).Revision)
	q.Push(lease.Event{LeaseID: "c", Revision: 4})
	assert.Equal(t, "c", (<-out).LeaseID)
	cancel()
	<-done
}
