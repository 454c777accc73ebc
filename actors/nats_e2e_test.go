package actors_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

// instance is one of the fleet in the end-to-end test: a process with its
// own NATS connection and LeaseSupervisor.
type instance struct {
	owner  string
	cancel context.CancelFunc
	done   chan error
}

// fleet records what the instances report.
type fleet struct {
	active    atomic.Int32 // workloads running right now, across instances
	maxActive atomic.Int32
	mu        sync.Mutex
	leaders   []string    // owners in the order they acquired
	acquired  []time.Time // when
	released  map[string]time.Time
	events    chan actors.Event
}

func (f *fleet) workload() actors.Workload {
	return actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
		n := f.active.Add(1)
		for {
			m := f.maxActive.Load()
			if n <= m || f.maxActive.CompareAndSwap(m, n) {
				break
			}
		}
		<-ctx.Done()
		f.active.Add(-1)
		return nil
	})
}

func (f *fleet) hook(ev actors.Event) {
	_, owner := ev.Lease()
	f.mu.Lock()
	switch ev.(type) {
	case actors.Acquired:
		f.leaders = append(f.leaders, owner)
		f.acquired = append(f.acquired, time.Now())
	case actors.Released:
		f.released[owner] = time.Now()
	}
	f.mu.Unlock()
	select {
	case f.events <- ev:
	default:
	}
}

func (f *fleet) snapshot() ([]string, []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.leaders...), append([]time.Time(nil), f.acquired...)
}

// waitFor waits (in real time, bounded) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNATSThreeSupervisorsOneLeaderAndHandover runs three LeaseSupervisors,
// each with its own connection, against a real nats-server: exactly one
// leads, and a graceful stop hands the lease over through the watch, well
// before any standby's poll could have fired.
func TestNATSThreeSupervisorsOneLeaderAndHandover(t *testing.T) {
	srv := natstest.Start(t)
	const retry = 30 * time.Second // a poll can only fire after 3/4 of it
	lc := lease.Config{LeaseID: "e2e.outbox", TTL: 2 * time.Second, StandbyRetryInterval: retry}
	f := &fleet{released: map[string]time.Time{}, events: make(chan actors.Event, 256)}

	var instances []*instance
	for i := range 3 {
		store, err := natsstore.Dial(t.Context(), natsstore.DialOptions{URLs: []string{srv.ClientURL()},
			Name: fmt.Sprintf("instance-%d", i), ReconnectWait: 20 * time.Millisecond}, natsstore.Config{})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, store.Close()) })
		cfg := lc
		cfg.OwnerID = lease.NewOwnerID()
		sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{
			Lease: cfg, Store: store, Workload: f.workload(), OnEvent: f.hook,
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		in := &instance{owner: cfg.OwnerID, cancel: cancel, done: make(chan error, 1)}
		go func() { in.done <- sup.Run(ctx) }()
		instances = append(instances, in)
	}
	t.Cleanup(func() {
		for _, in := range instances {
			in.cancel()
		}
	})

	waitFor(t, "a leader", func() bool { l, _ := f.snapshot(); return len(l) == 1 })
	time.Sleep(3 * time.Second) // several renewals, and standbys polling nothing
	leaders, _ := f.snapshot()
	require.Len(t, leaders, 1, "exactly one instance leads")
	assert.EqualValues(t, 1, f.active.Load())

	var first *instance
	for _, in := range instances {
		if in.owner == leaders[0] {
			first = in
		}
	}
	require.NotNil(t, first)
	first.cancel()
	require.NoError(t, <-first.done)
	waitFor(t, "a second leader", func() bool { l, _ := f.snapshot(); return len(l) == 2 })
	leaders, acquiredAt := f.snapshot()
	assert.NotEqual(t, leaders[0], leaders[1])
	f.mu.Lock()
	releasedAt, ok := f.released[leaders[0]]
	f.mu.Unlock()
	require.True(t, ok, "the first leader released the lease")
	handover := acquiredAt[1].Sub(releasedAt)
	t.Logf("handover through the watch took %v", handover)
	assert.Less(t, handover, retry*3/4, "taken over through the watch, not by a poll")

	for _, in := range instances {
		if in != first {
			in.cancel()
			require.NoError(t, <-in.done)
		}
	}
	assert.EqualValues(t, 1, f.maxActive.Load(), "never two workloads at once")
	assert.EqualValues(t, 0, f.active.Load())
}

// TestNATSLapsedLeaderResumesAfterAServerRestart attacks the lapse on a real
// server: the server stops right after a renewal and restarts past the
// leader's renew deadline (8 s at TTL 10 s with a 2 s renew interval), and
// past the lease's TTL and a few seconds more too (13 s): the outage
// outlasts the TTL since the last renewal. The leader stops its workload at
// the deadline, then goes on with the same token once the server takes its
// renewal. The standby polls every 250 ms and would take the lease by
// observation the moment the server is back, had it counted the outage
// towards the TTL; its attempts failed during the outage, so it counts the
// TTL again from when the server answers. (A restarted server does not
// expire what ran out while it was down, seconds after it is back; a
// cluster does, and the server's grace of one TTL beyond the lease's,
// natsstore.Config.ExpiryGrace, covers that: see the chaos suite's cluster
// scenarios.) The standby never leads, and two workloads never run at once.
func TestNATSLapsedLeaderResumesAfterAServerRestart(t *testing.T) {
	srv := natstest.Start(t)
	lc := lease.Config{LeaseID: "e2e.lapse", TTL: 10 * time.Second, RenewInterval: 2 * time.Second,
		SafetyMargin: time.Second, StopTimeout: time.Second, StandbyRetryInterval: 250 * time.Millisecond}
	f := &fleet{released: map[string]time.Time{}, events: make(chan actors.Event, 256)}
	var mu sync.Mutex
	var acquired []actors.Acquired
	var renewedAt, poisonedAt time.Time
	hook := func(ev actors.Event) {
		mu.Lock()
		switch e := ev.(type) {
		case actors.Acquired:
			acquired = append(acquired, e)
		case actors.Renewed:
			renewedAt = time.Now()
		case actors.Poisoned:
			poisonedAt = time.Now()
		}
		mu.Unlock()
		f.hook(ev)
	}
	for i := range 2 {
		store, err := natsstore.Dial(t.Context(), natsstore.DialOptions{URLs: []string{srv.ClientURL()},
			Name: fmt.Sprintf("instance-%d", i), ReconnectWait: 20 * time.Millisecond}, natsstore.Config{})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, store.Close()) })
		cfg := lc
		cfg.OwnerID = fmt.Sprintf("instance-%d", i)
		sup, err := actors.NewLeaseSupervisor(actors.SupervisorConfig{Lease: cfg, Store: store,
			Workload: f.workload(), OnEvent: hook})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- sup.Run(ctx) }()
		t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })
	}

	renewed := func() time.Time { mu.Lock(); defer mu.Unlock(); return renewedAt }
	waitFor(t, "a renewal", func() bool { return !renewed().IsZero() })
	last := renewed()
	waitFor(t, "the next renewal", func() bool { return renewed().After(last) })
	srv.Shutdown() // right after a renewal
	down := time.Now()
	time.Sleep(13*time.Second - time.Since(renewed()))
	require.EqualValues(t, 0, f.active.Load(), "the workload stopped at the renew deadline")
	srv.Restart(t)
	t.Logf("server down %v, restarted %v after the last renewal", time.Since(down), time.Since(renewed()))

	waitFor(t, "the lapsed term to resume", func() bool { mu.Lock(); defer mu.Unlock(); return len(acquired) >= 2 })
	mu.Lock()
	defer mu.Unlock()
	require.False(t, poisonedAt.IsZero(), "lapsed at the deadline")
	_, owner0 := acquired[0].Lease()
	_, owner1 := acquired[1].Lease()
	assert.Equal(t, owner0, owner1, "the same instance")
	assert.True(t, acquired[1].Resumed, "resumed, not acquired again")
	assert.Equal(t, acquired[0].Token, acquired[1].Token, "with the same token")
	assert.False(t, acquired[1].Handover)
	assert.EqualValues(t, 1, f.maxActive.Load(), "never two workloads at once")
}
