// Package archdoc renders the module's package diagram, the import graph
// between its own packages, for docs/architecture.md; its test fails when
// the doc's diagram differs from the imports.
package archdoc

import (
	"fmt"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Package is one package of the module.
type Package struct {
	Path     string   // import path relative to the module, e.g. "lock"
	Synopsis string   // the first sentence of its package comment
	Imports  []string // the module's packages it imports (not in tests), relative, sorted
	Layer    int      // 0 without imports of the module, else 1 + the highest layer it imports
}

// Load reads the packages of the module at root, whose path is module,
// as they build on linux/amd64 (so that the diagram is the same wherever it
// is made). Nested modules, testdata, vendor and directories whose names
// start with "." or "_" are left out, as the go command does.
func Load(root, module string) ([]Package, error) {
	ctx := build.Default
	ctx.GOOS, ctx.GOARCH, ctx.CgoEnabled = "linux", "amd64", false
	var pkgs []Package
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if rel != "." && skipDir(path, d.Name()) {
			return filepath.SkipDir
		}
		bp, err := ctx.ImportDir(path, 0)
		if _, none := err.(*build.NoGoError); none {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		p := Package{Path: filepath.ToSlash(rel)}
		for _, imp := range bp.Imports {
			if own, ok := strings.CutPrefix(imp, module+"/"); ok {
				p.Imports = append(p.Imports, own)
			}
		}
		sort.Strings(p.Imports)
		p.Synopsis, err = synopsis(path, bp.GoFiles)
		pkgs = append(pkgs, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return layered(pkgs)
}

// skipDir reports whether the go command would leave the directory at
// path out of the module's packages.
func skipDir(path, name string) bool {
	if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil // a module of its own
}

// synopsis returns the first sentence of the package comment in files.
func synopsis(dir string, files []string) (string, error) {
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return "", err
		}
		if f.Doc != nil {
			return new(doc.Package).Synopsis(f.Doc.Text()), nil
		}
	}
	return "", nil
}

// layered sets each package's layer and sorts pkgs by layer, then path.
func layered(pkgs []Package) ([]Package, error) {
	byPath := make(map[string]*Package, len(pkgs))
	for i := range pkgs {
		byPath[pkgs[i].Path] = &pkgs[i]
	}
	const unknown, visiting = -1, -2
	for i := range pkgs {
		pkgs[i].Layer = unknown
	}
	var layer func(p *Package) (int, error)
	layer = func(p *Package) (int, error) {
		switch p.Layer {
		case visiting:
			return 0, fmt.Errorf("an import cycle through %s", p.Path)
		case unknown:
		default:
			return p.Layer, nil
		}
		p.Layer = visiting
		n := 0
		for _, imp := range p.Imports {
			q, ok := byPath[imp]
			if !ok {
				return 0, fmt.Errorf("%s imports %s, which is not a package of the module", p.Path, imp)
			}
			l, err := layer(q)
			if err != nil {
				return 0, err
			}
			n = max(n, l+1)
		}
		p.Layer = n
		return n, nil
	}
	for i := range pkgs {
		if _, err := layer(&pkgs[i]); err != nil {
			return nil, err
		}
	}
	sort.Slice(pkgs, func(i, j int) bool {
		if pkgs[i].Layer != pkgs[j].Layer {
			return pkgs[i].Layer < pkgs[j].Layer
		}
		return pkgs[i].Path < pkgs[j].Path
	})
	return pkgs, nil
}

// Render writes the diagram: a code block with one line per package, by
// layer (a package imports only packages of lower layers) and the
// module's packages it imports, then a table of what each package is.
func Render(pkgs []Package) string {
	width := len("package")
	for _, p := range pkgs {
		width = max(width, len(p.Path))
	}
	var b strings.Builder
	b.WriteString("```\nlayer  package" + strings.Repeat(" ", width-len("package")) + "     imports (the module's packages)\n")
	for _, p := range pkgs {
		imports := strings.Join(p.Imports, " ")
		arrow := " ──► "
		if imports == "" {
			arrow, imports = "", ""
		}
		line := fmt.Sprintf("%-5d  %-*s%s%s", p.Layer, width, p.Path, arrow, imports)
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	b.WriteString("```\n\n| package | what it is |\n|---|---|\n")
	for _, p := range sortedByPath(pkgs) {
		what := p.Synopsis
		if what == "" {
			what = "(no package comment)"
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", p.Path, strings.ReplaceAll(what, "|", `\|`))
	}
	return b.String()
}

func sortedByPath(pkgs []Package) []Package {
	out := append([]Package(nil), pkgs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Markers around the generated diagram in docs/architecture.md.
const (
	Begin = "<!-- archdoc: generated from the imports by `go test ./internal/archdoc -update`; do not edit -->\n"
	End   = "<!-- archdoc: end -->\n"
)

// Splice returns doc with the text between Begin and End replaced by
// diagram, or an error when doc does not have the markers once each, in
// that order.
func Splice(doc, diagram string) (string, error) {
	i, j := strings.Index(doc, Begin), strings.Index(doc, End)
	if i < 0 || j < i || strings.Count(doc, Begin) != 1 || strings.Count(doc, End) != 1 {
		return "", fmt.Errorf("want the markers %q and %q once each, in that order", strings.TrimSpace(Begin), strings.TrimSpace(End))
	}
	return doc[:i+len(Begin)] + diagram + doc[j:], nil
}
