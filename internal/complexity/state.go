package complexity

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
)

// MaxFields is the most fields an unexported struct type of the library
// may have: state beyond that is split into named parts.
const MaxFields = 15

// State is the size of one unexported struct type.
type State struct {
	Name   string
	Fields int    // embedded parts count as one
	Pos    string // file:line
}

// States returns the unexported struct types of the library under root
// (the files Library measures).
func States(root string) ([]State, error) {
	var out []State
	err := walk(root, func(path, rel string) error {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil || f.Name.Name == "main" {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.IsExported() {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				out = append(out, State{Name: ts.Name.Name, Fields: fields(st), Pos: rel + ":" + strconv.Itoa(fset.Position(ts.Pos()).Line)})
			}
			return true
		})
		return nil
	})
	return out, err
}

// fields counts st's fields, an embedded one as one.
func fields(st *ast.StructType) int {
	n := 0
	for _, f := range st.Fields.List {
		n += max(len(f.Names), 1)
	}
	return n
}
