package leasehold

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
)

// suspendMachine replaces the clock of suspensions for the test's life and
// returns a function that suspends the machine for d: the clock that counts
// suspended time moves on by d, while Go's monotonic clock (and the bubble's
// clock) stays where it was, as CLOCK_MONOTONIC does on Linux. Tests that
// call it must not be parallel: the clock is the package's.
func suspendMachine(t *testing.T) func(d time.Duration) {
	var slept atomic.Int64
	oldClock, oldSkewed := suspendedClock, skewed
	suspendedClock = func() time.Duration { return oldClock() + time.Duration(slept.Load()) }
	// The kernel moves the wall clock on by a suspension; the bubble's
	// clocks cannot be moved apart, so every pair of readings is skewed.
	skewed = func(a, b time.Time) bool { return true }
	t.Cleanup(func() { suspendedClock, skewed = oldClock, oldSkewed })
	return func(d time.Duration) { slept.Add(int64(d)) }
}

// guarantees.md: a holder's validity is kept on a clock that counts
// suspended time. A machine suspended past its validity (a laptop's lid, a
// paused VM whose clock the hypervisor stops) wakes with a token that fails,
// although its monotonic clock says that no time passed; the contenders and
// the server counted that time.
func TestSuspendedMachineWakesWithItsTokenExpired(t *testing.T) {
	suspend := suspendMachine(t)
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 3 * time.Second})
		time.Sleep(time.Second)
		synctest.Wait()

		suspend(2 * time.Second) // within the validity: held, and it shows
		token, err := r.hold.Token()
		require.NoError(t, err)
		assert.Equal(t, r.hold.Lease().Token, token)
		margin := lease.Config{TTL: 10 * time.Second}.EffectiveSafetyMargin()
		assert.InDelta(t, 10*time.Second-time.Second-2*time.Second-margin, r.hold.Remaining(), float64(time.Millisecond),
			"the suspension counts against the validity")

		suspend(20 * time.Second) // past it
		_, err = r.hold.Token()
		require.ErrorIs(t, err, lease.ErrLost)
		require.ErrorIs(t, err, lease.ErrExpired)
		assert.Zero(t, r.hold.Remaining())
		assert.False(t, r.hold.ValidUntil().After(time.Now()), "ValidUntil %v is after now %v", r.hold.ValidUntil(), time.Now())

		// The watchdog's next tick finds its renew deadline passed.
		p := <-r.poison
		assert.Equal(t, lease.LossDeadline, p.Reason)
		require.ErrorIs(t, p.Err, ErrRenewDeadline)
		assert.Contains(t, p.Err.Error(), "the machine was suspended for 22s", "the cause says why")
		_, err = r.hold.Token()
		require.ErrorIs(t, err, lease.ErrLost)
	})
}

// A suspension while the acquiring request is out counts too: the Hold
// counts from the Sent taken before the request.
func TestSuspensionDuringTheAcquisitionCounts(t *testing.T) {
	suspend := suspendMachine(t)
	l := lease.Lease{ID: "job", OwnerID: "owner-a", Term: "t", Token: 1, TTL: 10 * time.Second, Revision: 1}
	sent := Now()
	suspend(time.Minute)
	h, err := NewHold(lease.Config{}, l, sent)
	require.NoError(t, err)
	_, err = h.Token()
	require.ErrorIs(t, err, lease.ErrExpired)

	fresh, err := NewHold(lease.Config{}, l, Now())
	require.NoError(t, err)
	_, err = fresh.Token()
	require.NoError(t, err, "a Hold sent after the suspension is valid")
	require.ErrorIs(t, Release(t.Context(), nil, h), lease.ErrExpired, "never released past the validity")
}

// The clock that counts suspensions is read (a system call) only when the
// wall and monotonic clocks moved apart: never while they agree, so that
// Token stays as cheap as time.Now.
func TestSuspensionIsReadOnlyWhenTheClocksDriftApart(t *testing.T) {
	var reads atomic.Int64
	old := suspendedClock
	suspendedClock = func() time.Duration { reads.Add(1); return old() }
	t.Cleanup(func() { suspendedClock = old })

	l := lease.Lease{ID: "job", OwnerID: "owner-a", Term: "t", Token: 1, TTL: 10 * time.Second, Revision: 1}
	h, err := NewHold(lease.Config{}, l, Now())
	require.NoError(t, err)
	before := reads.Load()
	time.Sleep(5 * time.Millisecond)
	for range 100 {
		_, err := h.Token()
		require.NoError(t, err)
	}
	assert.Equal(t, before, reads.Load(), "clocks that agree need no reading")

	a := time.Now()
	time.Sleep(5 * time.Millisecond)
	assert.False(t, skewed(a, time.Now()), "the wall and monotonic clocks agree across a sleep")
	synctest.Test(t, func(t *testing.T) {
		// The bubble's readings carry no monotonic clock: they compare by
		// the wall clock alone, with each other and with those outside.
		assert.False(t, skewed(a, time.Now()))
		sent := Now()
		time.Sleep(time.Hour)
		assert.False(t, skewed(sent.At, time.Now()))
	})
}
