// Package complexity measures the cyclomatic complexity of the module's
// functions, as gocyclo (github.com/fzipp/gocyclo v0.6.0) does, and holds
// the gate that keeps it down: a test that fails when a function of the
// library exceeds its limit and is not in allowlist.txt, or grows past the
// figure listed there.
package complexity

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Func is the complexity of one function or method.
type Func struct {
	Dir        string // the package's directory, relative to the root, with slashes
	Name       string // Name, or (Recv).Name, or (*Recv).Name, as gocyclo writes it
	Complexity int
	Pos        string // file:line, relative to the root
}

// Key names f in an allowlist: its package directory and its name.
func (f Func) Key() string { return f.Dir + " " + f.Name }

// Of returns the cyclomatic complexity of fn (a *ast.FuncDecl or a
// *ast.FuncLit): 1, plus one for each if, for, range, case and select case
// other than default, && and ||. Function literals inside fn count towards
// fn, as in gocyclo.
func Of(fn ast.Node) int {
	n := 1
	ast.Inspect(fn, func(node ast.Node) bool {
		switch node := node.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			n++
		case *ast.CaseClause:
			if node.List != nil {
				n++
			}
		case *ast.CommClause:
			if node.Comm != nil {
				n++
			}
		case *ast.BinaryExpr:
			if node.Op == token.LAND || node.Op == token.LOR {
				n++
			}
		}
		return true
	})
	return n
}

// Library returns the functions of the library under root, a module's
// directory: every non-test Go file of a package other than main, outside
// examples/ and cmd/, outside nested modules, testdata, vendor and
// directories whose names start with "." or "_".
func Library(root string) ([]Func, error) {
	var out []Func
	err := walk(root, func(path, rel string) error {
		fs, err := File(path, rel)
		out = append(out, fs...)
		return err
	})
	return out, err
}

// walk calls each for every library file under root (see Library).
func walk(root string, each func(path, rel string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipDir(path, rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		return each(path, rel)
	})
}

// skipDir reports whether the directory at path (rel from the root) holds
// no library code.
func skipDir(path, rel, name string) bool {
	switch {
	case name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_"):
		return true
	case rel == "examples" || rel == "cmd" || rel == "tmp":
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil // a module of its own
}

// File returns the functions of the Go file at path, named rel in the
// result, or none when it is a command's (package main).
func File(path, rel string) ([]Func, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	if f.Name.Name == "main" {
		return nil, nil
	}
	var out []Func
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok {
			continue
		}
		pos := fset.Position(fn.Pos())
		out = append(out, Func{
			Dir:        filepath.ToSlash(filepath.Dir(rel)),
			Name:       name(fn),
			Complexity: Of(fn),
			Pos:        rel + ":" + strconv.Itoa(pos.Line),
		})
	}
	return out, nil
}

// name writes fn's name as gocyclo does: Name, (Recv).Name or
// (*Recv).Name, without type parameters.
func name(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	recv := "?"
	if id, ok := t.(*ast.Ident); ok {
		recv = id.Name
	}
	return "(" + star + recv + ")." + fn.Name.Name
}
