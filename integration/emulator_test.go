//go:build integration

package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Paths set once by TestMain.
var (
	// bootstrapPath is the bootstrap binary built from ./cmd/bootstrap.
	bootstrapPath string
	// riePath is the Lambda Runtime Interface Emulator.
	riePath string
)

// Bounds of the harness (not of the code under test).
const (
	// readyTimeout bounds how long a fresh emulator may take to listen.
	readyTimeout = 10 * time.Second
	// stopTimeout bounds how long stop waits for the killed emulator to be
	// reaped.
	stopTimeout = 5 * time.Second
	// startAttempts is how often a start is tried with fresh ports: another
	// process may take a free port between our probe and the emulator's bind.
	startAttempts = 3
)

// TestMain builds the bootstrap binary and finds the emulator, failing the
// whole run (never skipping) when either is missing.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	riePath, err = findRIE(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "lambdaadapter-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bootstrapPath = filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrapPath, "./cmd/bootstrap")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: building the bootstrap binary (%s in %s): %v\n%s",
			strings.Join(build.Args, " "), root, err, out)
		return 1
	}
	return m.Run()
}

// moduleRoot returns the root of the module under test: the nearest
// directory at or above the working directory whose go.mod declares
// github.com/shardsettle/lambdaadapter (these tests are a module of their
// own inside it).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && rootModule.Match(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of github.com/shardsettle/lambdaadapter at or above the working directory")
		}
		dir = parent
	}
}

// rootModule matches the module line of the module under test's go.mod.
var rootModule = regexp.MustCompile(`(?m)^module\s+"?github\.com/shardsettle/lambdaadapter"?\s*$`)

// findRIE returns the emulator's path: $LAMBDAADAPTER_RIE or
// <root>/bin/aws-lambda-rie. Its error says how to install it.
func findRIE(root string) (string, error) {
	path, from := os.Getenv("LAMBDAADAPTER_RIE"), "LAMBDAADAPTER_RIE"
	if path == "" {
		path, from = filepath.Join(root, "bin", "aws-lambda-rie"), "the default path"
	}
	fi, err := os.Stat(path)
	if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return path, nil
	}
	reason := "is not an executable file"
	if err != nil {
		reason = "is missing (" + err.Error() + ")"
	}
	return "", fmt.Errorf(`integration: FAIL: the AWS Lambda Runtime Interface Emulator at %s (%s) %s.
These tests never skip. Install the pinned emulator (tools/go.mod) from the repository root with:

	make tools

or equivalently:

	scripts/install-rie.sh

then run again: cd integration && go test -tags integration -count=1 -v ./...`, path, from, reason)
}

// emulator is one running Lambda Runtime Interface Emulator with the
// bootstrap binary as its function. Its methods must be called from the
// test's goroutine; invoke sends one invocation at a time (the emulator
// crashes on parallel invocations).
type emulator struct {
	url    string // invocation endpoint
	cmd    *exec.Cmd
	out    *syncBuffer // the emulator's and the function's stdout and stderr
	exited chan struct{}
	mu     sync.Mutex // one invocation at a time
}

// startEmulator starts an emulator on loopback with
// AWS_LAMBDA_FUNCTION_TIMEOUT=timeoutSeconds, debug logs and env (KEY=value
// entries, later ones winning) in the function's environment. It waits until
// the emulator listens, and stops it (with the function) when the test ends,
// logging everything the emulator and the function printed if the test
// failed.
func startEmulator(t *testing.T, timeoutSeconds int, env ...string) *emulator {
	t.Helper()
	for attempt := 1; ; attempt++ {
		e, err := tryStartEmulator(t, timeoutSeconds, env)
		if err == nil {
			return e
		}
		if attempt == startAttempts {
			t.Fatalf("emulator did not start after %d attempts: %v", attempt, err)
		}
		t.Logf("emulator start attempt %d: %v; retrying with new ports", attempt, err)
	}
}

func tryStartEmulator(t *testing.T, timeoutSeconds int, env []string) (*emulator, error) {
	t.Helper()
	invokeAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	// The emulator's Runtime API listens on 127.0.0.1:9001 unless told
	// otherwise: a fixed port that a second emulator would fail to bind.
	runtimeAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	// Flags go before the bootstrap path: every argument from the path on is
	// the function's command line.
	cmd := exec.Command(riePath,
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", runtimeAddr,
		bootstrapPath)
	cmd.Env = append(functionEnviron(),
		"AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(timeoutSeconds),
		"LAMBDAADAPTER_LOG_LEVEL=debug",
	)
	cmd.Env = append(cmd.Env, env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", riePath, err)
	}
	e := &emulator{
		url:    "http://" + invokeAddr + "/2015-03-31/functions/function/invocations",
		cmd:    cmd,
		out:    out,
		exited: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(e.exited)
	}()
	if err := e.waitReady(invokeAddr, runtimeAddr); err != nil {
		e.stop()
		return nil, fmt.Errorf("%w; emulator output:\n%s", err, out)
	}
	t.Cleanup(func() {
		e.stop()
		if t.Failed() {
			t.Logf("emulator %s (function timeout %d s, env %q) printed:\n%s", invokeAddr, timeoutSeconds, env, out)
		}
	})
	return e, nil
}

// functionEnviron returns the test's environment without the variables that
// would change how the emulator or the function behaves (AWS_*, including
// credentials and AWS_LAMBDA_MAX_CONCURRENCY, which switches the emulator to
// another mode; LAMBDAADAPTER_*; _LAMBDA*; the emulator's LOG_LEVEL): the
// emulator passes its whole environment on to the function.
func functionEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "AWS_"), strings.HasPrefix(name, "LAMBDAADAPTER_"),
			strings.HasPrefix(name, "_LAMBDA"), name == "_HANDLER", name == "LOG_LEVEL":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// freeLoopbackAddr returns a 127.0.0.1 address whose port was free a moment
// ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// waitReady waits until both the invocation endpoint and the Runtime API
// accept connections, the emulator exits, or readyTimeout passes. It sends
// no invocation: the emulator starts the function on the first one.
func (e *emulator) waitReady(addrs ...string) error {
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		pending := 0
		for _, a := range addrs {
			// The emulator itself must hold the listening socket: a dial
			// alone also succeeds when another process took the port between
			// our probe and the emulator's bind (it then dies of "address
			// already in use" and the invocation finds nobody).
			if ours, known := listensOn(e.cmd.Process.Pid, a); known {
				if !ours {
					pending++
				}
				continue
			}
			c, err := net.DialTimeout("tcp", a, 100*time.Millisecond)
			if err != nil {
				pending++
				continue
			}
			c.Close()
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-e.exited:
			return fmt.Errorf("emulator exited before listening (%v)", e.cmd.ProcessState)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("emulator not listening on %v after %s", addrs, readyTimeout)
		}
	}
}

// stop ends the function process the emulator started, then the emulator,
// both with SIGKILL. (On SIGTERM the emulator kills the function at once but
// then takes about 1.7 s to exit, for every test.) The function process has
// a process group of its own, so it is killed by its pid, read from /proc;
// stop waits for the emulator to reap it before killing the emulator, so
// that no zombie is left to init.
func (e *emulator) stop() {
	deadline := time.Now().Add(stopTimeout)
	for _, pid := range childPIDs(e.cmd.Process.Pid) {
		if !isBootstrap(pid) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for processExists(pid) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	_ = e.cmd.Process.Kill()
	select {
	case <-e.exited:
	case <-time.After(time.Until(deadline)):
	}
}

// childPIDs returns the pids of the direct children of pid, read from
// /proc (Linux); nil elsewhere.
func childPIDs(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var pids []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// processExists reports whether pid is a process, running or a zombie not
// yet reaped.
func processExists(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// isBootstrap reports whether pid is still a running copy of our bootstrap
// binary (and not a process that reused the pid).
func isBootstrap(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(b, []byte{0})
	return string(argv0) == bootstrapPath
}

// invoke sends payload as one invocation and returns the response body and
// how long the round trip took. Every answer of the emulator, including a
// function error or a timeout, is HTTP 200; any other status fails the test.
func (e *emulator) invoke(t *testing.T, payload []byte) (body string, elapsed time.Duration) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: time.Minute}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	elapsed = time.Since(start)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("invoke: reading the response: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("invoke: HTTP %s, body %q", resp.Status, b)
	}
	return string(b), elapsed
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// listensOn reports whether process pid holds a listening TCP socket on
// addr (127.0.0.1:port), from /proc; known is false where /proc cannot tell.
func listensOn(pid int, addr string) (ours, known bool) {
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return false, false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return false, false
	}
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false, false
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, false
	}
	want := map[string]bool{}
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 32); ok && err == nil && int(p) == port {
			want["socket:["+f[9]+"]"] = true
		}
	}
	for _, fd := range fds {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && want[link] {
			return true, true
		}
	}
	return false, true
}
