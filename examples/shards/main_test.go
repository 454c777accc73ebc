//go:build unix

package main

import (
	"bytes"
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

// TestMain runs this test binary as an instance when the example under
// test re-executes it.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == instanceArg {
		os.Exit(instanceMain(os.Args[2:]))
	}
	// protoactor's dead-letter throttle ends 1 s after a dead letter by
	// itself (TestInstanceExitsWhenItsBucketIsDeleted runs a Host in
	// process), as in every package that runs actors.
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

func TestRun(t *testing.T) {
	out := &demo.Buffer{}
	o := options{instances: 3, shards: 16, ttl: time.Second, replicas: 1, out: out}
	sum, err := run(t.Context(), o)
	if sum != nil {
		sum.print(out)
	}
	t.Log("\n" + out.String())
	require.NoError(t, err)
	assert.True(t, sum.OK(), "%v", sum.problems)
	require.Len(t, sum.steps, 4)
	assert.Empty(t, sum.overlaps)
	assert.Zero(t, sum.rejected)
	assert.NotZero(t, sum.accepted)
	for _, st := range sum.steps {
		assert.True(t, st.balanced, st.what)
	}
	for _, st := range sum.steps[1:] {
		assert.Equal(t, st.least, st.moved, "%s: the moves the new shares need, no more", st.what)
	}
	kill := sum.steps[1]
	assert.Len(t, kill.live, 2)
	assert.GreaterOrEqual(t, kill.took, time.Duration(0))
	// The orchestrator creates the bucket as an administrator would: no
	// store of the demo warns of a bucket it had to create.
	assert.Contains(t, out.String(), "bucket created")
	assert.NotContains(t, out.String(), "created the missing bucket")
}

// TestRunCluster runs it against a 3-node JetStream cluster, as -nats-url
// and -replicas 3 do: the lease bucket has 3 replicas, and no shard ran on
// two instances at once.
func TestRunCluster(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	out := &demo.Buffer{}
	o := options{instances: 3, shards: 16, ttl: time.Second, replicas: 3, urls: demo.SplitURLs(c.ClientURL()), out: out}
	sum, err := run(t.Context(), o)
	if sum != nil {
		sum.print(out)
	}
	require.NoError(t, err, out.String())
	// Safety, not the move counts: over a cluster a step can begin before
	// the previous rebalance has settled on every instance.
	assert.Empty(t, sum.overlaps, out.String())
	assert.Zero(t, sum.rejected, out.String())
	nc, err := nats.Connect(c.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	st, err := js.Stream(t.Context(), "KV_"+defaultBucket)
	require.NoError(t, err)
	assert.Equal(t, 3, st.CachedInfo().Config.Replicas, "the instances created the bucket with 3 replicas")
}

func TestFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, orchestratorMain([]string{"-help"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "-instances")
	assert.NotContains(t, stderr.String(), instanceArg)
	for _, args := range [][]string{{"-instances", "1"}, {"-shards", "0"}, {"-ttl", "500ms"}, {"extra"}} {
		stderr.Reset()
		assert.Equal(t, 2, orchestratorMain(args, &stdout, &stderr), "%v", args)
	}

	// A bad flag: its error once, on one line, and where the flags are.
	stderr.Reset()
	assert.Equal(t, 2, orchestratorMain([]string{"-bogus"}, &stdout, &stderr))
	assert.Equal(t, "shards: flag provided but not defined: -bogus (run with -help for the flags)\n", stderr.String())
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
