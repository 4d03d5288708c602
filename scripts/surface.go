//go:build ignore

// Command surface counts the exported names of the public packages: top-level
// funcs, types, vars and consts, and exported methods on exported types, over
// non-test files. A public package is every directory of the repository with
// a non-test Go file of a package other than main, outside internal/,
// examples/, bench/, scripts/ and testdata/: found, not listed, so that a new
// package is counted the day it lands. Run it from the repository root:
// go run scripts/surface.go [-v].
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

// skipped are the directories whose packages users cannot import, or that
// are not a library's.
var skipped = map[string]bool{"internal": true, "examples": true, "bench": true, "scripts": true, "testdata": true, ".git": true}

// publicPackages returns the directories of the public packages, sorted.
func publicPackages() ([]string, error) {
	var dirs []string
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipped[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		if seen[dir] {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if f.Name.Name != "main" && dir != "." {
			seen[dir] = true
			dirs = append(dirs, dir)
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs, err
}

func main() {
	verbose := flag.Bool("v", false, "list the names")
	check := flag.Bool("check", false, "fail when a package has more names than its budget in docs/contributing.md, or none")
	flag.Parse()
	packages, err := publicPackages()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	budgets, err := readBudgets("docs/contributing.md")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	total, over, deprecated := 0, 0, 0
	for _, dir := range packages {
		names, err := exported(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		total += len(names)
		dep := 0
		for _, n := range names {
			if strings.HasSuffix(n, deprecatedMark) {
				dep++
			}
		}
		deprecated += dep
		budget, ok := budgets[filepath.ToSlash(dir)]
		note := ""
		switch {
		case !ok:
			note, over = "  no budget in docs/contributing.md", over+1
		case len(names) > budget:
			note, over = fmt.Sprintf("  over its budget of %d", budget), over+1
		}
		if dep > 0 {
			note = fmt.Sprintf("  (%d deprecated)", dep) + note
		}
		fmt.Printf("%-22s %4d%s\n", dir, len(names), note)
		if *verbose {
			for _, n := range names {
				fmt.Printf("    %s\n", n)
			}
		}
	}
	fmt.Printf("%-22s %4d  (%d deprecated, kept for compatibility: %d live)\n", "total", total, deprecated, total-deprecated)
	if *check && over > 0 {
		fmt.Fprintf(os.Stderr, "%d packages over or without a budget: a new name must earn its place (or raise the budget in docs/contributing.md, and say why)\n", over)
		os.Exit(1)
	}
}

// readBudgets reads the table of the section "Exported names" of the file
// at path: rows "| `package` | budget | why |".
func readBudgets(path string) (map[string]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	budgets := map[string]int{}
	in := false
	for line := range strings.SplitSeq(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = strings.TrimSpace(line) == "## Exported names"
		case in && strings.HasPrefix(line, "| `"):
			cells := strings.Split(line, "|")
			if len(cells) < 3 {
				continue
			}
			var n int
			if _, err := fmt.Sscan(strings.TrimSpace(cells[2]), &n); err != nil {
				return nil, fmt.Errorf("%s: budget of %s: %w", path, cells[1], err)
			}
			budgets[strings.Trim(strings.TrimSpace(cells[1]), "`")] = n
		}
	}
	if len(budgets) == 0 {
		return nil, fmt.Errorf("%s: no table of budgets under \"## Exported names\"", path)
	}
	return budgets, nil
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
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
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

// deprecatedMark ends the name of a declaration whose doc has a
// "Deprecated: " paragraph: counted, and shown apart.
const deprecatedMark = " (deprecated)"

// deprecated reports whether a doc comment has a "Deprecated: " paragraph.
func deprecated(docs ...*ast.CommentGroup) bool {
	for _, doc := range docs {
		if doc == nil {
			continue
		}
		text := doc.Text()
		if strings.HasPrefix(text, "Deprecated: ") || strings.Contains(text, "\n\nDeprecated: ") {
			return true
		}
	}
	return false
}

func declNames(decl ast.Decl) []string {
	var names []string
	mark := func(name string, docs ...*ast.CommentGroup) string {
		if deprecated(docs...) {
			return name + deprecatedMark
		}
		return name
	}
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		if d.Recv == nil {
			return []string{mark(d.Name.Name, d.Doc)}
		}
		if recv := recvType(d.Recv.List[0].Type); ast.IsExported(recv) {
			return []string{mark(recv+"."+d.Name.Name, d.Doc)}
		}
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					names = append(names, mark(s.Name.Name, d.Doc, s.Doc))
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, mark(n.Name, d.Doc, s.Doc))
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
