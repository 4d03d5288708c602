//go:build ignore

// Command surface counts the exported names of the public packages: top-level
// funcs, types, vars and consts, and exported methods on exported types, over
// non-test files. Run it from the repository root: go run scripts/surface.go [-v].
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

var packages = []string{
	"stream", "stream/streamtest", "cursor", "errclass", "backoff",
	"adapters/sse", "adapters/k8s", "adapters/etcd", "metrics/prom",
}

func main() {
	verbose := flag.Bool("v", false, "list the names")
	flag.Parse()
	total := 0
	for _, dir := range packages {
		names, err := exported(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		total += len(names)
		fmt.Printf("%-20s %4d\n", dir, len(names))
		if *verbose {
			for _, n := range names {
				fmt.Printf("    %s\n", n)
			}
		}
	}
	fmt.Printf("%-20s %4d\n", "total", total)
}

// exported returns the sorted exported names declared in dir's non-test files.
func exported(dir string) ([]string, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if f.Name.Name == "main" {
			continue
		}
		for _, decl := range f.Decls {
			names = append(names, declNames(decl)...)
		}
	}
	sort.Strings(names)
	return names, nil
}

func declNames(decl ast.Decl) []string {
	var names []string
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		if d.Recv == nil {
			return []string{d.Name.Name}
		}
		if recv := recvType(d.Recv.List[0].Type); ast.IsExported(recv) {
			return []string{recv + "." + d.Name.Name}
		}
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					names = append(names, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

// recvType returns the name of a method receiver's base type.
func recvType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
