//go:build unix

package main

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/asterforge/aster/examples/internal/demo"
)

// TestMain runs this test binary as an instance when the example under
// test re-executes it.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == instanceArg {
		os.Exit(instanceMain(os.Args[2:]))
	}
	goleak.VerifyTestMain(m)
}

func TestRun(t *testing.T) {
	out := &demo.Buffer{}
	o := options{instances: 3, shards: 16, ttl: time.Second, out: out}
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
}
