package lease_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

func TestFenceRejectsStaleTokens(t *testing.T) {
	var f lease.Fence
	require.NoError(t, f.Admit(5))
	require.NoError(t, f.Admit(5), "the same token may write again")
	require.NoError(t, f.Admit(9))
	require.ErrorIs(t, f.Admit(5), lease.ErrStaleToken)
	assert.Equal(t, lease.FenceStats{Highest: 9, Accepted: 3, Rejected: 1}, f.Stats())
}

func TestFenceDo(t *testing.T) {
	var f lease.Fence
	boom := errors.New("boom")
	require.ErrorIs(t, f.Do(3, func() error { return boom }), boom)
	ran := false
	require.ErrorIs(t, f.Do(2, func() error { ran = true; return nil }), lease.ErrStaleToken)
	assert.False(t, ran, "a stale write must not run")
	assert.Equal(t, lease.Token(3), f.Stats().Highest, "a failed write still raises the fence")
}

func TestFenceConcurrent(t *testing.T) {
	var (
		f    lease.Fence
		mu   sync.Mutex
		last lease.Token
		wg   sync.WaitGroup
	)
	for i := range 64 {
		wg.Go(func() {
			_ = f.Do(lease.Token(i%16), func() error {
				mu.Lock()
				defer mu.Unlock()
				if lease.Token(i%16) < last {
					t.Errorf("accepted %d after %d", i%16, last)
				}
				last = lease.Token(i % 16)
				return nil
			})
		})
	}
	wg.Wait()
	s := f.Stats()
	assert.Equal(t, uint64(64), s.Accepted+s.Rejected)
}
