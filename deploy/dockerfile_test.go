package deploy

import (
	"debug/elf"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction.
type instruction struct {
	cmd, args string
	line      int
}

// dockerfile returns the instructions of ../Dockerfile, continuation lines
// joined, comments left out.
func dockerfile(t *testing.T) []instruction {
	t.Helper()
	src, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var (
		out  []instruction
		cur  strings.Builder
		from int
	)
	for i, l := range strings.Split(string(src), "\n") {
		trimmed := strings.TrimSpace(l)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() == 0 {
			from = i + 1
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args), from})
		cur.Reset()
	}
	return out
}

// stages splits the instructions at each FROM; ARGs before the first FROM
// are returned as the global defaults.
func stages(ins []instruction) (global map[string]string, st [][]instruction) {
	global = map[string]string{}
	for _, in := range ins {
		switch {
		case in.cmd == "FROM":
			st = append(st, []instruction{in})
		case len(st) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			global[k] = v
		case len(st) > 0:
			st[len(st)-1] = append(st[len(st)-1], in)
		}
	}
	return global, st
}

// dockerEntrypoint returns the final stage's ENTRYPOINT (exec form).
func dockerEntrypoint(t *testing.T) []string {
	t.Helper()
	_, st := stages(dockerfile(t))
	if len(st) == 0 {
		t.Fatal("the Dockerfile has no FROM")
	}
	var ep []string
	for _, in := range st[len(st)-1] {
		if in.cmd == "ENTRYPOINT" {
			ep = nil
			if err := json.Unmarshal([]byte(in.args), &ep); err != nil {
				t.Fatalf("Dockerfile line %d: ENTRYPOINT %s is not the exec form (a JSON list): a shell would get SIGTERM instead of the adapter", in.line, in.args)
			}
		}
	}
	return ep
}

func TestDockerfile(t *testing.T) {
	global, st := stages(dockerfile(t))
	if len(st) < 2 {
		t.Fatalf("the Dockerfile has %d stages, want a builder and a runtime stage", len(st))
	}
	expand := func(s string) string {
		return regexp.MustCompile(`\$\{?([A-Za-z_]+)\}?`).ReplaceAllStringFunc(s, func(m string) string {
			name := strings.Trim(m, "${}")
			if v, ok := global[name]; ok {
				return v
			}
			return m
		})
	}

	// The builder: golang, at least the go.mod's Go version, building
	// cmd/bootstrap statically.
	builder := st[0]
	from := strings.Fields(expand(builder[0].args)) // [--platform=...] image AS name
	if len(from) < 3 || !strings.EqualFold(from[len(from)-2], "AS") || !strings.HasPrefix(from[len(from)-3], "golang:") {
		t.Fatalf("first stage %q: want FROM golang:VERSION AS name", builder[0].args)
	}
	image := from[len(from)-3]
	if goMod, img := goDirective(t), strings.TrimPrefix(image, "golang:"); !versionAtLeast(img, goMod) {
		t.Errorf("builder image %s is older than go.mod's go %s", image, goMod)
	}
	build := ""
	for _, in := range builder {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			build = in.args
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-tags lambda.norpc", "./cmd/bootstrap"} {
		if !strings.Contains(build, want) {
			t.Errorf("the builder's go build %q lacks %q", build, want)
		}
	}

	// The runtime stage: scratch or distroless static, non-root, the
	// binary as its entry point in long-running mode.
	final := st[len(st)-1]
	base := strings.Fields(final[0].args)[0]
	if base != "scratch" && !regexp.MustCompile(`^gcr\.io/distroless/static(-debian\d+)?:nonroot$`).MatchString(base) {
		t.Errorf("runtime image %s: want scratch or gcr.io/distroless/static:nonroot", base)
	}
	user := ""
	copied := false
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "COPY":
			copied = copied || strings.Contains(in.args, "--from=") && strings.HasSuffix(in.args, " /bootstrap")
		case "RUN":
			t.Errorf("Dockerfile line %d: RUN in the runtime stage (it has no shell)", in.line)
		}
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "root" || uid == "0" {
		t.Errorf("runtime stage USER %q: want a non-root user", user)
	}
	if !copied {
		t.Error("the runtime stage does not copy the binary to /bootstrap from the builder")
	}
	if ep := dockerEntrypoint(t); !slices.Equal(ep, []string{"/bootstrap", "-mode=ecs"}) {
		t.Errorf("ENTRYPOINT %q, want [/bootstrap -mode=ecs]", ep)
	}
}

// goDirective returns the go version of the root go.mod.
func goDirective(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(string(src))
	if m == nil {
		t.Fatal("no go directive in ../go.mod")
	}
	return m[1]
}

// versionAtLeast reports whether the image tag's Go version (1.26, 1.26.3,
// 1.26-bookworm) is at least want (1.26.0), in major.minor.
func versionAtLeast(tag, want string) bool {
	re := regexp.MustCompile(`^(\d+)\.(\d+)`)
	a, b := re.FindStringSubmatch(tag), re.FindStringSubmatch(want)
	if a == nil || b == nil {
		return false
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return n(a[1]) > n(b[1]) || n(a[1]) == n(b[1]) && n(a[2]) >= n(b[2])
}

// dockerignore is a .dockerignore: patterns matched against slash-separated
// paths from the context's root, as moby/patternmatcher does for the
// patterns this repository uses (*, ?, **, a leading / or !); the last
// pattern that matches a path or one of its parents decides.
type dockerignore []struct {
	re      *regexp.Regexp
	exclude bool
}

func readDockerignore(t *testing.T, path string) dockerignore {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d dockerignore
	for _, l := range strings.Split(string(src), "\n") {
		p := strings.TrimSpace(l)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		exclude := !strings.HasPrefix(p, "!")
		p = strings.Trim(strings.TrimPrefix(p, "!"), "/")
		if strings.ContainsAny(p, `[\`) {
			t.Fatalf(".dockerignore pattern %q: character classes and escapes are beyond this test's matcher", p)
		}
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case p[i] == '*':
				re.WriteString("[^/]*")
			case p[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		}
		re.WriteString("$")
		d = append(d, struct {
			re      *regexp.Regexp
			exclude bool
		}{regexp.MustCompile(re.String()), exclude})
	}
	return d
}

// excluded reports whether the path (slash-separated, from the context's
// root) is left out of the context.
func (d dockerignore) excluded(path string) bool {
	out := false
	for _, p := range d {
		for q := path; q != "."; q = filepath.ToSlash(filepath.Dir(q)) {
			if p.re.MatchString(q) {
				out = p.exclude
				break
			}
		}
	}
	return out
}

// TestDockerBuildContext builds the binary the way the Dockerfile does, from
// a copy of exactly the files .dockerignore lets into the build context, and
// checks that the result is a static executable.
func TestDockerBuildContext(t *testing.T) {
	ign := readDockerignore(t, "../.dockerignore")
	for _, p := range []string{"go.mod", "go.sum", "cmd/bootstrap/main.go", "lease/dynamodb.go"} {
		if ign.excluded(p) {
			t.Errorf(".dockerignore leaves out %s", p)
		}
	}
	for _, p := range []string{".git/HEAD", "bootstrap", "bin/bootstrap", "deploy/go.mod", "standins/node_modules/x/index.js",
		"integration/rie_test.go", "adapter_test.go", "envelope/testdata/fuzz/x", "README.md"} {
		if !ign.excluded(p) {
			t.Errorf(".dockerignore lets %s into the build context", p)
		}
	}

	ctx := t.TempDir()
	size := int64(0)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if ign.excluded(rel) {
			if d.IsDir() {
				return filepath.SkipDir // no "!" pattern re-includes anything below
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size += info.Size()
		return copyFile(path, filepath.Join(ctx, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	if size > 10<<20 {
		t.Errorf("the build context holds %d MiB; .dockerignore should leave out everything but the sources", size>>20)
	}

	// The Dockerfile's go build, for linux/arm64, with its output in ctx.
	var run string
	for _, in := range dockerfile(t) {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			run = in.args
		}
	}
	words := shellWords(t, run)
	env := []string{"GOWORK=off", "GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=readonly")}
	var args []string
	for _, w := range words {
		switch {
		case strings.HasPrefix(w, "--mount="):
		case len(args) == 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(w):
			w = strings.NewReplacer("$TARGETOS", "linux", "$TARGETARCH", "arm64").Replace(w)
			env = append(env, w)
		default:
			args = append(args, w)
		}
	}
	if len(args) < 2 || args[0] != "go" || args[1] != "build" {
		t.Fatalf("the Dockerfile's RUN %q is not `go build ...` after its variables", run)
	}
	out := filepath.Join(t.TempDir(), "bootstrap")
	for i := range args {
		if args[i] == "-o" && i+1 < len(args) {
			args[i+1] = out
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Env = ctx, append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in the Docker build context (%s): %v\n%s", strings.Join(args, " "), err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		t.Errorf("built for %v, want arm64", f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter: it is not static, and distroless/static has no libc")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %q", libs)
	}
}

// copyFile copies src to dst, creating dst's directory.
func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// shellWords splits a shell command line into words: blanks separate,
// single and double quotes group (no expansion but the test's own).
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var (
		words []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case r == ';' || r == '&' || r == '|':
			t.Fatalf("the go build RUN %q has more than one command: keep it one command for this test", s)
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}
