package shard_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/natsstore"
	"github.com/asterforge/aster/shard"
)

// natsFleet is a fleet over a real nats-server: each member a Host over a
// NATS connection and a natsstore.Store of its own, which is also its
// Directory.
type natsFleet struct {
	t       *testing.T
	srv     *natstest.Server
	shards  []string
	check   *checker
	probe   *observer
	members map[string]*natsMember
}

// natsMember is a Host over a NATS connection of its own.
type natsMember struct {
	host   *shard.Host
	faults *leasetest.FaultStore
	cancel context.CancelFunc
	done   chan error
}

func newNATSFleet(t *testing.T, srv *natstest.Server, shards int) *natsFleet {
	return &natsFleet{t: t, srv: srv, shards: shard.Range("tenant", shards), check: newChecker(),
		members: map[string]*natsMember{}}
}

// start runs a member named name.
func (f *natsFleet) start(name string) {
	t := f.t
	nc, err := nats.Connect(f.srv.ClientURL(), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := natsstore.NewConn(ctx, nc, natsstore.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	if f.probe == nil {
		f.probe = observe(t, st, prefix+".")
	}
	m := &natsMember{faults: leasetest.NewFaultStore(st), done: make(chan error, 1)}
	m.host, err = shard.NewHost(shard.Config{
		Prefix: prefix, Shards: f.shards, Store: m.faults, Directory: st,
		Lease:    lease.Config{OwnerID: name, TTL: 2 * time.Second, RenewInterval: 500 * time.Millisecond},
		Workload: f.check.workload(name), OnEvent: f.check.event(name), Logger: testLogger,
	})
	require.NoError(t, err)
	rctx, rcancel := context.WithCancel(context.Background())
	m.cancel = rcancel
	go func() { m.done <- m.host.Run(rctx) }()
	f.members[name] = m
	t.Cleanup(func() { rcancel(); <-m.done })
}

// balanced reports whether the store shows every shard held by a member,
// each member holding its share.
func (f *natsFleet) balanced() bool {
	counts := map[string]int{}
	for _, s := range f.shards {
		h, ok := f.probe.holder(shard.ShardKey(prefix, s))
		if !ok || f.members[h] == nil {
			return false
		}
		counts[h]++
	}
	n := len(f.members)
	for name := range f.members {
		if c := counts[name]; c < len(f.shards)/n || c > (len(f.shards)+n-1)/n {
			return false
		}
	}
	return true
}

func (f *natsFleet) await(what string, limit time.Duration) {
	f.t.Helper()
	began := time.Now()
	require.Eventually(f.t, f.balanced, limit, 20*time.Millisecond, "not balanced after %s", what)
	f.t.Logf("balanced %v after %s", time.Since(began).Round(time.Millisecond), what)
}

// TestFleetOverNATS runs a fleet against a real nats-server: members join,
// one drains, one crashes; the fleet balances after each change and no shard
// ever runs twice at once.
func TestFleetOverNATS(t *testing.T) {
	f := newNATSFleet(t, natstest.Start(t), 16)
	f.start("node-a")
	f.start("node-b")
	f.await("two joined", 10*time.Second)
	f.start("node-c")
	f.await("a third joined", 10*time.Second)

	a := f.members["node-a"]
	require.NoError(t, a.host.Drain(t.Context()))
	a.cancel()
	require.NoError(t, <-a.done)
	a.done <- nil // for the cleanup
	delete(f.members, "node-a")
	f.await("a drain", 10*time.Second)

	b := f.members["node-b"]
	b.faults.FailAll(leasetest.OpAll, lease.ErrUnavailable) // node-b crashes
	b.cancel()
	<-b.done
	b.done <- nil
	delete(f.members, "node-b")
	f.await("a crash", 20*time.Second)
	// The store's view leads the host's own by the time its workloads take
	// to start.
	c := f.members["node-c"].host
	assert.Eventually(t, func() bool { return c.Status().Owned == len(f.shards) }, 5*time.Second, 10*time.Millisecond,
		"node-c runs every shard: %+v", c.Status())
	f.check.safe(t)
}

// After a server restart the members' watches of the fleet are re-created:
// a member that joins afterwards is seen, and given its share, well before
// a watch that was not re-created would speak again (about 19 s).
func TestFleetOverNATSSurvivesServerRestart(t *testing.T) {
	srv := natstest.Start(t)
	f := newNATSFleet(t, srv, 12)
	f.start("node-a")
	f.start("node-b")
	f.await("two joined", 10*time.Second)

	srv.Restart(t)
	f.start("node-c")
	f.await("a third joined after a server restart", 10*time.Second)
	f.check.safe(t)
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
