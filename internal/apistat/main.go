// Command apistat counts the exported identifiers of Go packages: top-level
// functions, types, constants and variables, and the exported methods and
// struct fields of exported types. It measures how much API a package asks
// its users to learn.
//
//	go run ./internal/apistat ./actors ./lease ./lock
//	go run ./internal/apistat -list ./actors   # one identifier a line
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	list := flag.Bool("list", false, "list the identifiers, one a line, instead of counting them")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: apistat [-list] DIR...")
		os.Exit(2)
	}
	for _, dir := range flag.Args() {
		ids, err := exported(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "apistat:", err)
			os.Exit(1)
		}
		if *list {
			for _, id := range ids {
				fmt.Printf("%s\t%s\n", dir, id)
			}
			continue
		}
		kinds := map[string]int{}
		for _, id := range ids {
			kinds[strings.SplitN(id, " ", 2)[0]]++
		}
		fmt.Printf("%-24s %4d  (func %d, type %d, const %d, var %d, method %d, field %d)\n", dir, len(ids),
			kinds["func"], kinds["type"], kinds["const"], kinds["var"], kinds["method"], kinds["field"])
	}
}

// exported returns "kind name" for every exported identifier of the
// package in dir (test files excluded), sorted.
func exported(dir string) ([]string, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	types := map[string]bool{}
	var decls []ast.Decl
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		decls = append(decls, af.Decls...)
		for _, d := range af.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					if ts := s.(*ast.TypeSpec); ts.Name.IsExported() {
						types[ts.Name.Name] = true
					}
				}
			}
		}
	}
	var out []string
	for _, d := range decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				out = append(out, "func "+d.Name.Name)
				continue
			}
			if recv := recvName(d.Recv.List[0].Type); types[recv] {
				out = append(out, "method "+recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					out = append(out, "type "+s.Name.Name)
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, f := range st.Fields.List {
							for _, n := range f.Names {
								if n.IsExported() {
									out = append(out, "field "+s.Name.Name+"."+n.Name)
								}
							}
						}
					}
				case *ast.ValueSpec:
					kind := "var"
					if d.Tok == token.CONST {
						kind = "const"
					}
					for _, n := range s.Names {
						if n.IsExported() {
							out = append(out, kind+" "+n.Name)
						}
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// recvName returns the type name of a method receiver.
func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}
