// Command apisurface counts the exported names a module offers its users:
// in every package outside internal/ (and outside test files, testdata,
// commands and the examples), each exported package-level constant,
// variable, type and function, and each exported method of an exported
// type. Fields of exported structs and methods of exported interfaces are
// parts of their type and are not counted.
//
//	go run ./scripts/apisurface            # a line per package, then the total
//	go run ./scripts/apisurface -max 350   # fails when the total is above 350
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	root := flag.String("root", ".", "the module's root directory")
	maxNames := flag.Int("max", 0, "fail when more names than this are exported (0: no limit)")
	list := flag.Bool("names", false, "print every name, not only the counts")
	flag.Parse()
	counts, names, err := count(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apisurface:", err)
		os.Exit(2)
	}
	total := 0
	for _, dir := range sortedKeys(counts) {
		fmt.Printf("%5d  %s\n", counts[dir], dir)
		if *list {
			for _, n := range names[dir] {
				fmt.Printf("         %s\n", n)
			}
		}
		total += counts[dir]
	}
	fmt.Printf("%5d  exported names in %d packages\n", total, len(counts))
	if *maxNames > 0 && total > *maxNames {
		fmt.Fprintf(os.Stderr, "apisurface: %d exported names, above the limit of %d\n", total, *maxNames)
		os.Exit(1)
	}
}

// count returns the exported names per package directory (relative to
// root) and the names themselves, sorted.
func count(root string) (map[string]int, map[string][]string, error) {
	counts, names := map[string]int{}, map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") || base == "testdata" ||
				base == "internal" || base == "cmd" || base == "scripts" || base == "examples" || isModule(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, n := range exported(f) {
			counts[dir]++
			names[dir] = append(names[dir], n)
		}
		return nil
	})
	for _, ns := range names {
		slices.Sort(ns)
	}
	return counts, names, err
}

// isModule reports whether dir (not the root) holds a go.mod of its own:
// another module, counted on its own if at all.
func isModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// exported returns the exported names f declares.
func exported(f *ast.File) []string {
	var out []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				out = append(out, d.Name.Name)
				continue
			}
			if recv := receiverType(d.Recv.List[0].Type); ast.IsExported(recv) {
				out = append(out, recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							out = append(out, n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// receiverType is the name of a method's receiver type: T for T, *T, T[P]
// and *T[P].
func receiverType(e ast.Expr) string {
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

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
