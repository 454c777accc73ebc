//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/examples/internal/demo"
)

// TestMain runs this test binary as a contender when the example under
// test re-executes it.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == contenderArg {
		os.Exit(contenderMain(os.Args[2:]))
	}
	goleak.VerifyTestMain(m)
}

func TestRun(t *testing.T) {
	out := &demo.Buffer{}
	o := options{contenders: 3, ttl: time.Second, replicas: 1, steps: defaultSteps, step: 50 * time.Millisecond, out: out}
	start := time.Now()
	sum, err := run(t.Context(), o)
	if sum != nil {
		sum.print(out)
	}
	t.Log("\n" + out.String())
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 30*time.Second)
	assert.True(t, sum.OK(), "%v", sum.problems)
	assert.Zero(t, sum.overlaps)
	assert.True(t, sum.increasing)
	require.NotEmpty(t, sum.rejected)
	assert.Equal(t, 1, sum.late, "the frozen holder's write, sent after its validity, is the one rejected")
	lost := 0
	for _, h := range sum.holds {
		if h.rejected > 0 {
			assert.Equal(t, "lost", h.end, "the frozen holder finds its lock lost")
			lost++
		}
	}
	assert.Equal(t, 1, lost)
	assert.GreaterOrEqual(t, len(sum.holds), 3)
	// The orchestrator creates the bucket as an administrator would: no
	// contender's store warns of a bucket it had to create.
	assert.Contains(t, out.String(), "bucket created")
	assert.NotContains(t, out.String(), "created the missing bucket")
}

// TestWrittenLate: an accepted write whose answer arrives after a freeze
// says when the fence accepted it, so that it does not read as a stale
// write accepted after a newer holder's acquisition.
func TestWrittenLate(t *testing.T) {
	sent := time.Date(2026, 12, 5, 9, 15, 44, 486_000_000, time.Local)
	resp := writeResp{Accepted: true, Entry: 6, Highest: 5, At: sent.Add(time.Millisecond).UnixNano()}

	msg, attrs := written(resp, sent, sent.Add(20*time.Millisecond), time.Second)
	assert.Equal(t, "ledger entry written", msg)
	assert.Equal(t, []any{"entry", 6}, attrs)

	msg, attrs = written(resp, sent, sent.Add(1001*time.Millisecond), time.Second)
	assert.Equal(t, "ledger entry written before any newer holder's write; its answer arrives late (was this process frozen?)", msg)
	assert.Equal(t, []any{"entry", 6, "accepted_at", "09:15:44.487", "answer_after", 1001 * time.Millisecond}, attrs)
}

func TestFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, orchestratorMain([]string{"-help"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "-contenders")
	assert.NotContains(t, stderr.String(), contenderArg)
	for _, args := range [][]string{{"-contenders", "1"}, {"-ttl", "500ms"}, {"extra"}} {
		stderr.Reset()
		assert.Equal(t, 2, orchestratorMain(args, &stdout, &stderr), "%v", args)
	}

	// A bad flag: its error once, on one line, and where the flags are.
	stderr.Reset()
	assert.Equal(t, 2, orchestratorMain([]string{"-bogus"}, &stdout, &stderr))
	assert.Equal(t, "lock: flag provided but not defined: -bogus (run with -help for the flags)\n", stderr.String())
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

// stopped is a store whose Err is err.
type stopped struct{ err error }

func (s stopped) Err() error { return s.err }

// TestStoreStopped: a contender whose store had stopped fails, even when it
// was stopped cleanly by SIGTERM.
func TestStoreStopped(t *testing.T) {
	gone := errors.New(`natsstore: bucket "aster_lock_example" deleted`)
	assert.NoError(t, storeStopped(nil, stopped{}))
	err := storeStopped(nil, stopped{gone})
	require.ErrorIs(t, err, gone)
	assert.Contains(t, err.Error(), "the lease store had stopped: ")
	own := errors.New("acquire failed")
	assert.Equal(t, own, storeStopped(own, stopped{gone}))
}
