package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

func TestTokenFromFollowsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newSupRig(t)
		type read struct {
			granted lease.Token
			tok     lease.Token
			err     error
		}
		reads := make(chan read, 2)
		w := WorkloadFunc(func(ctx context.Context, token lease.Token) error {
			tok, err := TokenFrom(ctx)
			reads <- read{token, tok, err}
			<-ctx.Done()
			tok, err = TokenFrom(ctx)
			reads <- read{token, tok, err}
			return nil
		})
		s := r.supervisor(t, r.config("node-a", w, lease.Config{
			TTL: 5 * time.Second, RenewInterval: 10 * time.Millisecond, StandbyRetryInterval: time.Minute}))
		run := start(s)
		leading := <-reads
		require.NoError(t, leading.err)
		assert.Equal(t, leading.granted, leading.tok, "while leading, the token is the granted one")

		r.mem.Tamper(testLease, "node-b", time.Minute) // the next renewal finds another owner
		lost := <-reads
		assert.ErrorIs(t, lost.err, lease.ErrLost, "once the lease is lost, TokenFrom fails")
		require.NoError(t, run.stop())
	})
}

func TestTokenFromWithoutATerm(t *testing.T) {
	_, err := TokenFrom(context.Background())
	assert.ErrorIs(t, err, ErrNoTerm)
	_, ok := TermFrom(withTerm(context.Background(), Term{}))
	assert.False(t, ok)
	var zero Term
	_, err = zero.Token()
	assert.ErrorIs(t, err, ErrNoTerm)
	assert.Nil(t, zero.Lost())
	assert.Zero(t, zero.Remaining())
}
