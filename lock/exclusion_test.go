package lock_test

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
	"github.com/asterforge/aster/natsstore"
)

// exclusion records critical sections and checks that none overlapped and
// that their fenced writes were never stale. Sections are ordered by a
// logical clock (one atomic counter), which is exact in virtual time too.
type exclusion struct {
	clock  atomic.Uint64
	inside atomic.Int32
	fence  lease.Fence
	// mayLose: renewals fail, so a guard can be lost as soon as Acquire
	// returned it, before its section's write (its renew deadline falling
	// at that instant): such a section writes nothing and is not counted.
	mayLose bool

	mu        sync.Mutex
	sections  []section
	overlaps  int
	unwritten int         // sections whose guard was lost before their write
	written   lease.Token // the fenced resource: the token of the last write
}

type section struct {
	start, end uint64 // logical times
	from, to   time.Time
	token      lease.Token
	owner      string
}

// critical runs one critical section under g: enter, a fenced write with
// the guard's token, work, leave.
func (x *exclusion) critical(t *testing.T, g *lock.Guard, work func()) {
	s := section{start: x.clock.Add(1), from: time.Now(), owner: g.OwnerID()}
	if n := x.inside.Add(1); n != 1 {
		x.mu.Lock()
		x.overlaps++
		x.mu.Unlock()
	}
	err := g.Fenced(&x.fence, func(token lease.Token) error {
		s.token = token
		x.mu.Lock()
		defer x.mu.Unlock()
		if token < x.written {
			t.Errorf("stale write %d after %d", token, x.written)
		}
		x.written = token
		return nil
	})
	if x.mayLose && errors.Is(err, lease.ErrLost) {
		x.inside.Add(-1)
		x.mu.Lock()
		x.unwritten++
		x.mu.Unlock()
		return
	}
	assert.NoError(t, err, "the fenced write of a valid holder is accepted")
	work()
	x.inside.Add(-1)
	s.to, s.end = time.Now(), x.clock.Add(1)
	x.mu.Lock()
	x.sections = append(x.sections, s)
	x.mu.Unlock()
}

// verify checks n sections: no overlap (in logical and in monotonic
// time), tokens strictly increasing from one section to the next, and a
// fence that accepted every write and rejected none.
func (x *exclusion) verify(t *testing.T, n int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n -= x.unwritten
	require.Len(t, x.sections, n)
	assert.Zero(t, x.overlaps, "two holders inside at once")
	slices.SortFunc(x.sections, func(a, b section) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(x.sections); i++ {
		prev, cur := x.sections[i-1], x.sections[i]
		assert.Greater(t, cur.start, prev.end, "section %d (%s) overlaps section %d (%s)", i, cur.owner, i-1, prev.owner)
		assert.False(t, cur.from.Before(prev.to), "section %d starts before section %d ends", i, i-1)
		assert.Greater(t, cur.token, prev.token, "tokens strictly increase: section %d", i)
	}
	st := x.fence.Stats()
	assert.Equal(t, uint64(n), st.Accepted)
	assert.Zero(t, st.Rejected, "no stale write")
	assert.Equal(t, x.sections[n-1].token, st.Highest.Token)
}

func TestMutualExclusionInMemory(t *testing.T) {
	const nodes, perNode, rounds = 4, 10, 12 // 40 contenders, 480 critical sections
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		lockers := make([]*lock.Locker, nodes)
		for i := range lockers {
			lockers[i] = newRigOn(t, mem, lock.Config{OwnerID: "node-" + string(rune('a'+i)), TTL: 3 * time.Second}).locker
		}
		var x exclusion
		var wg sync.WaitGroup
		for n := range nodes {
			for range perNode {
				wg.Go(func() {
					for range rounds {
						g, err := lockers[n].Acquire(context.Background(), "shared")
						if !assert.NoError(t, err) {
							return
						}
						x.critical(t, g, func() { time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) })
						assert.NoError(t, g.Release(context.Background()))
					}
				})
			}
		}
		wg.Wait()
		x.verify(t, nodes*perNode*rounds)
	})
}

func TestMutualExclusionWithFailingRenewals(t *testing.T) {
	// Half of the nodes renew through a store that fails often. Their
	// holders either renew in time or are poisoned before their key
	// expires; a holder that sees its guard end stops at once. Either way
	// no two holders are inside at once and no write is stale.
	const nodes, perNode, rounds = 4, 8, 6
	synctest.Test(t, func(t *testing.T) {
		mem := leasetest.NewMemStore()
		rigs := make([]*rig, nodes)
		for i := range rigs {
			rigs[i] = newRigOn(t, mem, lock.Config{OwnerID: "node-" + string(rune('a'+i)), TTL: 3 * time.Second,
				RetryInterval: time.Second})
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
				for _, r := range rigs[:nodes/2] {
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
		assert.Positive(t, lost.Load(), "the faults did poison some holders")
	})
}

func TestMutualExclusionOnNATS(t *testing.T) {
	const nodes, perNode, rounds = 4, 8, 5 // 32 contenders, 160 critical sections
	srv := natstest.Start(t)
	lockers := make([]*lock.Locker, nodes)
	for i := range lockers {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		store, err := natsstore.Dial(ctx, natsstore.DialOptions{URLs: []string{srv.ClientURL()},
			ReconnectWait: 20 * time.Millisecond}, natsstore.Config{Bucket: "exclusion"})
		cancel()
		require.NoError(t, err)
		l, err := lock.New(store, lock.Config{OwnerID: "node-" + string(rune('a'+i)), TTL: 2 * time.Second,
			RetryInterval: 500 * time.Millisecond})
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
