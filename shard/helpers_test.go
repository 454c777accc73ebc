package shard_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/actors"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/lease/leasetest"
	"github.com/asterforge/aster/shard"
	"github.com/asterforge/aster/shard/shardtest"
)

// TestMain checks for leaked goroutines; protoactor-go's dead-letter
// throttle ends by itself one second after it starts.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

var testLogger *slog.Logger

func init() {
	if os.Getenv("SHARD_DEBUG") != "" {
		testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

const prefix = "fleet"

// rig is a fleet in one process: a store, the hosts, and a checker that
// every shard's workload reports to. Make it inside a synctest bubble.
type rig struct {
	t      testing.TB
	mem    *shardtest.MemStore
	shards []string
	lc     lease.Config
	check  *checker
	hosts  map[string]*member
	tune   func(*shard.Config)
}

func newRig(t testing.TB, shards int) *rig {
	r := &rig{t: t, mem: shardtest.NewMemStore(), shards: shard.Range("tenant", shards),
		lc:    lease.Config{TTL: 10 * time.Second},
		check: newChecker(), hosts: map[string]*member{}}
	t.Cleanup(func() {
		for _, m := range r.hosts {
			m.stop()
		}
		_ = r.mem.Close()
		time.Sleep(2 * time.Second) // protoactor's dead-letter throttle, in virtual time
	})
	return r
}

// member is one running Host.
type member struct {
	name   string
	host   *shard.Host
	faults *leasetest.FaultStore
	cancel context.CancelFunc
	done   chan error
	err    error
}

// start starts a member.
func (r *rig) start(name string) *member {
	m := &member{name: name, faults: leasetest.NewFaultStore(r.mem), done: make(chan error, 1)}
	lc := r.lc
	lc.OwnerID = name
	cfg := shard.Config{
		Prefix: prefix, Shards: r.shards, Lease: lc, Store: m.faults, Directory: r.mem,
		Workload: r.check.workload(name), Logger: testLogger, OnEvent: r.check.event(name),
		Meta: map[string]string{"addr": name + ":7000"},
	}
	if r.tune != nil {
		r.tune(&cfg)
	}
	h, err := shard.NewHost(cfg)
	require.NoError(r.t, err)
	m.host = h
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { m.done <- h.Run(ctx) }()
	r.hosts[name] = m
	return m
}

// stop ends Run (a graceful leave) and returns its error.
func (m *member) stop() error {
	if m.cancel != nil {
		m.cancel()
		m.err = <-m.done
		m.cancel = nil
	}
	return m.err
}

// leave drains a member, then stops it. A Drain that does not return
// within a minute fails the test (in a synctest bubble, a minute of virtual
// time once everything else is blocked).
func (r *rig) leave(name string) {
	m := r.hosts[name]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(r.t, m.host.Drain(ctx), "drain %s", name)
	require.NoError(r.t, m.stop())
	delete(r.hosts, name)
}

// crash cuts a member from the store, then stops it: it renews nothing and
// releases nothing, as a killed process.
func (r *rig) crash(name string) {
	m := r.hosts[name]
	m.faults.FailAll(leasetest.OpAll, lease.ErrUnavailable)
	_ = m.stop()
	delete(r.hosts, name)
}

// names returns the running members' names, sorted.
func (r *rig) names() []string {
	var out []string
	for n := range r.hosts {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// holders reads who holds each shard at the store.
func (r *rig) holders() map[string]string {
	out := map[string]string{}
	for _, s := range r.shards {
		if h, _, ok := r.mem.Holder(shard.ShardKey(prefix, s)); ok {
			out[s] = h.OwnerID
		}
	}
	return out
}

// balanced reports whether, at the store, every shard is held by a running
// member and every member holds S/N or S/N+1 of them.
func (r *rig) balanced() bool {
	names := r.names()
	if len(names) == 0 {
		return false
	}
	h := r.holders()
	if len(h) != len(r.shards) {
		return false
	}
	counts := map[string]int{}
	for _, o := range h {
		if !slices.Contains(names, o) {
			return false
		}
		counts[o]++
	}
	floor := len(r.shards) / len(names)
	for _, n := range names {
		if c := counts[n]; c != floor && c != floor+1 {
			return false
		}
	}
	return true
}

// awaitBalance waits, in virtual time, until the fleet is balanced, at most
// until limit after start, and returns how long after start it was.
func (r *rig) awaitBalance(start time.Time, limit time.Duration) time.Duration {
	r.t.Helper()
	for !r.balanced() {
		if time.Since(start) > limit {
			r.t.Fatalf("not balanced within %v: %v", limit, r.table())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// table counts the shards each owner holds at the store.
func (r *rig) table() map[string]int {
	c := map[string]int{}
	for _, o := range r.holders() {
		c[o]++
	}
	return c
}

// checker is what every shard's workload reports to: it checks that no
// shard ever runs twice at once, and writes through a fence per shard.
type checker struct {
	mu       sync.Mutex
	active   map[string]string // shard -> the member running it
	overlaps []string
	fences   map[string]*lease.Fence
	rejected int
	started  int
	causes   map[string]error // member/shard -> the cause of the last stop
	events   []event
	idle     bool // workloads write once, not every 250 ms (benchmarks)
}

type event struct {
	member string
	ev     shard.Event
	at     time.Time
}

func newChecker() *checker {
	return &checker{active: map[string]string{}, fences: map[string]*lease.Fence{}, causes: map[string]error{}}
}

func (c *checker) workload(member string) func(string) actors.Workload {
	return func(s string) actors.Workload {
		return actors.WorkloadFunc(func(ctx context.Context, _ lease.Token) error {
			c.begin(member, s)
			defer func() { c.end(member, s, context.Cause(ctx)) }()
			term, _ := actors.TermFrom(ctx)
			if c.idle {
				if tn, err := term.Tenure(); err == nil {
					c.write(s, tn)
				}
				<-ctx.Done()
				return nil
			}
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				if tn, err := term.Tenure(); err == nil {
					c.write(s, tn)
				}
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
			}
		})
	}
}

func (c *checker) begin(member, s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started++
	if other, ok := c.active[s]; ok {
		c.overlaps = append(c.overlaps, fmt.Sprintf("%s started on %s while it ran on %s", s, member, other))
	}
	c.active[s] = member
}

func (c *checker) end(member, s string, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active[s] == member {
		delete(c.active, s)
	}
	c.causes[member+"/"+s] = cause
}

func (c *checker) write(s string, t lease.Tenure) {
	c.mu.Lock()
	f := c.fences[s]
	if f == nil {
		f = &lease.Fence{}
		c.fences[s] = f
	}
	c.mu.Unlock()
	if f.Admit(t) != nil {
		c.mu.Lock()
		c.rejected++
		c.mu.Unlock()
	}
}

func (c *checker) event(member string) func(shard.Event) {
	return func(ev shard.Event) {
		if _, ok := ev.(shard.LeaseEvent); ok {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.events = append(c.events, event{member: member, ev: ev, at: time.Now()})
	}
}

// cause returns the cause with which member's workload of s last stopped.
func (c *checker) cause(member, s string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.causes[member+"/"+s]
}

// mark returns a position in the event log.
func (c *checker) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

// since returns the events of type T after mark.
func since[T shard.Event](c *checker, mark int) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []T
	for _, e := range c.events[mark:] {
		if ev, ok := e.ev.(T); ok {
			out = append(out, ev)
		}
	}
	return out
}

// safe checks that no shard ran twice at once and no fenced write was
// refused.
func (c *checker) safe(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Empty(t, c.overlaps, "a shard ran on two members at once")
	require.Zero(t, c.rejected, "a fence refused a write")
}

// leasetestStore is a store for tests that run no host.
func leasetestStore(t *testing.T) *shardtest.MemStore {
	s := shardtest.NewMemStore()
	t.Cleanup(func() { _ = s.Close() })
	return s
}
