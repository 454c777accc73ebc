//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/examples/internal/demo"
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
	sum, err := run(ctx, options{sequencers: 3, callers: 2, numbers: 20, ttl: time.Second, out: out, exe: exe})
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
