package lease_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

func tenure(token lease.Token) lease.Tenure {
	return lease.Tenure{Token: token, Term: "term-" + string(rune('a'+token%26))}
}

func TestFenceRejectsStaleTokens(t *testing.T) {
	var f lease.Fence
	require.NoError(t, f.Admit(tenure(5)))
	require.NoError(t, f.Admit(tenure(5)), "the same tenure may write again")
	require.NoError(t, f.Admit(tenure(9)))
	require.ErrorIs(t, f.Admit(tenure(5)), lease.ErrStaleToken)
	assert.Equal(t, lease.FenceStats{Highest: tenure(9), Accepted: 3, Rejected: 1}, f.Stats())
}

// A store that lost acknowledged writes can issue one token to two tenures:
// the fence admits only the first term it saw with that token.
func TestFenceRefusesOneTokenFromTwoTerms(t *testing.T) {
	var f lease.Fence
	first := lease.Tenure{Token: 7, Term: "t1"}
	second := lease.Tenure{Token: 7, Term: "t2"}
	require.NoError(t, f.Admit(first))
	err := f.Admit(second)
	require.ErrorIs(t, err, lease.ErrStaleToken)
	assert.Contains(t, err.Error(), "t1")
	require.NoError(t, f.Admit(first), "the first term keeps writing")
	require.NoError(t, f.Admit(lease.Tenure{Token: 8, Term: "t2"}), "a larger token is admitted from any term")
	require.ErrorIs(t, f.Admit(first), lease.ErrStaleToken)
}

func TestFenceDo(t *testing.T) {
	var f lease.Fence
	boom := errors.New("boom")
	require.ErrorIs(t, f.Do(tenure(3), func() error { return boom }), boom)
	ran := false
	require.ErrorIs(t, f.Do(tenure(2), func() error { ran = true; return nil }), lease.ErrStaleToken)
	assert.False(t, ran, "a stale write must not run")
	assert.Equal(t, tenure(3), f.Stats().Highest, "a failed write still raises the fence")
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
			_ = f.Do(tenure(lease.Token(i%16)), func() error {
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
