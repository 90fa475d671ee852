//go:build integration

package soak

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/shardsettle/lambdaadapter/integration/standin"
)

// fleet runs the bootstrap -mode=ecs workers, one per slot; a worker that
// is killed or stopped is replaced in its slot by a new process with a new
// name (owner id).
type fleet struct {
	s *soak

	mu    sync.Mutex
	slots []*worker
	all   []*worker
	n     int
}

// worker is one bootstrap -mode=ecs process.
type worker struct {
	name   string
	slot   int
	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File

	mu        sync.Mutex
	partial   []byte
	lines     []Line
	stderr    tail
	stop      string
	signalled time.Time
	exitedAt  time.Time
	hung      bool
	paused    bool
}

func newFleet(s *soak) *fleet {
	f := &fleet{s: s}
	s.t.Cleanup(func() {
		// Whatever still runs (a failed run): let it go on and kill it.
		for _, w := range f.workers() {
			select {
			case <-w.exited:
			default:
				_ = w.cmd.Process.Signal(syscall.SIGCONT)
				_ = w.cmd.Process.Kill()
				<-w.exited
			}
		}
	})
	return f
}

// startSlot starts a new worker in slot i (the fleet grows to i+1 slots
// when it has fewer).
func (f *fleet) startSlot(i int) *worker {
	s := f.s
	f.mu.Lock()
	f.n++
	name := fmt.Sprintf("w%d", f.n)
	f.mu.Unlock()
	env := s.workerEnv(name)
	log, err := os.Create(filepath.Join(s.out, name+".log"))
	if err != nil {
		s.t.Fatal(err)
	}
	w := &worker{name: name, slot: i, exited: make(chan struct{}), log: log}
	w.cmd = exec.Command(s.bootstrap, "-mode=ecs")
	w.cmd.Env = env
	errLog, err := os.Create(filepath.Join(s.out, name+".stderr"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = errLog.Close() })
	w.cmd.Stdout, w.cmd.Stderr = w, io.MultiWriter(errLog, &w.stderr)
	if err := w.cmd.Start(); err != nil {
		s.t.Fatalf("soak: start worker %s: %v", name, err)
	}
	go func() {
		_ = w.cmd.Wait()
		w.mu.Lock()
		w.exitedAt = time.Now()
		w.mu.Unlock()
		_ = w.log.Close()
		close(w.exited)
	}()
	f.mu.Lock()
	for len(f.slots) <= i {
		f.slots = append(f.slots, nil)
	}
	f.slots[i] = w
	f.all = append(f.all, w)
	f.mu.Unlock()
	s.logf("started %s in slot %d (pid %d)", name, i, w.cmd.Process.Pid)
	return w
}

// workerEnv is the environment of the worker named name: the soak's
// settings, the run's stream, table and queues (those the run has), its
// routes through the fault layer, and s.workerExtra last.
func (s *soak) workerEnv(name string) []string {
	env := append(baseEnviron(),
		"AWS_REGION="+standin.Region, "AWS_ACCESS_KEY_ID="+standin.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+standin.SecretAccessKey,
		"LAMBDAADAPTER_STREAM="+s.ecsStream,
		"LAMBDAADAPTER_LEASE_TABLE="+s.ecsTable,
		"LAMBDAADAPTER_OWNER_ID="+name,
		"LAMBDAADAPTER_START=trim_horizon",
		"LAMBDAADAPTER_LEASE_DURATION="+leaseDuration.String(),
		"LAMBDAADAPTER_CHECKPOINT_INTERVAL="+checkpointInterval.String(),
		"LAMBDAADAPTER_LIST_INTERVAL="+listInterval.String(),
		"LAMBDAADAPTER_SHUTDOWN_TIMEOUT="+shutdownTimeout.String(),
		"LAMBDAADAPTER_LOG_LEVEL=debug",
		fmt.Sprintf("LAMBDAADAPTER_MAX_ATTEMPTS=%d", maxAttempts),
	)
	for _, kv := range [][2]string{{"LAMBDAADAPTER_DEAD_LETTER_QUEUE", s.ecsDLQ}, {"LAMBDAADAPTER_DELAY_QUEUE", s.ecsDelays},
		{"LAMBDAADAPTER_DEMO_OUTAGE_FILE", s.outageFile}} {
		if kv[1] != "" {
			env = append(env, kv[0]+"="+kv[1])
		}
	}
	for _, svc := range []service{svcKinesis, svcDynamoDB, svcSQS} {
		url, err := s.net.route(name, svc)
		if err != nil {
			s.t.Fatalf("soak: route of %s to %s: %v", name, svc, err)
		}
		env = append(env, svc.endpointVar()+"="+url)
	}
	return append(env, s.workerExtra...)
}

// Write collects the worker's stdout: every line to its log file, the
// lines the checker reads in memory.
func (w *worker) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.log.Write(p)
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		if l, ok := ParseLine(w.partial[:i]); ok && Relevant(l.Msg) {
			w.lines = append(w.lines, l)
		}
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

// slot returns the worker in slot i.
func (f *fleet) slot(i int) *worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.slots[i]
}

func (f *fleet) workers() []*worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.all)
}

// signal sends sig to the worker as the stop how and waits up to bound for
// it to exit; one that does not is killed and marked hung.
func (w *worker) signal(sig syscall.Signal, how string, bound time.Duration) {
	w.mu.Lock()
	w.stop, w.signalled = how, time.Now()
	w.mu.Unlock()
	_ = w.cmd.Process.Signal(sig)
	select {
	case <-w.exited:
	case <-time.After(bound):
		w.mu.Lock()
		w.hung = true
		w.mu.Unlock()
		// SIGQUIT first: the Go runtime writes every goroutine's stack
		// to stderr (kept in <name>.stderr) and exits; then kill.
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-w.exited:
		case <-time.After(5 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.exited
		}
	}
}

// pause stops the worker with SIGSTOP for d, then lets it go on.
func (w *worker) pause(d time.Duration) (from, to time.Time) {
	from = time.Now()
	_ = w.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(d)
	_ = w.cmd.Process.Signal(syscall.SIGCONT)
	return from, time.Now()
}

// stopAll stops every running worker with SIGTERM, at once.
func (f *fleet) stopAll() {
	var wg sync.WaitGroup
	for _, w := range f.workers() {
		select {
		case <-w.exited:
			continue
		default:
		}
		wg.Go(func() { w.signal(syscall.SIGTERM, StopFinal, exitBound) })
	}
	wg.Wait()
}

// processes returns every worker as the checker sees it.
func (f *fleet) processes() []*Process {
	var out []*Process
	for _, w := range f.workers() {
		<-w.exited
		w.mu.Lock()
		st := w.cmd.ProcessState
		e := &Exit{Stop: w.stop, Signalled: w.signalled, Exited: w.exitedAt, Code: st.ExitCode(), Stderr: w.stderr.String()}
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal().String()
		}
		switch w.stop {
		case StopKill:
			e.Bound = killBound
		default:
			e.Bound = exitBound
		}
		if w.hung {
			e.Exited = time.Time{}
		}
		out = append(out, &Process{Name: w.name, Mode: ModeECS, Lines: slices.Clone(w.lines), Exit: e})
		w.mu.Unlock()
	}
	return out
}

// lines returns every worker's lines so far.
func (f *fleet) lines() []Line {
	var out []Line
	for _, w := range f.workers() {
		w.mu.Lock()
		out = append(out, w.lines...)
		w.mu.Unlock()
	}
	return out
}

// tail keeps the last 4 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if n := len(t.buf) - 4096; n > 0 {
		t.buf = t.buf[n:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
