package lambdaadapter_test

// Tests that keep the documentation (README.md and docs/) true to the code:
// the configuration page lists every option and environment variable, every
// relative link resolves (in RELIABILITY.md too), and the README's Go code is
// the code of readme_test.go.

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

const configurationPage = "docs/configuration.md"

// optionTypes are the result types of the root package's option
// constructors, each the door it belongs to.
var optionTypes = []string{"Option", "FunctionOption", "ServiceOption", "SharedOption"}

// codeOptions returns the exported functions of the root package (its
// non-test files) that return one of optionTypes: name -> result type.
func codeOptions(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	opts := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "lambdaadapter" {
			continue
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
				continue
			}
			if id, ok := fn.Type.Results.List[0].Type.(*ast.Ident); ok && slices.Contains(optionTypes, id.Name) {
				opts[fn.Name.Name] = id.Name
			}
		}
	}
	if len(opts) < 10 {
		t.Fatalf("found only %d option constructors in the root package: %v", len(opts), opts)
	}
	return opts
}

var (
	optionCell = regexp.MustCompile("^\\| `([A-Z][A-Za-z0-9]*)\\(")
	envCell    = regexp.MustCompile("^\\| `([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`")
	envName    = regexp.MustCompile(`LAMBDAADAPTER_[A-Z0-9_]*[A-Z0-9]`)
)

// pageOptions returns the options the configuration page lists in its
// tables, with the door of the section they are listed under: the option
// type named in backquotes in the nearest heading above.
func pageOptions(t *testing.T, page string) map[string]string {
	t.Helper()
	opts := map[string]string{}
	door := ""
	for line := range strings.Lines(page) {
		if strings.HasPrefix(line, "#") {
			door = ""
			for _, typ := range optionTypes {
				if strings.Contains(line, "`"+typ+"`") {
					door = typ
				}
			}
			continue
		}
		m := optionCell.FindStringSubmatch(line)
		if m == nil || door == "" {
			continue
		}
		if prev, dup := opts[m[1]]; dup {
			t.Errorf("%s lists %s twice (under %s and %s)", configurationPage, m[1], prev, door)
		}
		opts[m[1]] = door
	}
	return opts
}

func TestConfigurationPageListsEveryOption(t *testing.T) {
	code := codeOptions(t)
	raw, err := os.ReadFile(configurationPage)
	if err != nil {
		t.Fatal(err)
	}
	page := pageOptions(t, string(raw))
	for name, typ := range code {
		switch door, ok := page[name]; {
		case !ok:
			t.Errorf("%s does not list the option %s (it returns %s): add a row under the heading naming `%s`", configurationPage, name, typ, typ)
		case door != typ:
			t.Errorf("%s lists %s under `%s`, but it returns %s", configurationPage, name, door, typ)
		}
	}
	for name, door := range page {
		if _, ok := code[name]; !ok {
			t.Errorf("%s lists %s under `%s`, but the root package has no such option constructor", configurationPage, name, door)
		}
	}
}

// codeVariables returns the environment variables Handle and the bootstrap
// binary read: the names passed as literals to getenv or os.Getenv in
// env.go, handle.go and cmd/bootstrap, and every LAMBDAADAPTER_* name in a
// string literal there.
func codeVariables(t *testing.T) map[string]string {
	t.Helper()
	files := []string{"env.go", "handle.go"}
	boot, err := filepath.Glob("cmd/bootstrap/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range boot {
		if !strings.HasSuffix(f, "_test.go") {
			files = append(files, f)
		}
	}
	vars := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				var fn string
				switch x := n.Fun.(type) {
				case *ast.Ident:
					fn = x.Name
				case *ast.SelectorExpr:
					fn = x.Sel.Name
				}
				if (fn == "getenv" || fn == "Getenv") && len(n.Args) == 1 {
					if lit, ok := n.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if s, err := strconv.Unquote(lit.Value); err == nil {
							vars[s] = name
						}
					}
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					for _, v := range envName.FindAllString(n.Value, -1) {
						vars[v] = name
					}
				}
			}
			return true
		})
	}
	for _, must := range []string{"LAMBDAADAPTER_MODE", "LAMBDAADAPTER_STREAM", "LAMBDAADAPTER_METRICS", "ECS_CONTAINER_METADATA_URI_V4"} {
		if _, ok := vars[must]; !ok {
			t.Fatalf("the scan of %v found no %s: the scan is broken (found %v)", files, must, vars)
		}
	}
	return vars
}

func TestConfigurationPageListsEveryVariable(t *testing.T) {
	code := codeVariables(t)
	raw, err := os.ReadFile(configurationPage)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for line := range strings.Lines(string(raw)) {
		if m := envCell.FindStringSubmatch(line); m != nil {
			rows[m[1]] = true
		}
	}
	for name, file := range code {
		if !rows[name] {
			t.Errorf("%s has no row for the environment variable %s (read in %s)", configurationPage, name, file)
		}
	}
	for _, name := range envName.FindAllString(string(raw), -1) {
		if _, ok := code[name]; !ok {
			t.Errorf("%s names %s, which neither Handle nor bootstrap reads", configurationPage, name)
		}
	}
}

// docFiles returns README.md and the pages of docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md pages")
	}
	return append([]string{"README.md"}, pages...)
}

// prose returns the lines of a Markdown text outside fenced code blocks,
// with their line numbers, and with inline code spans blanked.
func prose(text string) (lines []string, numbers []int) {
	fenced := false
	n := 0
	for line := range strings.Lines(text) {
		n++
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		lines = append(lines, inlineCode.ReplaceAllString(strings.TrimRight(line, "\n"), "``"))
		numbers = append(numbers, n)
	}
	return lines, numbers
}

var (
	inlineCode = regexp.MustCompile("`[^`]*`")
	mdLink     = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	linkText   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// anchors returns the GitHub anchors of a Markdown text's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if fenced || m == nil {
			continue
		}
		slug := slugify(linkText.ReplaceAllString(m[1], "$1"))
		if k := seen[slug]; k > 0 {
			out[slug+"-"+strconv.Itoa(k)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugify makes a heading's anchor as GitHub does: lower case, letters,
// digits, spaces, hyphens and underscores kept, spaces turned into hyphens.
func slugify(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestSlugify(t *testing.T) {
	for in, want := range map[string]string{
		"Balance and planned hand-over":            "balance-and-planned-hand-over",
		"Both doors: `SharedOption`":               "both-doors-sharedoption",
		"`Handle` only: `Option`":                  "handle-only-option",
		"From the pre-v1 API (`New`, `Adapter`)":   "from-the-pre-v1-api-new-adapter",
		"Stopping: SIGTERM":                        "stopping-sigterm",
		"Migrating from a hand-rolled loop, v1.0!": "migrating-from-a-hand-rolled-loop-v10",
	} {
		if got := slugify(in); got != want {
			t.Errorf("slugify(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDocsLinks(t *testing.T) {
	texts := map[string]string{}
	read := func(path string) (string, error) {
		if s, ok := texts[path]; ok {
			return s, nil
		}
		raw, err := os.ReadFile(path)
		texts[path] = string(raw)
		return string(raw), err
	}
	linked := map[string]bool{}
	// BENCHMARKS.md and its notes on the scale simulation link to raw runs
	// and to each other: those links are checked too.
	for _, file := range append(docFiles(t), "RELIABILITY.md", "BENCHMARKS.md", "benchmarks/scale-load-notes.md") {
		text, err := read(file)
		if err != nil {
			t.Fatal(err)
		}
		lines, numbers := prose(text)
		for i, line := range lines {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				where := file + ":" + strconv.Itoa(numbers[i])
				resolved := file
				if path != "" {
					resolved = filepath.Join(filepath.Dir(file), path)
				}
				linked[filepath.ToSlash(resolved)] = true
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link %s: %s does not exist", where, target, resolved)
					continue
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(resolved, ".md") {
					t.Errorf("%s: link %s: an anchor into a file that is not Markdown", where, target)
					continue
				}
				other, err := read(resolved)
				if err != nil {
					t.Fatal(err)
				}
				if !anchors(other)[anchor] {
					t.Errorf("%s: link %s: %s has no heading with the anchor #%s", where, target, resolved, anchor)
				}
			}
		}
	}
	// Every page is reachable from the README, and opens with what the
	// reader can do after it.
	for _, file := range docFiles(t)[1:] {
		if !linked[filepath.ToSlash(file)] {
			t.Errorf("no link to %s in README.md or docs/", file)
		}
		text, _ := read(file)
		lines, _ := prose(text)
		first := ""
		for _, l := range lines[1:] {
			if l = strings.TrimSpace(l); l != "" {
				first = l
				break
			}
		}
		if !strings.HasPrefix(first, "After this page you") {
			t.Errorf("%s opens with %q; a page opens with what the reader can do after it (\"After this page you ...\")", file, first)
		}
	}
	readme, _ := read("README.md")
	if n := strings.Count(readme, "\n"); n > 300 {
		t.Errorf("README.md has %d lines; at most 300 (move the rest to docs/)", n)
	}
}

const checkedMark = "<!-- checked against readme_test.go -->"

// checkedBlocks returns the Go code blocks of a Markdown text that follow
// checkedMark.
func checkedBlocks(text string) []string {
	var blocks []string
	var cur *strings.Builder
	marked := false
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur != nil && trimmed == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		case trimmed == checkedMark:
			marked = true
		case marked && trimmed == "```go":
			cur = &strings.Builder{}
			marked = false
		case trimmed != "":
			marked = false
		}
	}
	return blocks
}

// decls returns the top-level declarations of a Go source, but its
// imports, by the names they declare, with their exact source text (from
// their keyword, without their doc comment), and the paths it imports.
func decls(t *testing.T, name string, src []byte) (map[string]string, []string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("%s does not parse: %v", name, err)
	}
	text := func(n ast.Node) string {
		return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
	}
	out := map[string]string{}
	var imports []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		imports = append(imports, p)
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			out[d.Name.Name] = text(d)
		case *ast.GenDecl:
			if d.Tok == token.IMPORT {
				continue
			}
			var names []string
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names = append(names, s.Name.Name)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names = append(names, n.Name)
					}
				}
			}
			out[strings.Join(names, ",")] = text(d)
		}
	}
	return out, imports
}

func TestDocsCode(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	have, imports := decls(t, "readme_test.go", src)
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks := checkedBlocks(string(text))
		var names []string
		for i, block := range blocks {
			code := []byte(block)
			if !bytes.HasPrefix(code, []byte("package ")) {
				code = append([]byte("package p\n\n"), code...)
			}
			want, wantImports := decls(t, file+" block "+strconv.Itoa(i+1), code)
			for _, p := range wantImports {
				if !slices.Contains(imports, p) {
					t.Errorf("%s: a checked block imports %q, which readme_test.go does not", file, p)
				}
			}
			for name, w := range want {
				names = append(names, name)
				switch h, ok := have[name]; {
				case !ok:
					t.Errorf("%s: a checked block declares %s, which readme_test.go does not: add it there, where it compiles", file, name)
				case h != w:
					t.Errorf("%s: %s differs from readme_test.go's; make them the same.\n%s:\n%s\n\nreadme_test.go:\n%s", file, name, file, w, h)
				}
			}
		}
		if file == "README.md" {
			for _, must := range []string{"main", "TestHandleOrder"} {
				if !slices.Contains(names, must) {
					t.Errorf("README.md has no checked block declaring %s (mark its code blocks with %q)", must, checkedMark)
				}
			}
		}
	}
}
