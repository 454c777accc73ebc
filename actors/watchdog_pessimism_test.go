package actors

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// An Extend handled after the renewal tick's timer fired, but before the
// tick's callback ran, must not be poisoned by that callback: it belongs
// to the tick, not to the renew deadline of the Extend's renewal.
func TestWatchdogExtendRacingATickDoesNotPoison(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newScriptRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second}, 1)
		defer r.close()
		r.advanceHolding(time.Minute)
		require.Equal(t, 1, r.timers.heldCount(), "the tick's callback is held")
		require.Equal(t, 2*time.Second, r.at(time.Now()))
		r.extend(20 * time.Second)
		require.NotNil(t, r.store.inFlight(), "the Extend's renewal is in flight")
		r.release(0) // the tick's callback runs at last
		r.checkHealthy()
		r.answer(answerOK)
		res := <-r.replies
		require.NoError(t, res.Err)
		r.checkHealthy()
		for range 5 {
			c := r.untilCall(time.Minute)
			assert.Equal(t, 20*time.Second, c.l.TTL)
			r.answer(answerOK)
			r.checkHealthy()
			r.checkSafe()
		}
	})
}

// The deadline callback of a renewal that has returned (its answer came
// late, just as the deadline passed) must not poison the next renewal.
func TestWatchdogStaleDeadlineCallbackDoesNotPoisonTheNextRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newScriptRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second}, 1)
		defer r.close()
		first := r.untilCall(time.Minute)
		require.Equal(t, 2*time.Second, r.at(first.sent))
		r.advanceHolding(time.Minute) // to the renew deadline: 10 s - 1 s - 1 s after the acquisition
		require.Equal(t, 1, r.timers.heldCount(), "the deadline callback is held")
		require.Equal(t, 8*time.Second, r.at(time.Now()))
		r.answer(answerOK) // the answer comes as the deadline passes
		require.NoError(t, r.hold.Err())
		assert.Equal(t, first.sent.Add(9*time.Second), r.hold.ValidUntil())

		second := r.untilCall(time.Minute)
		require.NotSame(t, first, second)
		r.release(0) // the first renewal's deadline callback runs at last
		r.checkHealthy()
		r.answer(answerOK)
		r.checkHealthy()
		r.checkSafe()
	})
}
