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
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestResourceFencesAndRecords(t *testing.T) {
	srv, err := resource.Start()
	require.NoError(t, err)
	defer srv.Close()
	c := resource.NewClient(srv.URL())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	require.NoError(t, c.Write(ctx, "a", "p1", "A", 5))
	require.NoError(t, c.Write(ctx, "a", "p2", "B", 9))
	require.ErrorIs(t, c.Write(ctx, "a", "p1", "A", 5), resource.ErrStale)
	require.NoError(t, c.Write(ctx, "b", "p1", "A", 1), "each lease has its own fence")

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
		wg.Go(func() { _ = c.Write(ctx, "a", "p", "o", uint64(i%8)) })
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
	require.Error(t, c.Write(context.Background(), "a", "p", "o", 1))
	assert.Empty(t, srv.Writes())
}
