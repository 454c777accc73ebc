package lock_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
	"github.com/asterforge/aster/natsstore"
)

// Half of the nodes hold their locks under a session, half with leases of
// their own, and the session nodes' renewals fail often: a failing session
// loses every lock under it at once, before contenders may take them.
func TestMutualExclusionUnderSessionsWithFailingRenewals(t *testing.T) {
	const nodes, perNode, rounds = 4, 6, 6
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		rigs := make([]*rig, nodes)
		for i := range rigs {
			rigs[i] = newRigOn(t, mem, lock.Config{OwnerID: "node-" + string(rune('a'+i)), TTL: 3 * time.Second,
				RetryInterval: time.Second, Session: i%2 == 0})
		}
		stopFaults := make(chan struct{})
		var faulting sync.WaitGroup
		faulting.Go(func() {
			for {
				select {
				case <-stopFaults:
					return
				case <-time.After(700 * time.Millisecond):
				}
				for _, r := range rigs {
					r.faults.FailRenewals(rand.IntN(40))
				}
			}
		})
		var x exclusion
		x.mayLose = true
		var lost atomic.Int32
		var wg sync.WaitGroup
		for n := range nodes {
			for range perNode {
				wg.Go(func() {
					for range rounds {
						g, err := rigs[n].locker.Acquire(context.Background(), "shared")
						if !assert.NoError(t, err) {
							return
						}
						x.critical(t, g, func() {
							select { // work for up to 4 s, or until the lock is lost
							case <-time.After(time.Duration(rand.IntN(4000)) * time.Millisecond):
							case <-g.Lost():
								lost.Add(1)
							}
						})
						_ = g.Release(context.Background())
					}
				})
			}
		}
		wg.Wait()
		close(stopFaults)
		faulting.Wait()
		x.verify(t, nodes*perNode*rounds)
		t.Logf("%d critical sections ended by a lost lock", lost.Load())
		assert.Positive(t, lost.Load(), "the faults did end some sessions")
	})
}

func TestMutualExclusionUnderSessionsOnNATS(t *testing.T) {
	const nodes, perNode, rounds = 4, 6, 5 // 24 contenders, 120 critical sections
	srv := natstest.Start(t)
	lockers := make([]*lock.Locker, nodes)
	for i := range lockers {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		store, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()},
			ReconnectWait: 20 * time.Millisecond}, natsstore.Config{Bucket: "exclusion"})
		cancel()
		require.NoError(t, err)
		l, err := lock.New(store, lock.Config{OwnerID: "node-" + string(rune('a'+i)), TTL: 2 * time.Second,
			RetryInterval: 500 * time.Millisecond, Session: i%2 == 0})
		require.NoError(t, err)
		lockers[i] = l
		t.Cleanup(func() {
			assert.NoError(t, l.Close(context.Background()))
			assert.NoError(t, store.Close())
		})
	}
	var x exclusion
	var wg sync.WaitGroup
	for n := range nodes {
		for range perNode {
			wg.Go(func() {
				for range rounds {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					g, err := lockers[n].Acquire(ctx, "shared")
					cancel()
					if !assert.NoError(t, err) {
						return
					}
					x.critical(t, g, func() {
						for range 10 {
							runtime.Gosched()
						}
					})
					ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
					assert.NoError(t, g.Release(ctx))
					cancel()
				}
			})
		}
	}
	wg.Wait()
	x.verify(t, nodes*perNode*rounds)
}
