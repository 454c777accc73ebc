//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/examples/internal/demo"
	"github.com/asterforge/aster/internal/natstest"
)

// TestMain runs this test binary as a sequencer or a caller when the
// example starts it as one.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case sequencerArg:
			os.Exit(sequencerMain(os.Args[2:]))
		case callerArg:
			os.Exit(callerMain(os.Args[2:]))
		}
	}
	goleak.VerifyTestMain(m)
}

func TestScheduler(t *testing.T) {
	out := &demo.Buffer{}
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := run(ctx, options{sequencers: 3, callers: 2, numbers: 20, ttl: time.Second, replicas: 1, out: out, exe: exe})
	require.NoError(t, err, out.String())
	var printed bytes.Buffer
	sum.print(&printed)
	t.Log(printed.String())
	assert.True(t, sum.ok(), printed.String())
	assert.Equal(t, 40, sum.got)
	assert.Zero(t, sum.duplicates)
	require.Len(t, sum.steps, 2)
	assert.GreaterOrEqual(t, len(sum.leaders), 3, "a first leader, the one after the crash, the one after the handover")
	assert.Contains(t, printed.String(), "PASS")
}

// TestSchedulerCluster runs it against a 3-node JetStream cluster, as
// -nats-url and -replicas 3 do: both buckets it creates have 3 replicas.
func TestSchedulerCluster(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	out := &demo.Buffer{}
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := run(ctx, options{sequencers: 3, callers: 2, numbers: 20, ttl: time.Second, replicas: 3,
		urls: demo.SplitURLs(c.ClientURL()), out: out, exe: exe})
	require.NoError(t, err, out.String())
	var printed bytes.Buffer
	sum.print(&printed)
	assert.True(t, sum.ok(), printed.String())
	nc, err := nats.Connect(c.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	for _, b := range []string{bucket, dataBucket} {
		st, err := js.Stream(t.Context(), "KV_"+b)
		require.NoError(t, err, b)
		assert.Equal(t, 3, st.CachedInfo().Config.Replicas, "the example created bucket %s with 3 replicas", b)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-sequencers", "1"},
		{"-callers", "0"},
		{"-numbers", "5"},
		{"-ttl", "1500ms"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, orchestratorMain(args, &stdout, &stderr), "%v", args)
		assert.NotEmpty(t, stderr.String(), "%v", args)
	}
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
