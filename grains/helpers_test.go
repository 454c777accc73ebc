package grains_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/asterforge/aster/grains"
	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/lease"
	"github.com/asterforge/aster/natsstore"
)

const kind = "counter"

// span is one message a grain handled: by which activation, when.
type span struct {
	member     string
	tenure     lease.Tenure
	start, end time.Time
}

// checker records what the counter grains did, and keeps a fence and a
// count per identity, as a downstream store would.
type checker struct {
	mu     sync.Mutex
	spans  map[string][]span
	fences map[string]*lease.Fence
	counts map[string]int64
	stale  int // writes the fences refused
}

func newChecker() *checker {
	return &checker{spans: map[string][]span{}, fences: map[string]*lease.Fence{}, counts: map[string]int64{}}
}

// props is the counter grain: each *wrapperspb.StringValue increments the
// identity's count through its fence, with the activation's tenure.
func (ck *checker) props() *actor.Props {
	return actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*wrapperspb.StringValue); !ok {
			return
		}
		a, ok := grains.ActivationOf(c)
		if !ok {
			panic("no activation in the grain's context")
		}
		start := time.Now()
		t, err := a.Tenure()
		if err != nil {
			return // never: the gate checks the token first
		}
		n, err := ck.write(a.Identity(), t)
		ck.mu.Lock()
		ck.spans[a.Identity()] = append(ck.spans[a.Identity()], span{member: a.Member(), tenure: t, start: start, end: time.Now()})
		ck.mu.Unlock()
		if err != nil {
			return
		}
		c.Respond(&wrapperspb.Int64Value{Value: n})
	})
}

func (ck *checker) write(id string, t lease.Tenure) (int64, error) {
	ck.mu.Lock()
	f := ck.fences[id]
	if f == nil {
		f = &lease.Fence{}
		ck.fences[id] = f
	}
	ck.mu.Unlock()
	var n int64
	err := f.Do(t, func() error {
		ck.mu.Lock()
		defer ck.mu.Unlock()
		ck.counts[id]++
		n = ck.counts[id]
		return nil
	})
	if err != nil {
		ck.mu.Lock()
		ck.stale++
		ck.mu.Unlock()
	}
	return n, err
}

// overlaps returns, per identity, the pairs of spans of two different
// activations that overlap in time: two activations acting at once.
func (ck *checker) overlaps() []string {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	var out []string
	for id, ss := range ck.spans {
		for i := range ss {
			for j := i + 1; j < len(ss); j++ {
				a, b := ss[i], ss[j]
				if a.tenure != b.tenure && a.start.Before(b.end) && b.start.Before(a.end) {
					out = append(out, fmt.Sprintf("%s: %s token %d and %s token %d", id, a.member, a.tenure.Token, b.member, b.tenure.Token))
				}
			}
		}
	}
	return out
}

// activations returns the tenures that handled id's messages, in order.
func (ck *checker) activations(id string) []span {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	var out []span
	for _, s := range ck.spans[id] {
		if len(out) == 0 || out[len(out)-1].tenure != s.tenure {
			out = append(out, s)
		}
	}
	return out
}

// testMember is one member: its own NATS connection through a proxy (to
// cut it off), store, actor system and cluster.
type testMember struct {
	m     *grains.Member
	c     *cluster.Cluster
	proxy *natstest.Proxy
}

var quiet = slog.New(slog.DiscardHandler)

func startMember(t *testing.T, srv *natstest.Server, ck *checker, cfg grains.Config) *testMember {
	t.Helper()
	return startMemberWith(t, srv, ck.props(), cfg)
}

// startMemberProps starts a member whose kind runs props, at the fast
// Config.
func startMemberProps(t testing.TB, srv *natstest.Server, props *actor.Props) *testMember {
	return startMemberWith(t, srv, props, fast)
}

func startMemberWith(t testing.TB, srv *natstest.Server, props *actor.Props, cfg grains.Config) *testMember {
	t.Helper()
	return startMemberOver(t, srv, props, cfg, nil)
}

// startMemberOver starts a member whose store is wrap's (when not nil)
// over the natsstore.Store it opens.
func startMemberOver(t testing.TB, srv *natstest.Server, props *actor.Props, cfg grains.Config,
	wrap func(grains.Store) grains.Store) *testMember {
	t.Helper()
	p := natstest.StartProxy(t, srv.ClientURL())
	nc, err := nats.Connect(p.URL(), nats.IgnoreDiscoveredServers(), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := natsstore.NewConn(ctx, nc, natsstore.Config{Logger: testLogger})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	cfg.Logger = testLogger
	var store grains.Store = st
	if wrap != nil {
		store = wrap(st)
	}
	m, err := grains.New(store, cfg)
	require.NoError(t, err)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	ccfg := cluster.Configure("test", m.Provider(), m.Lookup(), remote.Configure("127.0.0.1", 0),
		cluster.WithKinds(cluster.NewKind(kind, props)))
	c := cluster.New(sys, ccfg)
	require.NoError(t, grains.StartMember(c))
	tm := &testMember{m: m, c: c, proxy: p}
	t.Cleanup(tm.stop)
	return tm
}

// stop closes the member and its remote.
func (tm *testMember) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = grains.StopMember(ctx, tm.c)
	waitServeReturned()
}

// waitServeReturned waits (up to 2 s) until no gRPC server's Serve
// runs: remote.Start sets grpc's global logger, which a Serve that is
// returning reads, so the next member's start would race with it.
func waitServeReturned() {
	buf := make([]byte, 1<<20)
	for range 200 {
		n := runtime.Stack(buf, true)
		if !bytes.Contains(buf[:n], []byte("grpc.(*Server).Serve(")) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// call increments id's counter from tm.
func (tm *testMember) call(ctx context.Context, id string) (int64, error) {
	res, err := tm.m.Request(ctx, kind, id, &wrapperspb.StringValue{Value: id})
	if err != nil {
		return 0, err
	}
	return res.(*wrapperspb.Int64Value).GetValue(), nil
}

// fast is the members' Config in tests: sessions of 2 s.
var fast = grains.Config{Prefix: "test", TTL: 2 * time.Second, RenewInterval: 500 * time.Millisecond}
