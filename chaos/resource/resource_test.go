package resource_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/chaos/resource"
	"github.com/asterforge/aster/lease"
)

func offer(leaseID, proc, owner string, token uint64) resource.Offer {
	return resource.Offer{Lease: leaseID, Proc: proc, Owner: owner,
		Tenure: lease.Tenure{Token: lease.Token(token), Term: owner + "-term"}}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestResourceFencesAndRecords(t *testing.T) {
	srv, err := resource.Start()
	require.NoError(t, err)
	defer srv.Close()
	c := resource.NewClient(srv.URL())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	require.NoError(t, c.Write(ctx, offer("a", "p1", "A", 5)))
	require.NoError(t, c.Write(ctx, offer("a", "p2", "B", 9)))
	require.ErrorIs(t, c.Write(ctx, offer("a", "p1", "A", 5)), resource.ErrStale)
	require.NoError(t, c.Write(ctx, offer("b", "p1", "A", 1)), "each lease has its own fence")

	last, ok := srv.Last("a")
	require.True(t, ok)
	assert.Equal(t, uint64(9), last.Token)
	_, ok = srv.Last("c")
	assert.False(t, ok)

	ws := srv.Writes()
	require.Len(t, ws, 4)
	for i, w := range ws {
		assert.Equal(t, uint64(i+1), w.Seq)
		assert.LessOrEqual(t, w.Sent, w.At, "sent before decided, on one clock")
	}
	assert.True(t, ws[0].Accepted)
	assert.False(t, ws[2].Accepted)
	assert.Equal(t, uint64(9), ws[2].Highest)
	assert.Equal(t, "p1", ws[2].Proc)
	assert.Equal(t, "A", ws[2].Owner)
	assert.Equal(t, "A-term", ws[2].Term)
}

// The fence judges the holders' terms, not their owner IDs: two terms of
// one owner (one pod name on two processes) that were given one token (a
// server that lost acknowledged writes) are two tenures, and the second is
// refused.
func TestResourceTellsTermsOfOneOwnerApart(t *testing.T) {
	srv, err := resource.Start()
	require.NoError(t, err)
	defer srv.Close()
	c := resource.NewClient(srv.URL())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := resource.Offer{Lease: "a", Proc: "p1", Owner: "pod-7", Tenure: lease.Tenure{Token: 5, Term: "t1"}, Request: "r1"}
	second := resource.Offer{Lease: "a", Proc: "p2", Owner: "pod-7", Tenure: lease.Tenure{Token: 5, Term: "t2"}}
	require.NoError(t, c.Write(ctx, first))
	require.NoError(t, c.Write(ctx, first), "one term writes again")
	require.ErrorIs(t, c.Write(ctx, second), resource.ErrStale, "one token from two terms")
	ws := srv.Writes()
	require.Len(t, ws, 3)
	assert.Equal(t, "r1", ws[0].Request)
	assert.False(t, ws[2].Accepted)
}

func TestResourceConcurrentWritesAreOrdered(t *testing.T) {
	srv, err := resource.Start()
	require.NoError(t, err)
	defer srv.Close()
	c := resource.NewClient(srv.URL())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() { _ = c.Write(ctx, offer("a", "p", "o", uint64(i%8))) })
	}
	wg.Wait()
	var highest uint64
	for _, w := range srv.Writes() {
		if w.Accepted {
			require.GreaterOrEqual(t, w.Token, highest, "accepted writes never go back")
			highest = w.Token
		} else {
			require.Less(t, w.Token, w.Highest)
		}
	}
}

func TestResourceRejectsBadRequests(t *testing.T) {
	srv, err := resource.Start()
	require.NoError(t, err)
	defer srv.Close()
	c := resource.NewClient(srv.URL() + "/nowhere")
	defer c.Close()
	require.Error(t, c.Write(context.Background(), offer("a", "p", "o", 1)))
	assert.Empty(t, srv.Writes())
}

// A write that carries a singleton request ID applies it once: the
// resource records the ID with the effect, so a request re-sent after its
// first application (Dedupe's window: the leader died before recording
// the reply) is admitted by the fence and applies nothing.
func TestResourceAppliesARequestOnce(t *testing.T) {
	srv, err := resource.Start()
	require.NoError(t, err)
	defer srv.Close()
	c := resource.NewClient(srv.URL())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	first, again, other := offer("a", "p1", "A", 5), offer("a", "p2", "B", 9), offer("b", "p2", "B", 9)
	first.Request, again.Request, other.Request = "r1", "r1", "r1"
	require.NoError(t, c.Write(ctx, first))
	require.NoError(t, c.Write(ctx, again), "a duplicate is answered as done")
	require.NoError(t, c.Write(ctx, other), "request IDs are per lease")
	stale := offer("a", "p1", "A", 5)
	stale.Request = "r1"
	require.ErrorIs(t, c.Write(ctx, stale), resource.ErrStale, "the fence judges a duplicate's tenure first")

	ws := srv.Writes()
	require.Len(t, ws, 4)
	assert.True(t, ws[0].Accepted)
	assert.False(t, ws[0].Duplicate)
	assert.True(t, ws[1].Accepted, "admitted by the fence")
	assert.True(t, ws[1].Duplicate, "and applied nothing")
	assert.False(t, ws[2].Duplicate)
	assert.False(t, ws[3].Accepted)
	assert.False(t, ws[3].Duplicate)
}
