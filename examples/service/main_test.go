package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/examples/service/settings"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore/embedded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pod returns the settings of a replica named name, as the Deployment's
// downward API sets them, against the servers at url.
func pod(t *testing.T, name, url string, args ...string) settings.Settings {
	t.Helper()
	env := map[string]string{
		settings.EnvPodName: name, settings.EnvPodNamespace: "shop", settings.EnvNodeName: "node-" + name[len(name)-1:],
		settings.EnvNATSURL: url, settings.EnvHTTPAddr: "127.0.0.1:0", settings.EnvTTL: "3s",
	}
	s, err := settings.Parse(args, func(k string) string { return env[k] }, func() (string, error) { return "laptop", nil }, io.Discard)
	require.NoError(t, err)
	return s
}

// instance is a replica run by the test.
type instance struct {
	s       settings.Settings
	started started
	cancel  context.CancelFunc
	done    chan error
}

func start(t *testing.T, s settings.Settings) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	in := &instance{s: s, cancel: cancel, done: make(chan error, 1)}
	up := make(chan started, 1)
	go func() { in.done <- run(ctx, s, testLogger(t), func(st started) { up <- st }) }()
	select {
	case in.started = <-up:
	case err := <-in.done:
		cancel()
		t.Fatalf("%s did not start: %v", s.Instance, err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("%s did not start within 30 s", s.Instance)
	}
	t.Cleanup(func() { in.stop(t) })
	return in
}

// stop cancels the instance (its SIGTERM) and returns what run returned.
func (in *instance) stop(t *testing.T) error {
	in.cancel()
	select {
	case err, ok := <-in.done:
		if ok {
			close(in.done)
		}
		return err
	case <-time.After(settings.GracePeriod(in.s.Lease)):
		t.Errorf("%s did not stop within its grace period %v", in.s.Instance, settings.GracePeriod(in.s.Lease))
		return nil
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// report is the part of a monitor.Report the test reads, as `aster
// status` reads it.
type report struct {
	Instance string `json:"instance"`
	Live     bool   `json:"live"`
	Ready    bool   `json:"ready"`
	Leases   []struct {
		LeaseID string `json:"lease_id"`
		OwnerID string `json:"owner_id"`
		State   string `json:"state"`
		Token   uint64 `json:"token"`
		Holder  *struct {
			OwnerID string            `json:"owner_id"`
			Token   uint64            `json:"token"`
			Meta    map[string]string `json:"meta"`
		} `json:"holder"`
		Tree *struct {
			Name string `json:"name"`
		} `json:"tree"`
	} `json:"leases"`
	Stores []struct {
		Name  string `json:"name"`
		Error string `json:"error"`
	} `json:"stores"`
}

// discover asks every instance of the monitor's micro service for its
// INFO, as `aster status` does (a request to the service's control
// subject, collecting the answers for a while), by instance name.
func discover(t *testing.T, nc *nats.Conn) map[string]micro.Info {
	t.Helper()
	subject, err := micro.ControlSubject(micro.InfoVerb, monitor.DefaultServiceName, "")
	require.NoError(t, err)
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, nc.PublishRequest(subject, inbox, nil))
	out := map[string]micro.Info{}
	deadline := time.Now().Add(300 * time.Millisecond)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			return out
		}
		var info micro.Info
		require.NoError(t, json.Unmarshal(m.Data, &info))
		out[info.Metadata[monitor.MetadataInstance]] = info
	}
}

// ask requests an instance's endpoint.
func ask(t *testing.T, nc *nats.Conn, info micro.Info, endpoint string) []byte {
	t.Helper()
	for _, ep := range info.Endpoints {
		if ep.Name == endpoint {
			resp, err := nc.Request(ep.Subject, nil, 5*time.Second)
			require.NoError(t, err)
			return resp.Data
		}
	}
	t.Fatalf("instance %s has no %s endpoint", info.Metadata[monitor.MetadataInstance], endpoint)
	return nil
}

// statuses asks every instance for its status, as `aster status` does.
func statuses(t *testing.T, nc *nats.Conn) map[string]report {
	t.Helper()
	out := map[string]report{}
	for name, info := range discover(t, nc) {
		var rep report
		require.NoError(t, json.Unmarshal(ask(t, nc, info, monitor.EndpointStatus), &rep))
		assert.Equal(t, name, rep.Instance)
		out[name] = rep
	}
	return out
}

// TestReplicasShowThePodAsOwner runs two replicas against one NATS server,
// as two pods of the Deployment: the monitor's NATS service lists both,
// the leader's lease shows its pod name as owner, and the standby sees
// the pod's metadata (downward API) with the lease. The probes answer on
// the paths the manifests use. On SIGTERM the leader resigns and the other
// takes over at once.
func TestReplicasShowThePodAsOwner(t *testing.T) {
	ns, err := embedded.Start(t.Context(), embedded.Config{})
	require.NoError(t, err)
	defer func() { _ = ns.Close() }()
	a := start(t, pod(t, "service-7d9f-a", ns.ClientURL()))

	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	leading := func(name string) func() bool {
		return func() bool {
			rep, ok := statuses(t, nc)[name]
			return ok && len(rep.Leases) == 1 && rep.Leases[0].State == "leading"
		}
	}
	require.Eventually(t, leading("service-7d9f-a"), 20*time.Second, 50*time.Millisecond)
	b := start(t, pod(t, "service-7d9f-b", ns.ClientURL()))

	var reps map[string]report
	require.Eventually(t, func() bool {
		reps = statuses(t, nc)
		rb, ok := reps["service-7d9f-b"]
		return ok && len(rb.Leases) == 1 && rb.Leases[0].Holder != nil
	}, 20*time.Second, 50*time.Millisecond, "the standby never saw the holder")
	require.Len(t, reps, 2)
	ra, rb := reps["service-7d9f-a"], reps["service-7d9f-b"]
	for _, rep := range []report{ra, rb} {
		assert.True(t, rep.Live && rep.Ready, "%s: live %v ready %v", rep.Instance, rep.Live, rep.Ready)
		require.Len(t, rep.Stores, 1)
		assert.Equal(t, settings.DefaultBucket, rep.Stores[0].Name)
		assert.Empty(t, rep.Stores[0].Error)
	}
	la, lb := ra.Leases[0], rb.Leases[0]
	assert.Equal(t, settings.DefaultLease, la.LeaseID)
	assert.Equal(t, "service-7d9f-a", la.OwnerID, "the pod's name is the owner")
	assert.Equal(t, "leading", la.State)
	assert.NotZero(t, la.Token)
	require.NotNil(t, la.Tree, "the leader runs its workload tree")
	assert.Equal(t, "service", la.Tree.Name)
	assert.Equal(t, "service-7d9f-b", lb.OwnerID)
	assert.Equal(t, "standby", lb.State)
	assert.Equal(t, "service-7d9f-a", lb.Holder.OwnerID)
	assert.Equal(t, la.Token, lb.Holder.Token)
	assert.Equal(t, map[string]string{"pod": "service-7d9f-a", "namespace": "shop", "node": "node-a"}, lb.Holder.Meta,
		"the lease carries the pod's metadata")

	// The tree endpoint, as aster tree asks it.
	assertTree(t, nc, "service-7d9f-a")

	// The probes, on the paths and port the manifests use.
	for _, in := range []*instance{a, b} {
		for _, path := range []string{settings.LivePath, settings.ReadyPath} {
			resp, err := http.Get("http://" + in.started.HTTPAddr + path)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", in.s.Instance, path, body)
			assert.Equal(t, "ok\n", string(body))
		}
	}

	// The metrics the alert rules of deploy/kubernetes/alerts.yaml read.
	metrics := func(in *instance) string {
		resp, err := http.Get("http://" + in.started.HTTPAddr + settings.MetricsPath)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(body)
	}
	ma, mb := metrics(a), metrics(b)
	assert.Contains(t, ma, `aster_lease_leader{lease_id="example.service"} 1`)
	assert.Contains(t, mb, `aster_lease_leader{lease_id="example.service"} 0`)
	assert.Contains(t, ma, `aster_lease_acquisitions_total{lease_id="example.service"} 1`)
	assert.Contains(t, ma, `aster_supervision_children{lease_id="example.service",state="running",tree="service"} 2`)
	assert.Contains(t, ma, `aster_store_events_total{kind="natsstore.BucketCreated",store="aster_leases"} 1`,
		"the first replica created the bucket")

	// SIGTERM: the leader resigns, and the standby takes over through its
	// watch, long before the TTL (3 s) would have run out.
	stopped := time.Now()
	require.NoError(t, a.stop(t))
	require.Eventually(t, leading("service-7d9f-b"), 20*time.Second, 20*time.Millisecond)
	assert.Less(t, time.Since(stopped), 3*time.Second, "the handover waited for the TTL")
	require.NoError(t, b.stop(t))
}

// assertTree asks instance name's tree endpoint, as `aster tree` does.
func assertTree(t *testing.T, nc *nats.Conn, name string) {
	t.Helper()
	info, ok := discover(t, nc)[name]
	require.True(t, ok, "%s did not answer", name)
	var trees struct { // as aster tree reads it
		Instance string `json:"instance"`
		Trees    []struct {
			Name    string `json:"name"`
			Text    string `json:"text"`
			LeaseID string `json:"lease_id"`
			State   string `json:"lease_state"`
		} `json:"trees"`
	}
	require.NoError(t, json.Unmarshal(ask(t, nc, info, monitor.EndpointTree), &trees))
	require.Equal(t, name, trees.Instance)
	require.Len(t, trees.Trees, 1)
	assert.Equal(t, settings.DefaultLease, trees.Trees[0].LeaseID)
	assert.Equal(t, "leading", trees.Trees[0].State)
	assert.Contains(t, trees.Trees[0].Text, "heartbeat")
	assert.Contains(t, trees.Trees[0].Text, "worker")
}

// TestEmbeddedServerAndDuration runs the service as `go run
// ./examples/service -duration ...` does on a laptop: no NATS_URL, so it
// starts an embedded server, takes the lease, and exits by itself.
func TestEmbeddedServerAndDuration(t *testing.T) {
	s, err := settings.Parse([]string{"-duration", "2s", "-http", "127.0.0.1:0"}, func(string) string { return "" },
		func() (string, error) { return "laptop", nil }, io.Discard)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(s.Lease.OwnerID, "runtime-"), "outside a pod, a fresh owner ID: %s", s.Lease.OwnerID)
	assert.Equal(t, "laptop", s.Instance)
	done := make(chan error, 1)
	up := make(chan started, 1)
	began := time.Now()
	go func() { done <- run(t.Context(), s, testLogger(t), func(st started) { up <- st }) }()
	var st started
	select {
	case st = <-up:
	case err := <-done:
		t.Fatalf("did not start: %v", err)
	}
	require.Len(t, st.NATSURLs, 1)
	assert.Contains(t, st.NATSURLs[0], "127.0.0.1")

	nc, err := nats.Connect(st.NATSURLs[0])
	require.NoError(t, err)
	defer nc.Close()
	require.Eventually(t, func() bool {
		rep, ok := statuses(t, nc)["laptop"]
		return ok && len(rep.Leases) == 1 && rep.Leases[0].State == "leading"
	}, 10*time.Second, 50*time.Millisecond)

	select {
	case err := <-done:
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(began), 2*time.Second)
	case <-time.After(2*time.Second + settings.GracePeriod(s.Lease)):
		t.Fatal("-duration 2s: still running")
	}
}
