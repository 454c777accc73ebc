package complexity

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "lower the figures of allowlist.txt to today's, and drop the functions within their limit")

// allowlistHeader opens allowlist.txt.
const allowlistHeader = `# Functions of the library over their gocyclo limit (15 on the lease path:
# natsstore, lease, actors, lock and internal/leasehold, with their
# sub-packages; 20 elsewhere), each with the highest figure it may have.
# TestGate fails when a function not listed here goes over its limit, or a
# listed one grows. Lower a figure or drop a line when a function shrinks:
#     go test ./internal/complexity -run TestGate -update
# (which never adds a function nor raises a figure). Format: figure, the
# package's directory, the function as gocyclo names it.
`

// TestGate measures every function of the library (the module's packages
// outside examples/ and cmd/, without tests and commands) and holds each to
// its limit or to its figure in allowlist.txt.
func TestGate(t *testing.T) {
	root := filepath.Join("..", "..")
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(mod, []byte("module github.com/asterforge/aster\n")), "../.. is the module's root")

	funcs, err := Library(root)
	require.NoError(t, err)
	require.Greater(t, len(funcs), 500, "the library's functions were found")
	f, err := os.Open("allowlist.txt")
	require.NoError(t, err)
	allow, err := ParseAllowlist(f)
	f.Close()
	require.NoError(t, err)

	if *update {
		var b bytes.Buffer
		require.NoError(t, Format(&b, allowlistHeader, Tightened(funcs, allow)))
		require.NoError(t, os.WriteFile("allowlist.txt", b.Bytes(), 0o644))
		allow, err = ParseAllowlist(&b)
		require.NoError(t, err)
	}
	v := Check(funcs, allow)
	if len(v.Lower) > 0 {
		t.Logf("allowlist.txt can be tightened (go test ./internal/complexity -run TestGate -update):\n\t%s",
			strings.Join(v.Lower, "\n\t"))
	}
	if len(v.Failures) > 0 {
		t.Errorf("gocyclo gate:\n\t%s", strings.Join(v.Failures, "\n\t"))
	}
}

// TestStateGate holds every unexported struct type of the library to
// MaxFields: state beyond that is split into named parts (issue 31).
func TestStateGate(t *testing.T) {
	states, err := States(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.Greater(t, len(states), 100, "the library's types were found")
	for _, s := range states {
		if s.Fields > MaxFields {
			t.Errorf("%s: %s has %d fields, over %d: split its state into named parts", s.Pos, s.Name, s.Fields, MaxFields)
		}
	}
}

func TestStatesCountsEmbeddedPartsOnce(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x.go"),
		[]byte("package x\n\ntype part struct{ a, b int }\n\ntype big struct {\n\tpart\n\tc, d string\n\te int\n}\n\ntype Exported struct{ a, b, c int }\n"), 0o644))
	states, err := States(dir)
	require.NoError(t, err)
	require.Equal(t, []State{{Name: "part", Fields: 2, Pos: "x.go:3"}, {Name: "big", Fields: 4, Pos: "x.go:5"}}, states)
}
