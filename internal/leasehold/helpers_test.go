package leasehold

import (
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/internal/actorsys"
	"github.com/asterforge/aster/internal/testrec"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

// TestMain checks for leaked goroutines. One goroutine of protoactor-go is
// let through: its dead-letter throttle, which a message to a stopped actor
// starts and which ends by itself one second later (throttler.go).
func TestMain(m *testing.M) {
	if os.Getenv(natsServerEnv) != "" {
		os.Exit(serveNATS())
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// recorder keeps the reports a hook saw, with the virtual time of each.
type recorder = testrec.Recorder[Report]

// all returns the reports of type T, and when each was seen.
func all[T Report](r *recorder) ([]T, []time.Time) { return testrec.All[T](r) }

func count[T Report](r *recorder) int { return testrec.Count[T](r) }

// watchdogRig runs one Watchdog under a parent actor that forwards Poison
// messages to a channel. It must be made inside a synctest bubble.
type watchdogRig struct {
	sys    *actorsys.System
	mem    *leasetest.MemStore
	faults *leasetest.FaultStore
	hold   *Hold
	rec    *recorder
	parent *actor.PID
	dog    *actor.PID
	poison chan Poison
	cfg    lease.Config
}

func newWatchdogRig(t *testing.T, cfg lease.Config) *watchdogRig {
	t.Helper()
	if cfg.LeaseID == "" {
		cfg.LeaseID = "test.watchdog"
	}
	if cfg.OwnerID == "" {
		cfg.OwnerID = "owner-a"
	}
	r := &watchdogRig{
		sys: actorsys.New(nil), mem: leasetest.NewMemStore(), rec: &recorder{},
		poison: make(chan Poison, 4), cfg: cfg,
	}
	r.faults = leasetest.NewFaultStore(r.mem)
	sent := Now()
	a, err := r.mem.Acquire(t.Context(), lease.Claim{LeaseID: cfg.LeaseID, OwnerID: cfg.OwnerID, Term: lease.NewTerm(), TTL: cfg.EffectiveTTL()})
	require.NoError(t, err)
	require.True(t, a.Acquired)
	r.hold, err = NewHold(cfg, a.Lease, sent)
	require.NoError(t, err)
	dogs := make(chan *actor.PID, 1)
	r.parent = r.sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			dogs <- c.Spawn(WatchdogProps(r.faults, r.hold, cfg, nil, r.rec.Hook))
		case Poison:
			r.poison <- m
		}
	}))
	r.dog = <-dogs
	t.Cleanup(r.close)
	return r
}

func (r *watchdogRig) close() {
	// Let the parent see the Terminated of a watchdog a test stopped, so
	// that stopping the parent sends it no Stop (a dead letter, whose
	// throttle goroutine would outlive the bubble).
	synctest.Wait()
	_ = r.sys.Root.StopFuture(r.parent).Wait()
	r.sys.Shutdown()
	_ = r.mem.Close()
}

// held reports whether the store still has the rig's lease.
func (r *watchdogRig) held() bool {
	h, _, ok := r.mem.Holder(r.cfg.LeaseID)
	return ok && h.OwnerID == r.cfg.OwnerID
}

// lonelyWatchdog runs a Watchdog over store for a lease acquired in mem at
// sent, under a parent that forwards its Poison messages. It is for tests
// that need a Hold with a chosen send time or a store of their own; stop
// ends it inside the bubble.
func lonelyWatchdog(t *testing.T, cfg lease.Config, mem *leasetest.MemStore, store lease.Store, sent time.Time) (
	hold *Hold, poison <-chan Poison, stop func()) {
	t.Helper()
	sys := actorsys.New(nil)
	a, err := mem.Acquire(t.Context(), lease.Claim{LeaseID: cfg.LeaseID, OwnerID: cfg.OwnerID, Term: lease.NewTerm(), TTL: cfg.TTL})
	require.NoError(t, err)
	hold, err = NewHold(cfg, a.Lease, sentAt(sent))
	require.NoError(t, err)
	ch := make(chan Poison, 1)
	parent := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Spawn(WatchdogProps(store, hold, cfg, nil, nil))
		case Poison:
			ch <- m
		}
	}))
	return hold, ch, func() {
		require.NoError(t, sys.Root.StopFuture(parent).Wait())
		time.Sleep(2 * time.Second) // let protoactor's dead-letter throttle end inside the bubble
		sys.Shutdown()
	}
}

// sentAt is the Sent of a request sent at t, on a machine not suspended
// since.
func sentAt(t time.Time) Sent { return Sent{At: t, suspended: suspendedClock()} }
