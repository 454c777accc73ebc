package shard_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natsdir"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/shard"
)

// natsMember is a Host over a NATS connection of its own.
type natsMember struct {
	host   *shard.Host
	faults *leasetest.FaultStore
	cancel context.CancelFunc
	done   chan error
}

// TestFleetOverNATS runs a fleet against a real nats-server: members join,
// one drains, one crashes; the fleet balances after each change and no shard
// ever runs twice at once.
func TestFleetOverNATS(t *testing.T) {
	srv := natstest.Start(t)
	check := newChecker()
	shards := shard.Range("tenant", 16)
	var probe *observer
	members := map[string]*natsMember{}
	start := func(name string) {
		nc, err := nats.Connect(srv.ClientURL(), nats.ReconnectBufSize(-1))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		st, err := natsstore.NewConn(ctx, nc, natsstore.Config{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		kv, err := js.KeyValue(ctx, st.Bucket())
		require.NoError(t, err)
		if probe == nil {
			probe = observe(t, natsdir.New(kv, st, 0), prefix+".")
		}
		m := &natsMember{faults: leasetest.NewFaultStore(st), done: make(chan error, 1)}
		m.host, err = shard.NewHost(shard.Config{
			Prefix: prefix, Shards: shards, Store: m.faults, Directory: natsdir.New(kv, st, 0),
			Lease:    lease.Config{OwnerID: name, TTL: 2 * time.Second, RenewInterval: 500 * time.Millisecond},
			Workload: check.workload(name), OnEvent: check.event(name), Logger: testLogger,
		})
		require.NoError(t, err)
		rctx, rcancel := context.WithCancel(context.Background())
		m.cancel = rcancel
		go func() { m.done <- m.host.Run(rctx) }()
		members[name] = m
		t.Cleanup(func() { rcancel(); <-m.done })
	}
	balanced := func() bool {
		counts := map[string]int{}
		for _, s := range shards {
			h, ok := probe.holder(shard.ShardKey(prefix, s))
			if !ok || members[h] == nil {
				return false
			}
			counts[h]++
		}
		for name := range members {
			if c := counts[name]; c < len(shards)/len(members) || c > (len(shards)+len(members)-1)/len(members) {
				return false
			}
		}
		return true
	}
	await := func(what string, limit time.Duration) {
		t.Helper()
		began := time.Now()
		require.Eventually(t, balanced, limit, 20*time.Millisecond, "not balanced after %s", what)
		t.Logf("balanced %v after %s", time.Since(began).Round(time.Millisecond), what)
	}

	start("node-a")
	start("node-b")
	await("two joined", 10*time.Second)
	start("node-c")
	await("a third joined", 10*time.Second)

	require.NoError(t, members["node-a"].host.Drain(t.Context()))
	members["node-a"].cancel()
	require.NoError(t, <-members["node-a"].done)
	members["node-a"].done <- nil // for the cleanup
	delete(members, "node-a")
	await("a drain", 10*time.Second)

	b := members["node-b"]
	b.faults.FailAll(leasetest.OpAll, lease.ErrUnavailable) // node-b crashes
	b.cancel()
	<-b.done
	b.done <- nil
	delete(members, "node-b")
	await("a crash", 20*time.Second)
	assert.Equal(t, len(shards), members["node-c"].host.Status().Owned)
	check.safe(t)
}

// observer follows who holds each lease under a prefix, through a
// Directory: the test's view of the store.
type observer struct {
	mu      sync.Mutex
	holders map[string]string
}

func observe(t *testing.T, dir shard.Directory, prefix string) *observer {
	o := &observer{holders: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	current, changes, err := dir.WatchPrefix(ctx, prefix)
	require.NoError(t, err)
	apply := func(ev lease.Event) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if ev.Kind == lease.EventHeld {
			o.holders[ev.LeaseID] = ev.Holder.OwnerID
		} else {
			delete(o.holders, ev.LeaseID)
		}
	}
	for _, ev := range current {
		apply(ev)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range changes {
			apply(ev)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return o
}

func (o *observer) holder(id string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.holders[id]
	return h, ok
}
