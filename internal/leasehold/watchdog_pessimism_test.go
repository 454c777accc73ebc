package leasehold

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// An Extend to a shorter TTL lowers the validity before its renewal is
// sent: the write may land although its answer is lost, and the server
// then expires the key a TTL after it. The lowered validity stays until a
// renewal succeeds, so the lease ends (by the renew deadline of the
// shorter write) before the server can expire the key.
func TestWatchdogShorterExtendLowersTheValidityBeforeItIsSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newScriptRig(t, lease.Config{TTL: 10 * time.Second}, 1)
		defer r.close()
		r.advance(100 * time.Millisecond)
		require.Nil(t, r.store.inFlight(), "no renewal is due yet")
		r.extend(time.Second)
		c := r.store.inFlight()
		require.NotNil(t, c, "the Extend renews at once")
		require.Equal(t, time.Second, c.l.TTL)
		// Margins default to a tenth of the TTL of the write: 100 ms each.
		assert.Equal(t, c.sent.Add(900*time.Millisecond), r.hold.ValidUntil(), "lowered while the write is in flight")
		assert.Equal(t, c.sent.Add(800*time.Millisecond), r.hold.RenewDeadline())
		r.checkSafe()

		r.answer(answerLanded)
		assert.Equal(t, c.sent.Add(900*time.Millisecond), r.hold.ValidUntil(), "still lowered: the write may have landed")
		r.checkSafe()

		// The retries get no answer either, until the lease is poisoned at
		// the renew deadline of the shorter write.
		for r.hold.Err() == nil {
			if r.store.inFlight() != nil {
				r.answer(answerNotLanded)
			}
			r.checkSafe()
			r.advance(time.Second)
			r.checkSafe()
		}
		if r.store.inFlight() != nil { // poisoned while a retry was in flight
			r.answer(answerNotLanded)
		}
		p := <-r.poison
		assert.Equal(t, lease.LossDeadline, p.Reason)
		_, err := r.hold.Token()
		require.ErrorIs(t, err, lease.ErrLost)
		bound, _ := r.bound()
		assert.Equal(t, c.sent.Add(900*time.Millisecond), bound, "the server holds the shorter write")
	})
}

// A renewal that succeeds after a shorter Extend whose answer was lost sets
// the validity from its own send time: it is the server's last write.
func TestWatchdogRenewalAfterALostShorterExtendSetsTheValidity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newScriptRig(t, lease.Config{TTL: 10 * time.Second}, 1)
		defer r.close()
		r.advance(100 * time.Millisecond)
		r.extend(2 * time.Second)
		ext := r.store.inFlight()
		require.NotNil(t, ext)
		r.answer(answerNotLanded)
		res := <-r.replies
		require.ErrorIs(t, res.Err, lease.ErrUnavailable, "not refused: the watchdog keeps the TTL and retries")
		assert.Equal(t, ext.sent.Add(1800*time.Millisecond), res.ValidUntil)
		assert.Equal(t, 2*time.Second, r.hold.TTL())

		retry := r.untilCall(time.Second)
		require.Equal(t, 2*time.Second, retry.l.TTL)
		assert.Equal(t, ext.sent.Add(1800*time.Millisecond), r.hold.ValidUntil(), "a retry of the same TTL lowers nothing more")
		r.answer(answerOK)
		assert.Equal(t, retry.sent.Add(1800*time.Millisecond), r.hold.ValidUntil())
		assert.NoError(t, r.hold.Err())
		r.checkSafe()
	})
}

// An Extend that the store refuses as invalid wrote nothing: the validity,
// the renew deadline and the TTL it had before are restored, and the lease
// goes on as if the Extend had not been asked.
func TestWatchdogRefusedShorterExtendKeepsTheValidity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newScriptRig(t, lease.Config{TTL: 10 * time.Second}, 1)
		defer r.close()
		validUntil, deadline := r.hold.ValidUntil(), r.hold.RenewDeadline()
		r.advance(100 * time.Millisecond)
		r.extend(2 * time.Second)
		require.NotNil(t, r.store.inFlight())
		r.answer(answerRefused)
		res := <-r.replies
		require.ErrorIs(t, res.Err, lease.ErrInvalid)
		assert.Equal(t, validUntil, res.ValidUntil, "the answer carries the validity as it was")
		assert.Equal(t, validUntil, r.hold.ValidUntil())
		assert.Equal(t, deadline, r.hold.RenewDeadline())
		assert.Equal(t, 10*time.Second, r.hold.TTL())
		r.checkSafe()
		r.checkHealthy()

		for range 5 {
			c := r.untilCall(time.Minute)
			assert.Equal(t, 10*time.Second, c.l.TTL)
			r.answer(answerOK)
			r.checkSafe()
			r.checkHealthy()
		}
	})
}

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
