package leasehold

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
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

// An Extend whose TTL the store refuses (natsstore: under 1 s) changes
// nothing: the previous TTL and schedule are kept and the lease is not
// poisoned.
func TestWatchdogExtendRefusedByTheStoreKeepsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 10 * time.Second, RenewInterval: 2 * time.Second})
		start := time.Now()
		before := r.hold.Lease()
		time.Sleep(100 * time.Millisecond)
		r.faults.FailNext(leasetest.OpRenew, 1, fmt.Errorf("%w: TTL under the store's floor", lease.ErrInvalid))
		res, err := RequestExtend(t.Context(), r.sys.Root, r.dog, 5*time.Second)
		require.ErrorIs(t, err, lease.ErrInvalid)
		assert.NotErrorIs(t, err, lease.ErrLost)
		assert.Equal(t, before, res.Lease, "nothing was written")
		assert.NoError(t, r.hold.Err(), "not poisoned")
		assert.Equal(t, 10*time.Second, r.hold.TTL(), "the previous TTL is restored")
		_, err = r.hold.Token()
		require.NoError(t, err)

		time.Sleep(20 * time.Second)
		synctest.Wait()
		assert.Empty(t, r.poison)
		assert.Zero(t, count[Poisoned](r.rec))
		assert.Zero(t, count[RenewalFailed](r.rec))
		renewed, at := all[Renewed](r.rec)
		require.NotEmpty(t, renewed)
		assert.Equal(t, 10*time.Second, renewed[0].TTL)
		// The renewal that was due before the Extend stays due then: in
		// [0.8, 1.0] x the 2 s period after the acquisition.
		assert.GreaterOrEqual(t, at[0].Sub(start), 1600*time.Millisecond)
		assert.LessOrEqual(t, at[0].Sub(start), 2*time.Second)
		assert.True(t, r.held())
		_, err = r.hold.Token()
		require.NoError(t, err)
	})
}

// cancelCtxState reads, from a context made by context.WithCancelCause,
// whether its children map and its Done channel were made: a renewal's
// context must leave neither behind on the Hold (about 340 B per lock).
func cancelCtxState(t *testing.T, ctx any) (children, done bool) {
	t.Helper()
	v := reflect.ValueOf(ctx)
	require.Equal(t, reflect.Pointer, v.Kind())
	v = v.Elem()
	ch, d := v.FieldByName("children"), v.FieldByName("done")
	require.True(t, ch.IsValid() && d.IsValid(), "context.cancelCtx has changed: %v", v.Type())
	dv := d.FieldByName("v")
	require.True(t, dv.IsValid(), "atomic.Value has changed")
	return !ch.IsNil(), !dv.IsNil()
}

func TestWatchdogRenewalLeavesNothingOnTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWatchdogRig(t, lease.Config{TTL: 3 * time.Second, RenewInterval: time.Second})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		require.GreaterOrEqual(t, count[Renewed](r.rec), 4)
		children, done := cancelCtxState(t, r.hold.ctx)
		assert.False(t, children, "no children map on the Hold's context")
		assert.False(t, done, "no Done channel on the Hold's context until someone asks for it")
	})
}

// A timer callback that runs after its watchdog has begun to stop (its
// timer.Stop came too late) sends nothing: a tick to a stopped actor
// would be a dead letter, which starts protoactor's throttle goroutine.
func TestWatchdogTimerCallbackAfterStopSendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := lease.Config{LeaseID: "test.fire", OwnerID: "owner-a", TTL: 10 * time.Second}
		sys := actorsys.New(nil)
		defer sys.Shutdown()
		var dead atomic.Int32
		sub := sys.EventStream.Subscribe(func(ev any) {
			if _, ok := ev.(*actor.DeadLetterEvent); ok {
				dead.Add(1)
			}
		})
		defer sys.EventStream.Unsubscribe(sub)
		mem := leasetest.NewMemStore()
		defer mem.Close()
		a, err := mem.Acquire(t.Context(), lease.Claim{LeaseID: cfg.LeaseID, OwnerID: cfg.OwnerID, Term: lease.NewTerm(), TTL: cfg.TTL})
		require.NoError(t, err)
		hold, err := NewHold(cfg, a.Lease, Now())
		require.NoError(t, err)
		spec := &watchdogSpec{store: mem, hold: hold, log: actorsys.Logger(nil)}
		dogs := make(chan *watchdog, 1)
		pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
			w := spec.watchdog()
			dogs <- w
			return w
		}))
		w := <-dogs
		synctest.Wait()
		require.NoError(t, sys.Root.StopFuture(pid).Wait())
		w.fire() // as the timer's callback would, had it fired just as the watchdog stopped
		synctest.Wait()
		assert.Zero(t, dead.Load(), "no dead letter")
		time.Sleep(2 * time.Second) // without the fix: let the throttle goroutine end inside the bubble
	})
}

func TestJitteredPeriodBounds(t *testing.T) {
	for _, p := range []time.Duration{time.Millisecond, 500 * time.Millisecond, 5 * time.Second, time.Hour} {
		shorter := false
		for range 1000 {
			j := jittered(p)
			require.LessOrEqual(t, j, p, "never longer than the period")
			require.GreaterOrEqual(t, j, p*4/5, "at most a fifth shorter")
			shorter = shorter || j < p
		}
		assert.True(t, shorter, "period %v is jittered", p)
	}
}

// A renewal sent late (the watchdog was busy when it came due) is followed
// by a jittered period, so that renewals delayed together spread out again.
func TestWatchdogJittersAfterALateRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		var n atomic.Int32
		hook := func(ev Report) {
			rec.Hook(ev)
			if _, ok := ev.(Renewed); ok && n.Add(1) == 2 {
				time.Sleep(3 * time.Second) // busy: the next renewal comes due meanwhile
			}
		}
		cfg := lease.Config{LeaseID: "test.late", OwnerID: "owner-a", TTL: 10 * time.Second, RenewInterval: 2 * time.Second}
		sys := actorsys.New(nil)
		defer sys.Shutdown()
		mem := leasetest.NewMemStore()
		defer mem.Close()
		a, err := mem.Acquire(t.Context(), lease.Claim{LeaseID: cfg.LeaseID, OwnerID: cfg.OwnerID, Term: lease.NewTerm(), TTL: cfg.TTL})
		require.NoError(t, err)
		hold, err := NewHold(cfg, a.Lease, Now())
		require.NoError(t, err)
		start := time.Now()
		pid := sys.Root.Spawn(WatchdogProps(mem, hold, cfg, nil, hook))
		time.Sleep(12 * time.Second)
		synctest.Wait()
		require.NoError(t, sys.Root.StopFuture(pid).Wait())
		_, at := all[Renewed](rec)
		require.GreaterOrEqual(t, len(at), 5)
		assert.Equal(t, 2*time.Second, at[0].Sub(start), "on time: exactly the period")
		assert.Equal(t, 2*time.Second, at[1].Sub(at[0]), "on time: exactly the period")
		assert.Equal(t, 3*time.Second, at[2].Sub(at[1]), "sent a second late")
		assert.Less(t, at[3].Sub(at[2]), 2*time.Second, "after a late renewal, the period is jittered")
		assert.GreaterOrEqual(t, at[3].Sub(at[2]), 1600*time.Millisecond)
		assert.Equal(t, 2*time.Second, at[4].Sub(at[3]), "on time again: exactly the period")
	})
}

// stuckStore answers renewals only when told to, whatever their context
// says: a store that overruns its deadline (a starved process, a client
// stuck in a reconnect).
type stuckStore struct {
	lease.Store
	entered chan struct{}
	release chan struct{}
}

func (s *stuckStore) Renew(_ context.Context, l lease.Lease) (lease.Lease, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Store.Renew(context.Background(), l)
}

// A renewal that overruns the renew deadline must not hold the poison back:
// at the deadline the Hold ends and the workload's context is cancelled
// while the store call is still in flight; the parent hears of it when the
// call returns.
func TestWatchdogPoisonsAtTheDeadlineWhileTheStoreOverruns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := lease.Config{LeaseID: "test.overrun", OwnerID: "owner-a", TTL: 10 * time.Second,
			RenewInterval: 2 * time.Second, SafetyMargin: time.Second, StopTimeout: time.Second}
		mem := leasetest.NewMemStore()
		defer mem.Close()
		start := time.Now()
		stuck := &stuckStore{Store: mem, entered: make(chan struct{}, 8), release: make(chan struct{})}
		hold, poison, stop := lonelyWatchdog(t, cfg, mem, stuck, start)

		<-stuck.entered // the first renewal, 2 s in, never returns by itself
		<-hold.Lost()
		assert.Equal(t, start.Add(8*time.Second), time.Now(), "ended at the renew deadline (TTL - margin - stop)")
		_, err := hold.Token()
		require.ErrorIs(t, err, ErrRenewOverran)
		select {
		case p := <-poison:
			t.Fatalf("parent told before the call returned: %+v", p)
		default:
		}

		close(stuck.release) // the renewal lands, late
		p := <-poison
		assert.Equal(t, lease.LossDeadline, p.Reason)
		assert.ErrorIs(t, p.Err, ErrRenewOverran)
		assert.ErrorIs(t, p.Err, lease.ErrLost)
		stop()
	})
}
