package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunWritesTheReport(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "docs", "benchmarks.md")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.bench.txt"),
		[]byte("pkg: github.com/asterforge/aster/supervision\nBenchmarkThroughput-2 	 10	 1 ns/op	 0.5 supervised/bare\n"), 0o644))
	var stdout bytes.Buffer
	require.NoError(t, run([]string{"-dir", dir, "-out", out, "-procs", "2"}, &stdout))
	assert.Contains(t, stdout.String(), "wrote "+out)
	md, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(md), "**missed**", "0.5x misses the throughput goal")
	assert.FileExists(t, filepath.Join(dir, "docs", "benchmarks-handover.svg"))
}

func TestRunFailsWithoutMeasurements(t *testing.T) {
	err := run([]string{"-dir", t.TempDir(), "-out", filepath.Join(t.TempDir(), "b.md")}, &bytes.Buffer{})
	require.Error(t, err)
	assert.Error(t, run([]string{"-no-such-flag"}, &bytes.Buffer{}))
}
