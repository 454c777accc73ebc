package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
)

const testLease = "test.background"

// supRig is a store shared by the supervisors of one test. It must be made
// inside a synctest bubble.
type supRig struct {
	mem    *leasetest.MemStore
	faults *leasetest.FaultStore
	rec    *recorder
}

func newSupRig(t *testing.T) *supRig {
	r := &supRig{mem: leasetest.NewMemStore(), rec: &recorder{}}
	r.faults = leasetest.NewFaultStore(r.mem)
	t.Cleanup(func() {
		_ = r.mem.Close()
		drainDeadLetters()
	})
	return r
}

// config returns a supervisor config for owner on the rig's fault store.
func (r *supRig) config(owner string, w Workload, lc lease.Config) SupervisorConfig {
	lc.LeaseID, lc.OwnerID = testLease, owner
	return SupervisorConfig{Lease: lc, Store: r.faults, Workload: w, OnEvent: r.rec.Hook}
}

func (r *supRig) supervisor(t *testing.T, cfg SupervisorConfig) *LeaseSupervisor {
	s, err := NewLeaseSupervisor(cfg)
	require.NoError(t, err)
	return s
}

// holder returns the current owner at the store, or "".
func (r *supRig) holder() string {
	h, _, _ := r.mem.Holder(testLease)
	return h.OwnerID
}

// drainDeadLetters waits, in virtual time, for protoactor's dead-letter
// throttle goroutine to end: a Stop sent to a child that had already
// stopped (unavoidable when a parent stops before handling its children's
// Terminated messages) starts one that lives DeadLetterThrottleInterval (1 s).
func drainDeadLetters() { time.Sleep(2 * time.Second) }

// running is a supervisor started by Run on a goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(s *LeaseSupervisor) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	return r
}

// stop cancels Run's context and returns what Run returned.
func (r *running) stop() error {
	r.cancel()
	return <-r.done
}

// counter is a function workload that counts its starts and stops and
// records the cause of every cancellation.
type counter struct {
	started, stopped atomic.Int32
	mu               sync.Mutex
	tokens           []lease.Token
	causes           []error
	stoppedAt        []time.Time
	// onStop, if set, runs after the context is done, before returning.
	onStop func(ctx context.Context)
}

func (c *counter) workload() Workload {
	return WorkloadFunc(func(ctx context.Context, token lease.Token) error {
		c.started.Add(1)
		c.mu.Lock()
		c.tokens = append(c.tokens, token)
		c.mu.Unlock()
		<-ctx.Done()
		if c.onStop != nil {
			c.onStop(ctx)
		}
		c.mu.Lock()
		c.causes = append(c.causes, context.Cause(ctx))
		c.stoppedAt = append(c.stoppedAt, time.Now())
		c.mu.Unlock()
		c.stopped.Add(1)
		return nil
	})
}

func (c *counter) lastCause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.causes) == 0 {
		return nil
	}
	return c.causes[len(c.causes)-1]
}
