package leasehold

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// A release that finds no renewal in flight may release at once: no
// renewal can start any more, and the revision the Hold has is the last.
func TestMarkReleasedInFlightWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		time.Sleep(5 * time.Second) // two renewals done, the next due at 6 s
		synctest.Wait()
		ended, inFlight := r.hold.MarkReleasedInFlight()
		assert.True(t, ended)
		assert.False(t, inFlight)
		_, rev, ok := r.mem.Holder(r.cfg.LeaseID)
		require.True(t, ok)
		assert.Equal(t, rev, r.hold.Lease().Revision, "the Hold has the last revision")
		calls := r.faults.Calls(leasetest.OpRenew)
		require.NoError(t, Release(t.Context(), r.faults, r.hold), "released without waiting for the watchdog")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Equal(t, calls, r.faults.Calls(leasetest.OpRenew), "no renewal after the release")
		ended, _ = r.hold.MarkReleasedInFlight()
		assert.False(t, ended, "once")
	})
}

func TestMarkReleasedInFlightDuringARenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		r.faults.Delay(leasetest.OpRenew, time.Hour)
		time.Sleep(3 * time.Second) // a renewal is in flight
		synctest.Wait()
		ended, inFlight := r.hold.MarkReleasedInFlight()
		assert.True(t, ended)
		assert.True(t, inFlight, "the caller must wait for the watchdog before it releases")
	})
}
