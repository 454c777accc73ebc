//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/examples/internal/demo"

	"github.com/asterforge/aster/internal/natstest"
	"github.com/asterforge/aster/natsstore"
)

// TestMain runs this test binary as a demo instance when the demo under
// test re-executes it, as the demo's binary does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == instanceArg {
		os.Exit(instanceMain(os.Args[2:]))
	}
	goleak.VerifyTestMain(m)
}

// testOptions is the demo with a TTL of 1 s and short pauses: the whole
// script, faster.
func testOptions(out *demo.Buffer) options {
	return options{
		instances: 3, ttl: time.Second, bucket: defaultBucket, leaseID: defaultLeaseID,
		settle: 300 * time.Millisecond, interval: 50 * time.Millisecond, replicas: 1, out: out,
	}
}

// runDemo runs the demo and checks what every run must show.
func runDemo(t *testing.T, o options, out *demo.Buffer) *summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	sum, err := run(ctx, o)
	if sum != nil {
		sum.print(out)
	}
	t.Log("\n" + out.String())
	require.NoError(t, err)
	require.NotNil(t, sum)

	kinds := []string{}
	for _, h := range sum.Handovers {
		kinds = append(kinds, h.Kind)
	}
	assert.Equal(t, []string{"start", "crash", "pause", "graceful"}, kinds)
	assert.True(t, sum.OK(), "verdict: %v", sum.Problems)
	assert.Zero(t, sum.Overlaps)
	assert.Equal(t, 6, sum.Pairs)
	assert.True(t, sum.Increasing, "tokens %v", sum.Tokens)
	assert.Zero(t, sum.LateAccepted)
	// The thawed leader's late write is rejected; a write its workload had
	// in flight when it froze may be rejected before it.
	require.True(t, slices.ContainsFunc(sum.Rejected, func(r writeRec) bool { return r.req.Late }),
		"the late write must be rejected: %v", sum.Rejected)
	for _, h := range sum.Handovers {
		took := between(h.Trigger, h.Acquired)
		switch h.Kind {
		case "crash", "pause":
			// A standby takes the lease over one TTL after the last
			// renewal it saw, which was at most TTL/2 before the signal.
			assert.Greater(t, took, o.ttl/3, "%s handover", h.Kind)
			assert.Less(t, took, o.ttl+time.Second, "%s handover", h.Kind)
		case "graceful":
			assert.Less(t, took, time.Second, "graceful handover")
		}
		assert.GreaterOrEqual(t, between(h.Trigger, h.FirstWrite), time.Duration(0))
	}
	assert.Contains(t, out.String(), "verdict               PASS")
	return sum
}

// TestDemo runs the whole demo, as make run does, on an embedded server.
func TestDemo(t *testing.T) {
	t.Parallel()
	out := &demo.Buffer{}
	runDemo(t, testOptions(out), out)
	assertNoInstanceLeft(t, out.String())
}

// TestDemoExistingDeployment runs it against a server that requires a user
// and password, as -nats-url, -user and -password do.
func TestDemoExistingDeployment(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, natstest.WithUser("demo", "s3cret"))
	out := &demo.Buffer{}
	o := testOptions(out)
	o.bucket = "aster_demo_auth"
	o.dial = natsstore.DialOptions{URLs: []string{srv.ClientURL()}, User: "demo", Password: "s3cret"}
	runDemo(t, o, out)
	assert.Contains(t, out.String(), "using an existing NATS deployment")
	assert.NotContains(t, out.String(), "s3cret", "secrets must never be logged")
}

// TestDemoAPIPrefix runs it as a user of one account whose bucket is in
// another account's JetStream, imported under an API prefix, with an inbox
// prefix of its own on which the watch's deliveries are imported, and the
// least privilege: as -api-prefix and -inbox-prefix do. The orchestrator
// and every instance must use both, or they reach no JetStream at all.
func TestDemoAPIPrefix(t *testing.T) {
	t.Parallel()
	const bucket = "aster_demo_xacct"
	top := natstest.Topology{APIPrefix: "JS.A.API", InboxPrefix: "_INBOX_SVC"}
	exports, imports := natstest.CrossAccount(bucket, "A", top, false)
	var pub []string
	perms, sub := natstest.Permissions(bucket, top)
	for _, p := range perms {
		if !p.Create {
			pub = append(pub, strconv.Quote(p.Subject))
		}
	}
	srv := natstest.Start(t, natstest.WithConfig(t, fmt.Sprintf(`accounts {
  A: { jetstream: enabled, users: [{user: admin, password: a}], exports: [%s] }
  B: {
    users: [{user: svc, password: s, permissions: {publish: {allow: [%s]}, subscribe: {allow: [%q]}}}]
    imports: [%s]
  }
}`, strings.Join(exports, ", "), strings.Join(pub, ", "), sub[0], strings.Join(imports, ", "))))

	// The bucket's account creates it: the service may not.
	admin, err := natsstore.Dial(t.Context(), natsstore.DialOptions{URLs: []string{srv.ClientURL()}, User: "admin", Password: "a"},
		natsstore.Config{Bucket: bucket})
	require.NoError(t, err)
	require.NoError(t, admin.Close())

	out := &demo.Buffer{}
	o := testOptions(out)
	o.bucket = bucket
	o.apiPrefix = top.APIPrefix
	o.dial = natsstore.DialOptions{URLs: []string{srv.ClientURL()}, User: "svc", Password: "s", InboxPrefix: top.InboxPrefix}
	runDemo(t, o, out)
}

// TestDemoCluster runs it against a 3-node JetStream cluster with a
// 3-replica bucket, as -nats-url and -replicas 3 do.
func TestDemoCluster(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	c.WaitReady(t)
	out := &demo.Buffer{}
	o := testOptions(out)
	o.bucket = "aster_demo_cluster"
	o.replicas = 3
	o.dial = natsstore.DialOptions{URLs: []string{c.ClientURL()}}
	runDemo(t, o, out)
	nc, err := nats.Connect(c.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	st, err := js.Stream(t.Context(), "KV_aster_demo_cluster")
	require.NoError(t, err)
	assert.Equal(t, 3, st.CachedInfo().Config.Replicas, "the demo created a 3-replica bucket")
}

// TestDemoWrongPassword fails fast, before any instance starts.
func TestDemoWrongPassword(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, natstest.WithUser("demo", "s3cret"))
	out := &demo.Buffer{}
	o := testOptions(out)
	o.dial = natsstore.DialOptions{URLs: []string{srv.ClientURL()}, User: "demo", Password: "wrong"}
	start := time.Now()
	_, err := run(t.Context(), o)
	require.Error(t, err)
	assert.ErrorIs(t, err, natsstore.ErrAuthentication)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.NotContains(t, out.String(), "instance up")
}

// TestDemoInterrupted cancels the demo in the middle, as Ctrl-C does: it
// returns promptly, and every instance has exited.
func TestDemoInterrupted(t *testing.T) {
	t.Parallel()
	out := &demo.Buffer{}
	o := testOptions(out)
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		// Cancel once the first leader is elected.
		for !strings.Contains(out.String(), "leader elected") {
			time.Sleep(10 * time.Millisecond)
		}
		cancel(errors.New("interrupted"))
	}()
	start := time.Now()
	sum, err := run(ctx, o)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 20*time.Second)
	require.NotNil(t, sum)
	assert.False(t, sum.Complete)
	sum.print(out)
	assert.Contains(t, out.String(), "verdict               INCOMPLETE")
	assertNoInstanceLeft(t, out.String())
}

// assertNoInstanceLeft checks that no process the demo started is alive.
func assertNoInstanceLeft(t *testing.T, log string) {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		_, rest, ok := strings.Cut(line, "instance up; competing for the lease")
		if !ok {
			continue
		}
		_, pid, ok := strings.Cut(rest, "pid=")
		require.True(t, ok)
		pid, _, _ = strings.Cut(pid, " ")
		var n int
		for _, c := range pid {
			n = n*10 + int(c-'0')
		}
		err := syscall.Kill(n, 0)
		assert.ErrorIs(t, err, syscall.ESRCH, "instance pid %d is still alive", n)
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, orchestratorMain([]string{"--help"}, &stdout, &stderr))
	help := stderr.String()
	for _, flag := range []string{"-instances", "-ttl", "-nats-url", "-creds", "-nkey", "-user", "-password", "-token", "-tls-ca", "-bucket", "-js-domain", "-api-prefix", "-inbox-prefix", "-no-color"} {
		assert.Contains(t, help, flag)
	}
	assert.NotContains(t, help, instanceArg, "the instance switch is hidden")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-instances", "1"},
		{"-instances", "10"},
		{"-ttl", "1500ms"},
		{"-ttl", "0s"},
		{"-user", "u"},              // credentials without -nats-url
		{"-replicas", "3"},          // replicas need a cluster
		{"-api-prefix", "JS.A.API"}, // prefixes without -nats-url
		{"-inbox-prefix", "_INBOX_SVC"},
		{"-replicas", "0", "-nats-url", "nats://127.0.0.1:1"},
		{"-replicas", "7", "-nats-url", "nats://127.0.0.1:1"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, orchestratorMain(args, &stdout, &stderr), "%v", args)
		assert.NotEmpty(t, stderr.String(), "%v", args)
	}

	// A bad flag: its error once, on one line, and where the flags are.
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, orchestratorMain([]string{"-bogus"}, &stdout, &stderr))
	assert.Equal(t, "outbox: flag provided but not defined: -bogus (run with -help for the flags)\n", stderr.String())
}

func TestShortToken(t *testing.T) {
	for _, c := range []struct {
		in   uint64
		want string
	}{
		{1, "1"},
		{9_999_999, "9999999"},
		{1796112891345928, "…345928"},
		{1796112891000042, "…000042"},
	} {
		assert.Equal(t, c.want, shortToken(c.in), "shortToken(%d)", c.in)
	}
}

// TestPrefixFlags: -api-prefix and -inbox-prefix reach the orchestrator's
// store configuration and, through their command line, every instance's.
func TestPrefixFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	o, err := parseFlags([]string{"-nats-url", "nats://127.0.0.1:1", "-user", "svc", "-password", "s3cret",
		"-api-prefix", "JS.A.API", "-inbox-prefix", "_INBOX_SVC"}, &stdout, &stderr)
	require.NoError(t, err)
	assert.Equal(t, "JS.A.API", o.apiPrefix)
	assert.Equal(t, "_INBOX_SVC", o.dial.InboxPrefix)

	h, err := startHub(newRecorder(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer h.close(time.Second)
	d := &orchestrator{o: o, dial: o.dial, hub: h}
	args, env, err := d.instanceCommand("i1")
	require.NoError(t, err)
	require.Equal(t, instanceArg, args[0])
	assert.Subset(t, args, []string{"-api-prefix", "JS.A.API", "-inbox-prefix", "_INBOX_SVC"})
	assert.NotContains(t, strings.Join(args, " "), "s3cret", "secrets stay off the command line")
	require.Len(t, env, 1)
	name, value, ok := strings.Cut(env[0], "=")
	require.True(t, ok)
	require.Equal(t, envDial, name)

	cfg, err := parseInstance(args[1:], value)
	require.NoError(t, err)
	assert.Equal(t, "JS.A.API", cfg.prefix)
	assert.Empty(t, cfg.domain)
	assert.Equal(t, "_INBOX_SVC", cfg.dial.InboxPrefix)
	assert.Equal(t, "svc", cfg.dial.User)
	assert.Equal(t, []string{"nats://127.0.0.1:1"}, cfg.dial.URLs)

	// Without the flags, neither is set.
	o, err = parseFlags([]string{"-nats-url", "nats://127.0.0.1:1", "-js-domain", "hub"}, &stdout, &stderr)
	require.NoError(t, err)
	args, env, err = (&orchestrator{o: o, dial: o.dial, hub: h}).instanceCommand("i2")
	require.NoError(t, err)
	_, value, _ = strings.Cut(env[0], "=")
	cfg, err = parseInstance(args[1:], value)
	require.NoError(t, err)
	assert.Equal(t, "hub", cfg.domain)
	assert.Empty(t, cfg.prefix)
	assert.Empty(t, cfg.dial.InboxPrefix)
}

// TestBadPrefixes: a prefix NATS would not take, or an API prefix with a
// domain, is refused with its reason before anything starts.
func TestBadPrefixes(t *testing.T) {
	url := []string{"-nats-url", "nats://127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-api-prefix", "JS.A.API"}, "prefix flags need -nats-url"},
		{[]string{"-inbox-prefix", "_INBOX_SVC"}, "prefix flags need -nats-url"},
		{append([]string{"-js-domain", "hub", "-api-prefix", "JS.A.API"}, url...), "set -js-domain or -api-prefix, not both"},
		{append([]string{"-api-prefix", "JS.*.API"}, url...), `-api-prefix "JS.*.API" is not a subject prefix`},
		{append([]string{"-api-prefix", ".JS.API"}, url...), `-api-prefix ".JS.API" is not a subject prefix`},
		{append([]string{"-inbox-prefix", "_INBOX.>"}, url...), `-inbox-prefix "_INBOX.>" is not a subject prefix`},
		{append([]string{"-inbox-prefix", "_IN BOX"}, url...), `-inbox-prefix "_IN BOX" is not a subject prefix`},
		{append([]string{"-inbox-prefix", "_INBOX."}, url...), `-inbox-prefix "_INBOX." is not a subject prefix`},
		{append([]string{"-inbox-prefix", "a..b"}, url...), `-inbox-prefix "a..b" is not a subject prefix`},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, orchestratorMain(c.args, &stdout, &stderr), "%v", c.args)
		assert.Contains(t, stderr.String(), c.want, "%v", c.args)
		assert.Empty(t, stdout.String(), "%v: nothing started", c.args)
	}
	// An API prefix may end with a dot, as jetstream.NewWithAPIPrefix takes it.
	_, err := parseFlags(append([]string{"-api-prefix", "JS.A.API."}, url...), io.Discard, io.Discard)
	assert.NoError(t, err)
}

// TestBadReplicas: a -replicas value out of range, or above 1 without an
// existing deployment, is refused with its reason before anything starts.
func TestBadReplicas(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-replicas", "0", "-nats-url", "nats://127.0.0.1:1"}, "-replicas must be between 1 and 5, got 0"},
		{[]string{"-replicas", "6", "-nats-url", "nats://127.0.0.1:1"}, "-replicas must be between 1 and 5, got 6"},
		{[]string{"-replicas", "3"}, "-replicas needs -nats-url pointing at a JetStream cluster"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, orchestratorMain(c.args, &stdout, &stderr), "%v", c.args)
		assert.Contains(t, stderr.String(), c.want, "%v", c.args)
		assert.Empty(t, stdout.String(), "%v: nothing started", c.args)
	}
}
