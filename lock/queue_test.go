package lock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

// An uncontended Acquire makes one store call and opens no watch: a watch
// (a JetStream consumer) costs more than the acquisition itself.
func TestUncontendedAcquireOpensNoWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{OwnerID: "node-a"})
		g, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		assert.Equal(t, 1, r.faults.Calls(leasetest.OpAcquire))
		assert.Zero(t, r.faults.Calls(leasetest.OpWatch), "no watch for a lock that was free")
		require.NoError(t, g.Release(t.Context()))
	})
}

// The Acquire calls of one Locker waiting for one resource queue up: only
// the first contends at the store, and they get the lock in the order they
// came, each handed the turn by its predecessor's Release without a poll.
func TestWaitersOfOneLockerQueue(t *testing.T) {
	const waiters = 5
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		a := newRigOn(t, mem, lock.Config{OwnerID: "node-a"})
		b := newRigOn(t, mem, lock.Config{OwnerID: "node-b", RetryInterval: time.Hour})
		ga, err := a.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)

		var (
			mu    sync.Mutex
			order []int
			wg    sync.WaitGroup
		)
		for i := range waiters {
			wg.Go(func() {
				g, err := b.locker.Acquire(t.Context(), "res")
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(time.Second) // work
				assert.NoError(t, g.Release(t.Context()))
			})
			synctest.Wait() // waiter i is queued before waiter i+1 comes
		}
		assert.Equal(t, 1, b.faults.Calls(leasetest.OpAcquire), "only the first waiter asked the store")
		assert.Equal(t, 1, b.faults.Calls(leasetest.OpWatch), "one watch for all of them")

		start := time.Now()
		require.NoError(t, ga.Release(t.Context()))
		wg.Wait()
		assert.Equal(t, []int{0, 1, 2, 3, 4}, order, "first come, first served")
		assert.Equal(t, start.Add(waiters*time.Second), time.Now(), "each took the turn at once, without a poll")
		assert.Equal(t, 1+waiters, b.faults.Calls(leasetest.OpAcquire), "one store call per handover")
	})
}

// A waiter that gives up leaves the queue, and the next one takes its turn.
func TestAWaiterThatGivesUpHandsItsTurnOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		a := newRigOn(t, mem, lock.Config{OwnerID: "node-a"})
		b := newRigOn(t, mem, lock.Config{OwnerID: "node-b", RetryInterval: time.Hour})
		ga, err := a.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)

		first, cancel := context.WithCancel(t.Context())
		gave := make(chan error, 1)
		go func() {
			_, err := b.locker.Acquire(first, "res")
			gave <- err
		}()
		synctest.Wait()
		got := make(chan *lock.Guard, 1)
		go func() {
			g, err := b.locker.Acquire(t.Context(), "res")
			assert.NoError(t, err)
			got <- g
		}()
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-gave, context.Canceled)
		synctest.Wait()

		releasedAt := time.Now()
		require.NoError(t, ga.Release(t.Context()))
		g := <-got
		assert.Equal(t, releasedAt, time.Now(), "the second waiter contends now, woken by the watch")
		require.NoError(t, g.Release(t.Context()))
	})
}

// A guard released by its own Locker hands the lock to that Locker's next
// waiter at once, even when the store's watch is silent.
func TestALocalReleaseWakesTheNextWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{OwnerID: "node-a", RetryInterval: time.Hour})
		r.faults.SilenceWatch(true)
		g, err := r.locker.Acquire(t.Context(), "res")
		require.NoError(t, err)
		got := make(chan *lock.Guard, 1)
		go func() {
			g, err := r.locker.Acquire(t.Context(), "res")
			assert.NoError(t, err)
			got <- g
		}()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.Empty(t, got)
		releasedAt := time.Now()
		require.NoError(t, g.Release(t.Context()))
		next := <-got
		assert.Equal(t, releasedAt, time.Now(), "at once, not after a poll")
		require.NoError(t, next.Release(t.Context()))
	})
}

// Many waiters on many resources in one Locker: every one gets its lock
// once, and nothing is left queued.
func TestQueuesOfManyResources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, lock.Config{OwnerID: "node-a", RetryInterval: time.Hour})
		var wg sync.WaitGroup
		var x [4]exclusion
		for i := range 40 {
			wg.Go(func() {
				res := i % 4
				g, err := r.locker.Acquire(t.Context(), fmt.Sprint("res.", res))
				if !assert.NoError(t, err) {
					return
				}
				x[res].critical(t, g, func() { time.Sleep(100 * time.Millisecond) })
				assert.NoError(t, g.Release(t.Context()))
			})
		}
		wg.Wait()
		for i := range x {
			x[i].verify(t, 10)
		}
		synctest.Wait() // the watchdogs have stopped
		assert.Zero(t, r.locker.Held())
	})
}
