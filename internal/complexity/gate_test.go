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
