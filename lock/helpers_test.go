package lock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/lock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder keeps the events a hook saw, with the time of each.
type recorder struct {
	mu  sync.Mutex
	evs []lock.Event
	at  []time.Time
}

func (r *recorder) hook(ev lock.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
	r.at = append(r.at, time.Now())
}

// all returns the events of type T, and when each was seen.
func all[T lock.Event](r *recorder) ([]T, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	var at []time.Time
	for i, ev := range r.evs {
		if e, ok := ev.(T); ok {
			out = append(out, e)
			at = append(at, r.at[i])
		}
	}
	return out, at
}

func count[T lock.Event](r *recorder) int {
	evs, _ := all[T](r)
	return len(evs)
}

// Timing tests stop a watchdog (Release, Close) between its renewals, never
// at the virtual instant its timer fires: the Watchdog's timer callback can
// race with its stop and send a tick to an actor that is gone, and
// protoactor answers a dead letter with a goroutine that sleeps 1 s, which
// would outlive the synctest bubble.

// rig is one Locker over a FaultStore over a MemStore, closed when the
// test ends. Make it inside a synctest bubble for timing tests.
type rig struct {
	mem    *leasetest.MemStore
	faults *leasetest.FaultStore
	locker *lock.Locker
	rec    *recorder
}

func newRig(t *testing.T, cfg lock.Config) *rig {
	t.Helper()
	mem := leasetest.NewMemStore()
	return newRigOn(t, mem, cfg)
}

// newRigOn makes a rig over an existing MemStore, for a second node.
func newRigOn(t *testing.T, mem *leasetest.MemStore, cfg lock.Config) *rig {
	t.Helper()
	r := &rig{mem: mem, faults: leasetest.NewFaultStore(mem), rec: &recorder{}}
	if cfg.OnEvent == nil {
		cfg.OnEvent = r.rec.hook
	}
	var err error
	r.locker, err = lock.New(r.faults, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = r.locker.Close(context.Background())
		_ = mem.Close()
	})
	return r
}

// holder returns the owner and revision of resource in the store.
func (r *rig) holder(resource string) (string, uint64, bool) {
	h, rev, ok := r.mem.Holder(resource)
	return h.OwnerID, rev, ok
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// recordingStore records the leases passed to Renew, with their times.
type recordingStore struct {
	lease.Store
	mu      sync.Mutex
	renewed []lease.Lease
	at      []time.Time
}

func (s *recordingStore) Renew(ctx context.Context, l lease.Lease) (lease.Lease, error) {
	s.mu.Lock()
	s.renewed = append(s.renewed, l)
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	return s.Store.Renew(ctx, l)
}

func (s *recordingStore) renewals() ([]lease.Lease, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]lease.Lease(nil), s.renewed...), append([]time.Time(nil), s.at...)
}

// pollOnly hides a store's Watch: a store that cannot watch.
type pollOnly struct{ lease.Store }
