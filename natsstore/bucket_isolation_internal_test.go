package natsstore

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
)

// The isolation check's decisions, in virtual time: when it probes, when a
// probe's finding moves the store, and how moves that did not help delay the
// next one.
func TestIsolationDecisions(t *testing.T) {
	const bound = 2 * time.Second
	ctx := context.Background()
	unavailable := &jetstream.APIError{Code: http.StatusServiceUnavailable, ErrorCode: 10008,
		Description: "JetStream system temporarily unavailable"}
	cutOff := &cutOffLeader{leader: "n1", silence: replicaSilence}

	t.Run("a cut-off leader is left after a quarter of the timeout, no leader after all of it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			iso := &isolation{start: time.Now()}
			iso.note(ctx, time.Now(), context.DeadlineExceeded, true)
			time.Sleep(bound/4 - time.Millisecond)
			_, due := iso.probeDue(bound)
			assert.False(t, due, "probed before a quarter of the timeout")
			time.Sleep(time.Millisecond)
			silent, due := iso.probeDue(bound)
			assert.True(t, due)
			assert.True(t, iso.movesOn(bound, silent, cutOff), "stayed on a cut-off leader's server")
			assert.False(t, iso.movesOn(bound, silent, context.DeadlineExceeded),
				"moved on no answer before the timeout")
			assert.False(t, iso.movesOn(bound, silent, unavailable), "moved on a 503 before the timeout")
			time.Sleep(bound - bound/4)
			silent, _ = iso.probeDue(bound)
			assert.True(t, iso.movesOn(bound, silent, context.DeadlineExceeded), "stayed after the timeout")
		})
	})

	t.Run("after a move that did not help, both waits double", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			iso := &isolation{start: time.Now()}
			iso.note(ctx, time.Now(), unavailable, false)
			time.Sleep(bound)
			iso.moving()
			iso.note(ctx, time.Now(), context.DeadlineExceeded, false)
			time.Sleep(bound/2 - time.Millisecond)
			_, due := iso.probeDue(bound)
			assert.False(t, due)
			time.Sleep(time.Millisecond)
			silent, due := iso.probeDue(bound)
			assert.True(t, due)
			assert.True(t, iso.movesOn(bound, silent, cutOff))
			assert.False(t, iso.movesOn(bound, 2*bound-time.Millisecond, context.DeadlineExceeded))
			assert.True(t, iso.movesOn(bound, 2*bound, context.DeadlineExceeded))
		})
	})

	t.Run("a move that led to a server that answers ends the backoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			iso := &isolation{start: time.Now()}
			iso.note(ctx, time.Now(), context.DeadlineExceeded, true)
			time.Sleep(bound)
			iso.moving()
			time.Sleep(time.Millisecond)
			iso.note(ctx, time.Now(), jetstream.ErrMsgNotFound, false) // a read answered
			iso.settle(bound)
			assert.EqualValues(t, 1, iso.moves.Load(), "the backoff ended before a timeout without failures")
			time.Sleep(bound)
			iso.settle(bound)
			assert.EqualValues(t, 0, iso.moves.Load(), "backed off after a move that led to a working server")
			assert.Equal(t, time.Duration(1), iso.backoff())
		})
	})

	t.Run("a move after which requests fail, or none is answered, keeps the backoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			iso := &isolation{start: time.Now()}
			iso.moving()
			time.Sleep(2 * bound)
			iso.settle(bound)
			assert.EqualValues(t, 1, iso.moves.Load(), "no request was answered after the move")

			iso.note(ctx, time.Now(), nil, false) // a read answered by a cut-off leader,
			iso.note(ctx, time.Now(), &jetstream.APIError{Code: http.StatusBadRequest, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence},
				true) // which refuses writes
			time.Sleep(2 * bound)
			iso.settle(bound)
			assert.EqualValues(t, 1, iso.moves.Load(), "a failure after the move")

			iso.healthy() // a commit, or a probe that found the stream working
			assert.EqualValues(t, 0, iso.moves.Load())
		})
	})

	t.Run("a 503 is no answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			iso := &isolation{start: time.Now()}
			iso.moving()
			time.Sleep(time.Millisecond)
			iso.note(ctx, time.Now(), unavailable, false)
			assert.Zero(t, iso.answered.Load())
			assert.NotZero(t, iso.failed.Load())
		})
	})

	t.Run("the backoff saturates", func(t *testing.T) {
		iso := &isolation{start: time.Now()}
		for _, moves := range []int64{4, 5, 63, 64, 1000} {
			iso.moves.Store(moves)
			assert.Equal(t, time.Duration(maxIsolationBackoff), iso.backoff(), "after %d moves", moves)
		}
	})
}
