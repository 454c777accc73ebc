package lock_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

func TestCloseReleasesEverythingAndRefusesNewCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		a := newRigOn(t, mem, lock.Config{OwnerID: "node-a"})
		b := newRigOn(t, mem, lock.Config{OwnerID: "node-b"})
		var guards []*lock.Guard
		for i := range 3 {
			g, err := a.locker.Acquire(t.Context(), fmt.Sprint("res.", i))
			require.NoError(t, err)
			guards = append(guards, g)
		}
		gb, err := b.locker.Acquire(t.Context(), "other")
		require.NoError(t, err)
		waiting := make(chan error, 1)
		go func() {
			_, err := a.locker.Acquire(t.Context(), "other") // held by B: waits
			waiting <- err
		}()
		synctest.Wait()

		start := time.Now()
		require.NoError(t, a.locker.Close(t.Context()))
		assert.Equal(t, start, time.Now(), "nothing to wait for")
		assert.ErrorIs(t, <-waiting, lease.ErrClosed, "a waiting Acquire returns")
		for i, g := range guards {
			_, _, ok := mem.Holder(fmt.Sprint("res.", i))
			assert.False(t, ok, "released at the store")
			_, err := g.Token()
			assert.ErrorIs(t, err, lease.ErrReleased)
			assert.True(t, closed(g.Lost()))
			assert.NoError(t, g.Release(t.Context()), "Close's release is the guard's")
		}
		assert.Zero(t, a.locker.Held())
		owner, _, _ := mem.Holder("other")
		assert.Equal(t, gb.OwnerID(), owner.OwnerID, "B's lock is untouched")

		_, err = a.locker.Acquire(t.Context(), "new")
		assert.ErrorIs(t, err, lease.ErrClosed)
		_, err = a.locker.TryAcquire(t.Context(), "new")
		assert.ErrorIs(t, err, lease.ErrClosed)
		assert.NoError(t, a.locker.Close(t.Context()), "idempotent")
		assert.Equal(t, 3, a.faults.Calls(leasetest.OpRelease))
	})
}

func TestCloseIsBoundedAndReportsWhatItCouldNotRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{TTL: 20 * time.Second})
		tokens := map[string]lease.Token{}
		for _, res := range []string{"a", "b"} {
			g, err := r.locker.Acquire(t.Context(), res)
			require.NoError(t, err)
			tokens[res], _ = g.Token()
		}
		r.faults.Delay(leasetest.OpRelease, time.Hour) // the store hangs on releases

		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err := r.locker.Close(ctx)
		assert.Equal(t, start.Add(2*time.Second), time.Now(), "bounded by its context")
		var ce *lock.CloseError
		require.ErrorAs(t, err, &ce)
		require.Len(t, ce.NotReleased, 2)
		for _, n := range ce.NotReleased {
			assert.Equal(t, tokens[n.Resource], n.Token)
			assert.ErrorIs(t, n.Err, lease.ErrUnavailable)
		}
		assert.ErrorIs(t, err, lease.ErrUnavailable, "CloseError unwraps to the release errors")
		assert.Empty(t, ce.NotStopped)
		assert.Contains(t, err.Error(), "2 locks not released")
		_, _, ok := r.holder("a")
		assert.True(t, ok, "left to expire")

		// A second Close returns the first one's report.
		assert.Equal(t, err, r.locker.Close(t.Context()))
	})
}

func TestCloseUsesADefaultBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{TTL: time.Minute})
		_, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		r.faults.Delay(leasetest.OpRelease, time.Hour)
		start := time.Now()
		err = r.locker.Close(context.Background())
		assert.ErrorIs(t, err, lease.ErrUnavailable)
		assert.Equal(t, start.Add(lock.DefaultCloseTimeout), time.Now())
	})
}

func TestCloseSkipsLocksAlreadyLostOrReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{TTL: 9 * time.Second})
		lost, err := r.locker.Acquire(t.Context(), "lost")
		require.NoError(t, err)
		released, err := r.locker.Acquire(t.Context(), "released")
		require.NoError(t, err)
		kept, err := r.locker.Acquire(t.Context(), "kept")
		require.NoError(t, err)
		require.NoError(t, released.Release(t.Context()))
		r.mem.Tamper("lost", "intruder", time.Minute)
		<-lost.Lost() // at the next renewal

		require.NoError(t, r.locker.Close(t.Context()))
		assert.Equal(t, 2, r.faults.Calls(leasetest.OpRelease), "released and kept, not lost")
		owner, _, _ := r.holder("lost")
		assert.Equal(t, "intruder", owner)
		_, _, ok := r.holder("kept")
		assert.False(t, ok)
		_, err = kept.Token()
		assert.ErrorIs(t, err, lease.ErrReleased)
		assert.ErrorIs(t, lost.Release(t.Context()), lease.ErrLost)
	})
}

func TestCloseLeavesAGivenActorSystemRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
		defer sys.Shutdown()
		mem := leasetest.NewMemStore()
		defer mem.Close()
		l, err := lock.New(mem, lock.Config{System: sys})
		require.NoError(t, err)
		g, err := l.Acquire(t.Context(), "res")
		require.NoError(t, err)
		require.NoError(t, l.Close(t.Context()))
		_, err = g.Token()
		assert.ErrorIs(t, err, lease.ErrReleased)

		echo := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if s, ok := c.Message().(string); ok {
				c.Respond(s)
			}
		}))
		res, err := sys.Root.RequestFuture(echo, "still running", time.Second).Result()
		require.NoError(t, err)
		assert.Equal(t, "still running", res)
		require.NoError(t, sys.Root.StopFuture(echo).Wait())
	})
}

func TestCloseRacingAcquisitionsLeavesNothingHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		defer mem.Close()
		l, err := lock.New(mem, lock.Config{})
		require.NoError(t, err)
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			guards []*lock.Guard
		)
		for i := range 50 {
			wg.Go(func() {
				time.Sleep(time.Duration(i%5) * time.Millisecond)
				g, err := l.Acquire(context.Background(), fmt.Sprint("res.", i%10))
				if err != nil {
					assert.ErrorIs(t, err, lease.ErrClosed)
					return
				}
				mu.Lock()
				guards = append(guards, g)
				mu.Unlock()
			})
		}
		time.Sleep(2 * time.Millisecond)
		require.NoError(t, l.Close(context.Background()))
		wg.Wait()
		for i := range 10 {
			_, _, ok := mem.Holder(fmt.Sprint("res.", i))
			assert.False(t, ok, "res.%d is released", i)
		}
		for _, g := range guards {
			_, err := g.Token()
			assert.ErrorIs(t, err, lease.ErrReleased)
		}
	})
}

// A Locker starts its actor system and keeper only when a watchdog is
// due: a lock released sooner leaves the system untouched, and one held
// past its watchdog's delay spawns the keeper (and is renewed).
func TestLockerStartsItsKeeperOnlyWhenAWatchdogIsDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
		defer sys.Shutdown()
		mem := leasetest.NewMemStore()
		defer mem.Close()
		// Every spawn takes an ID from the registry's counter.
		spawns := func() uint64 { return atomic.LoadUint64(&sys.ProcessRegistry.SequenceID) }

		l, err := lock.New(mem, lock.Config{System: sys, TTL: 4 * time.Second})
		require.NoError(t, err)
		before := spawns()
		g, err := l.Acquire(t.Context(), "short")
		require.NoError(t, err)
		require.NoError(t, g.Release(t.Context()))
		synctest.Wait()
		assert.Equal(t, before, spawns(), "a lock released before its watchdog is due needs no keeper")

		g, err = l.Acquire(t.Context(), "long")
		require.NoError(t, err)
		time.Sleep(3 * time.Second) // past the first renewal, in virtual time
		_, err = g.Token()
		require.NoError(t, err, "renewed by its watchdog")
		assert.Equal(t, before+1, spawns(), "the keeper (its watchdogs are spawned by name)")
		require.NoError(t, l.Close(t.Context()))
	})
}
