package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/chaos/harness"
)

var bins map[string]string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "chaos-harness-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mod, err := harness.ModuleDir(ctx)
	if err == nil {
		bins, err = harness.Build(ctx, mod, dir, "./cmd/chaos-nats")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		// toxiproxy v2.5.0 (the newest) can leave a stopped proxy's pipe
		// goroutines blocked on a channel send when it is stopped with
		// bytes in flight; the scenario package ignores the same two.
		if err := goleak.Find(
			goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/stream.(*ChanWriter).Write"),
			goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

func kv(t *testing.T, url string) (jetstream.KeyValue, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(url, nats.ReconnectBufSize(-1), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond), nats.Timeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "h", Storage: jetstream.FileStorage})
	require.NoError(t, err)
	return b, nc
}

func TestServerSurvivesKillAndRestart(t *testing.T) {
	srv, err := harness.StartNATS(t, bins["chaos-nats"], t.TempDir())
	require.NoError(t, err)
	b, _ := kv(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rev, err := b.Put(ctx, "k", []byte("v"))
	require.NoError(t, err)

	require.NoError(t, srv.Kill())
	assert.True(t, srv.Proc().Exited())
	require.NoError(t, srv.Start())

	var e jetstream.KeyValueEntry
	require.Eventually(t, func() bool {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		e, err = b.Get(c, "k")
		return err == nil
	}, 15*time.Second, 50*time.Millisecond, "the client reconnects and the data survived: %v", err)
	assert.Equal(t, rev, e.Revision())
}

func TestProxyFaults(t *testing.T) {
	srv, err := harness.StartNATS(t, bins["chaos-nats"], t.TempDir())
	require.NoError(t, err)
	p, err := harness.NewProxies().Proxy(t, "h1", srv.Addr())
	require.NoError(t, err)
	b, nc := kv(t, p.URL())

	put := func(limit time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		_, err := b.Put(ctx, "k", []byte("v"))
		return err
	}
	require.NoError(t, put(5*time.Second))

	require.NoError(t, p.Blackhole())
	require.Error(t, put(200*time.Millisecond), "a blackhole times requests out")
	require.NoError(t, p.Heal())
	require.Eventually(t, func() bool { return put(time.Second) == nil }, 15*time.Second, 20*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	before, err := b.Status(ctx)
	require.NoError(t, err)
	require.NoError(t, p.LoseResponses())
	require.Error(t, put(300*time.Millisecond), "the response is lost")
	require.NoError(t, p.Heal())
	require.Eventually(t, func() bool {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		e, err := b.Get(c, "k")
		return err == nil && e.Revision() > before.Values()
	}, 15*time.Second, 20*time.Millisecond, "the lost-response write was applied")

	require.NoError(t, p.Drop())
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Heal())
	require.Eventually(t, func() bool { return put(time.Second) == nil }, 15*time.Second, 20*time.Millisecond)

	require.NoError(t, p.Delay(100*time.Millisecond))
	start := time.Now()
	require.NoError(t, put(5*time.Second))
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "a round trip pays the delay twice")
	require.NoError(t, p.Heal())
}

func TestProcSignals(t *testing.T) {
	dir := t.TempDir()
	p, err := harness.Start(t, dir, "sleeper", "/bin/sh", "-c", "echo up; exec sleep 60")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.Output() == "up\n" }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Pause())
	require.NoError(t, p.Resume())
	require.Error(t, p.Terminate(10*time.Second), "sleep dies of SIGTERM")
	assert.True(t, p.Exited())
	require.NoError(t, p.Kill(), "killing a dead process is fine")
}

// A cluster's routes all go through the links: an isolated node has no
// route left, its stream leadership moves to the others, and it catches up
// once healed.
func TestClusterIsolation(t *testing.T) {
	ps := harness.NewProxies()
	c, err := harness.StartCluster(t, bins["chaos-nats"], t.TempDir(), 3, ps)
	require.NoError(t, err)
	nc, err := nats.Connect(c.URL(), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond), nats.Timeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b jetstream.KeyValue
	require.Eventually(t, func() bool {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		b, err = js.CreateOrUpdateKeyValue(c, jetstream.KeyValueConfig{Bucket: "h", Storage: jetstream.FileStorage, Replicas: 3})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the cluster elects its leaders: %v", err)
	leader := func() string {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		s, err := js.Stream(c, "KV_h") // as the node the client is connected to sees it
		if err != nil || s.CachedInfo().Cluster == nil {
			return ""
		}
		return s.CachedInfo().Cluster.Leader
	}
	var first string
	require.Eventually(t, func() bool { first = leader(); return first != "" }, 20*time.Second, 50*time.Millisecond)

	k := slices.IndexFunc(c.Nodes, func(n *harness.NATS) bool { return n.Name() == first })
	other := c.Nodes[(k+1)%3]
	nc.Close()
	nc, err = nats.Connect(other.URL(), nats.Timeout(time.Second)) // on the majority's side
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err = jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, c.Isolate(k))
	numRoutes := func(n *harness.NATS) int {
		body, _, err := n.Get(ctx, "/routez")
		require.NoError(t, err)
		var rz struct {
			NumRoutes int `json:"num_routes"`
		}
		require.NoError(t, json.Unmarshal(body, &rz))
		return rz.NumRoutes
	}
	require.Eventually(t, func() bool { return numRoutes(c.Nodes[k]) == 0 }, 10*time.Second, 20*time.Millisecond,
		"no route around the links")
	require.Eventually(t, func() bool {
		l := leader()
		return l != "" && l != first
	}, 30*time.Second, 100*time.Millisecond, "the others elect a new stream leader")

	require.NoError(t, c.Heal())
	require.Eventually(t, func() bool { return numRoutes(c.Nodes[k]) > 0 }, 20*time.Second, 50*time.Millisecond)
	require.NoError(t, c.WaitHealthy(ctx, 30*time.Second))
	b, err = js.KeyValue(ctx, "h")
	require.NoError(t, err)
	_, err = b.Put(ctx, "k", []byte("v"))
	require.NoError(t, err)
}
