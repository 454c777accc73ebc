package archdoc

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var update = flag.Bool("update", false, "rewrite the package diagram of docs/architecture.md from the imports")

const module = "github.com/asterforge/aster"

// TestArchitectureDiagram fails when the package diagram of
// docs/architecture.md is not the one the imports make.
func TestArchitectureDiagram(t *testing.T) {
	root := filepath.Join("..", "..")
	pkgs, err := Load(root, module)
	require.NoError(t, err)
	paths := map[string]Package{}
	for _, p := range pkgs {
		paths[p.Path] = p
	}
	for _, want := range []string{"lease", "lock", "actors", "shard", "natsstore", "internal/archdoc", "cmd/aster", "examples/lock"} {
		require.Contains(t, paths, want, "every package of the module is found")
	}
	require.NotContains(t, paths, "chaos", "nested modules are not")

	path := filepath.Join(root, "docs", "architecture.md")
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := Splice(string(doc), Render(pkgs))
	require.NoError(t, err, "docs/architecture.md")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	if string(doc) != want {
		t.Errorf("the package diagram of docs/architecture.md differs from the imports; regenerate it with\n"+
			"\tgo test ./internal/archdoc -update\nIt should read:\n%s", Render(pkgs))
	}
}

// TestDirection holds the imports to the arrows of the design: lease and
// supervision never import each other, lock never imports actors, natsstore
// knows nothing of actors, and no library package imports an example or a
// command.
func TestDirection(t *testing.T) {
	pkgs, err := Load(filepath.Join("..", ".."), module)
	require.NoError(t, err)
	forbidden := map[string][]string{
		"lease":       {"supervision", "actors", "lock", "natsstore"},
		"supervision": {"lease", "actors", "lock", "natsstore"},
		"lock":        {"actors", "natsstore", "supervision"},
		"natsstore":   {"actors", "supervision", "lock", "shard"},
		"actors":      {"lock", "natsstore", "shard", "singleton", "monitor"},
	}
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			assert.NotContains(t, forbidden[p.Path], imp, "%s must not import %s", p.Path, imp)
			if !strings.HasPrefix(p.Path, "examples/") && !strings.HasPrefix(p.Path, "cmd/") {
				assert.False(t, strings.HasPrefix(imp, "examples/") || strings.HasPrefix(imp, "cmd/"),
					"the library package %s imports %s", p.Path, imp)
			}
		}
	}
}

func TestLayers(t *testing.T) {
	pkgs, err := layered([]Package{
		{Path: "top", Imports: []string{"mid", "base"}},
		{Path: "base"},
		{Path: "mid", Imports: []string{"base"}},
		{Path: "alone"},
	})
	require.NoError(t, err)
	var got []string
	for _, p := range pkgs {
		got = append(got, p.Path)
		assert.Equal(t, map[string]int{"alone": 0, "base": 0, "mid": 1, "top": 2}[p.Path], p.Layer, p.Path)
	}
	assert.Equal(t, []string{"alone", "base", "mid", "top"}, got)

	_, err = layered([]Package{{Path: "a", Imports: []string{"b"}}, {Path: "b", Imports: []string{"a"}}})
	assert.ErrorContains(t, err, "cycle")
	_, err = layered([]Package{{Path: "a", Imports: []string{"gone"}}})
	assert.ErrorContains(t, err, "not a package of the module")
}

func TestRender(t *testing.T) {
	got := Render([]Package{
		{Path: "lease", Synopsis: "Package lease is the contract.", Layer: 0},
		{Path: "lock", Synopsis: "Package lock is a | lock.", Imports: []string{"lease"}, Layer: 1},
	})
	assert.Equal(t, "```\n"+
		"layer  package     imports (the module's packages)\n"+
		"0      lease\n"+
		"1      lock    ──► lease\n"+
		"```\n\n"+
		"| package | what it is |\n|---|---|\n"+
		"| `lease` | Package lease is the contract. |\n"+
		"| `lock` | Package lock is a \\| lock. |\n", got)
}

func TestSplice(t *testing.T) {
	doc := "# A\n\n" + Begin + "old\n" + End + "\nafter\n"
	got, err := Splice(doc, "new\n")
	require.NoError(t, err)
	assert.Equal(t, "# A\n\n"+Begin+"new\n"+End+"\nafter\n", got)
	for _, bad := range []string{"no markers", End + Begin, Begin + End + Begin + End} {
		_, err := Splice(bad, "x")
		assert.Error(t, err, "%q", bad)
	}
}
