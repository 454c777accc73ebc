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
// from their start of each one's first two renewals.
func pacedRenewals(t *testing.T, n int, gap time.Duration) (first, second []time.Duration) {
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
	for i := range n {
		at := renewals[fmt.Sprint("paced.", i)]
		require.GreaterOrEqual(t, len(at), 2, "renewals of watchdog %d", i)
		first, second = append(first, at[0].Sub(starts[i])), append(second, at[1].Sub(at[0]))
	}
	return first, second
}

// Watchdogs started in a burst renew first at a random point of the
// period from its tenth on, never later than the period, and every period
// after that: they come due spread out, period after period.
func TestPacerSpreadsTheFirstRenewalsOfABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 400
		first, second := pacedRenewals(t, n, 0)
		distinct, exact := map[time.Duration]bool{}, 0
		for i, d := range first {
			assert.LessOrEqual(t, d, time.Second, "watchdog %d renews first within the period", i)
			assert.GreaterOrEqual(t, d, 100*time.Millisecond, "watchdog %d renews first after a tenth of the period", i)
			if d == time.Second {
				exact++
			}
			assert.Equal(t, time.Second, second[i], "watchdog %d: the period after the first renewal", i)
			distinct[d] = true
		}
		assert.Equal(t, pacerBurst, exact, "the watchdogs started before the burst was seen keep the period")
		assert.Greater(t, len(distinct), (n-pacerBurst)/2, "the burst's first renewals are spread")
	})
}

// Watchdogs started one by one, even many, keep the exact period.
func TestPacerLeavesWatchdogsStartedOneByOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first, _ := pacedRenewals(t, 200, pacerWindow/pacerBurst*2)
		for i, d := range first {
			assert.Equal(t, time.Second, d, "watchdog %d", i)
		}
	})
}
