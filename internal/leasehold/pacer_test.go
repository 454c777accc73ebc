package leasehold

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// pacedRenewals starts n watchdogs sharing a Pacer, every gap (0: all at
// once), each renewing every second (TTL 3 s), and returns the offsets
// from their start of each one's first two renewals, and the most
// renewals sent at one instant.
func pacedRenewals(t *testing.T, n int, gap time.Duration) (first, second []time.Duration, together int) {
	t.Helper()
	mem := leasetest.NewMemStore()
	defer mem.Close()
	sys := actorsys.New(nil)
	defer sys.Shutdown()
	cfg := lease.Config{TTL: 3 * time.Second}
	var pacer Pacer
	var mu sync.Mutex
	renewals := make(map[string][]time.Time, n)
	report := func(r Report) {
		if rn, ok := r.(Renewed); ok {
			mu.Lock()
			renewals[rn.Lease.ID] = append(renewals[rn.Lease.ID], time.Now())
			mu.Unlock()
		}
	}
	starts := make([]time.Time, n)
	pids := make([]*actor.PID, n)
	for i := range n {
		time.Sleep(gap)
		a, err := mem.Acquire(t.Context(), lease.Claim{LeaseID: fmt.Sprint("paced.", i), OwnerID: "owner",
			Term: lease.NewTerm(), TTL: cfg.TTL})
		require.NoError(t, err)
		hold, err := NewHold(cfg, a.Lease, Now())
		require.NoError(t, err)
		starts[i] = time.Now()
		pids[i] = sys.Root.Spawn(PacedWatchdogProps(mem, hold, cfg, nil, report, &pacer))
	}
	time.Sleep(2500 * time.Millisecond)
	synctest.Wait()
	for _, pid := range pids {
		require.NoError(t, sys.Root.StopFuture(pid).Wait())
	}
	mu.Lock()
	defer mu.Unlock()
	at := make(map[time.Time]int)
	for i := range n {
		rs := renewals[fmt.Sprint("paced.", i)]
		require.GreaterOrEqual(t, len(rs), 2, "renewals of watchdog %d", i)
		first, second = append(first, rs[0].Sub(starts[i])), append(second, rs[1].Sub(rs[0]))
		for _, r := range rs {
			at[r]++
			together = max(together, at[r])
		}
	}
	return first, second, together
}

// Watchdogs started in a burst renew first at a random slot of the period
// from its tenth on, never later than the period, and about every period
// after that (rounded down to a slot): they come due spread out, period
// after period, a few on each slot.
func TestPacerSpreadsTheFirstRenewalsOfABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 400
		first, second, together := pacedRenewals(t, n, 0)
		distinct, exact := map[time.Duration]bool{}, 0
		for i, d := range first {
			assert.LessOrEqual(t, d, time.Second, "watchdog %d renews first within the period", i)
			assert.GreaterOrEqual(t, d, 100*time.Millisecond-pacerSlot, "watchdog %d renews first after a tenth of the period", i)
			if d == time.Second {
				exact++
			}
			assert.LessOrEqual(t, second[i], time.Second, "watchdog %d: the period after the first renewal", i)
			assert.Greater(t, second[i], time.Second-pacerSlot, "watchdog %d: the period after the first renewal", i)
			distinct[d] = true
		}
		assert.Equal(t, pacerBurst, exact, "the watchdogs started before the burst was seen keep the period")
		assert.GreaterOrEqual(t, len(distinct), 15, "the burst's first renewals are spread over the slots of the period")
		assert.LessOrEqual(t, together, pacerSlotCap)
	})
}

// A slot takes at most pacerSlotCap renewals; the others keep their exact
// due time. 2,000 watchdogs in a burst put about 107 first renewals on
// each slot of the period, which without the cap would all start at once.
func TestPacerCapsTheRenewalsOfASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first, _, together := pacedRenewals(t, 2000, 0)
		onSlot := 0
		for _, d := range first {
			if d%pacerSlot == 0 {
				onSlot++
			}
		}
		assert.Equal(t, pacerSlotCap, together, "the most renewals sent at one instant")
		assert.Greater(t, 2000-onSlot, 500, "renewals past the cap keep their due time")
		assert.Greater(t, onSlot, 1000, "renewals up to the cap are on their slot")
	})
}

// Watchdogs started one by one, even many, keep the period, but for the
// rounding down to their slot.
func TestPacerLeavesWatchdogsStartedOneByOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first, _, _ := pacedRenewals(t, 200, pacerWindow/pacerBurst*2)
		for i, d := range first {
			assert.LessOrEqual(t, d, time.Second, "watchdog %d", i)
			assert.Greater(t, d, time.Second-pacerSlot, "watchdog %d", i)
		}
	})
}

// A slot is a twentieth of the period when that is shorter than
// pacerSlot; without a Pacer, due times are left alone; past the cap, a
// due time is left alone; slots in the past are forgotten.
func TestPacerSlot(t *testing.T) {
	var p Pacer
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, at, p.slot(at.Add(49*time.Millisecond), time.Second))
	assert.Equal(t, at.Add(50*time.Millisecond), p.slot(at.Add(99*time.Millisecond), time.Second))
	assert.Equal(t, at.Add(5*time.Millisecond), p.slot(at.Add(9*time.Millisecond), 100*time.Millisecond))
	assert.Equal(t, at.Add(9*time.Millisecond), (*Pacer)(nil).slot(at.Add(9*time.Millisecond), time.Second))
	assert.Equal(t, at.Add(time.Nanosecond), p.slot(at.Add(time.Nanosecond), 10*time.Nanosecond), "below 20 ns, no slot")

	full := at.Add(time.Hour)
	for i := range pacerSlotCap {
		require.Equal(t, full, p.slot(full.Add(time.Duration(i)), time.Second), "renewal %d", i)
	}
	assert.Equal(t, full.Add(time.Millisecond), p.slot(full.Add(time.Millisecond), time.Second), "past the cap")
	assert.Equal(t, full.Add(50*time.Millisecond), p.slot(full.Add(51*time.Millisecond), time.Second), "the next slot")

	for i := range 3 * pacerPrune {
		p.slot(at.Add(2*time.Hour+time.Duration(i)*pacerSlot), time.Second)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	assert.Less(t, len(p.slots), pacerPrune, "slots in the past are dropped")
}
