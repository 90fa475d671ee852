//go:build integration

package faultcases_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter/integration/standin"
)

// proc is one running `bootstrap -mode=ecs` process. Its methods are safe
// for concurrent use.
type proc struct {
	name   string // also its owner id
	cmd    *exec.Cmd
	exited chan struct{}

	mu       sync.Mutex
	partial  []byte
	lines    []procLine
	raw      []string // lines other than record lines, for a failure message
	stderr   bytes.Buffer
	stopping bool
}

// procLine is one JSON log line of a worker (the fields the tests read).
type procLine struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Msg     string    `json:"msg"`
	ShardID string    `json:"shard_id"`
	Attempt int       `json:"attempt"`
	ID      string    `json:"id"`
	Reason  string    `json:"reason"`
}

// Messages of the log lines the tests look for.
const (
	msgRecord     = "record"
	msgLeaseTaken = "consumer: lease taken"
)

// childEnviron is the test's environment without the variables that would
// change how the worker behaves (AWS_*, LAMBDAADAPTER_*).
func childEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "AWS_") || strings.HasPrefix(name, "LAMBDAADAPTER_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// startProc starts `bootstrap -mode=ecs` as owner name on stream with the
// lease table, its SDK pointed at the routes r, from TRIM_HORIZON, with
// short leases, debug logs (one "record" line per handler run) and
// settings (KEY=value). It kills the process when the test ends and prints
// its log (without record lines) if the test failed.
func startProc(t *testing.T, r *routes, name, stream, table string, settings ...string) *proc {
	t.Helper()
	cmd := exec.Command(bootstrapPath, "-mode=ecs")
	cmd.Env = append(childEnviron(), r.environ()...)
	cmd.Env = append(cmd.Env,
		"LAMBDAADAPTER_STREAM="+stream,
		"LAMBDAADAPTER_LEASE_TABLE="+table,
		"LAMBDAADAPTER_OWNER_ID="+name,
		"LAMBDAADAPTER_START=trim_horizon",
		"LAMBDAADAPTER_LEASE_DURATION="+leaseDuration.String(),
		"LAMBDAADAPTER_LIST_INTERVAL="+listInterval.String(),
		"LAMBDAADAPTER_SHUTDOWN_TIMEOUT="+shutdownTimeout.String(),
		"LAMBDAADAPTER_LOG_LEVEL=debug",
	)
	cmd.Env = append(cmd.Env, settings...)
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	cmd.Stdout = p
	cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting worker %s: %v", name, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.mu.Lock()
		p.stopping = true
		p.mu.Unlock()
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Logf("worker %s printed (record lines left out):\n%s\nstderr:\n%s", name, strings.Join(p.raw, "\n"), p.stderr.String())
		}
	})
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// Write collects the worker's stdout, one JSON line at a time.
func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		line := p.partial[:i]
		var l procLine
		if err := json.Unmarshal(line, &l); err != nil {
			p.raw = append(p.raw, "(not JSON) "+string(line))
		} else {
			p.lines = append(p.lines, l)
			if l.Msg != msgRecord {
				p.raw = append(p.raw, string(line))
			}
		}
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

func (p *proc) log() []procLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lines)
}

// records returns the worker's record lines so far.
func (p *proc) records() []procLine {
	var out []procLine
	for _, l := range p.log() {
		if l.Msg == msgRecord {
			out = append(out, l)
		}
	}
	return out
}

// alive fails the test when the worker exited without being told to.
func (p *proc) alive(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopping {
		t.Fatalf("worker %s exited on its own (%v); stderr: %s", p.name, p.cmd.ProcessState, p.stderr.String())
	}
}

// terminate sends SIGTERM and fails the test unless the worker exits with
// status 0 in time.
func (p *proc) terminate(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("worker %s: SIGTERM: %v", p.name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(4 * shutdownTimeout):
		t.Fatalf("worker %s did not exit within %v of SIGTERM", p.name, 4*shutdownTimeout)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("worker %s exited with %v after SIGTERM, want status 0", p.name, p.cmd.ProcessState)
	}
}

// procCounts returns how often each id was handled, over the workers.
func procCounts(ps ...*proc) map[string]int {
	n := map[string]int{}
	for _, p := range ps {
		for _, l := range p.records() {
			n[l.ID]++
		}
	}
	return n
}

// overlaps returns each record a worker started on a shard after another
// worker had started one of that shard since this worker's previous start,
// without this worker taking the lease again in between: an interleaving
// a1 < b1 < a2 of handler starts of two workers on one shard within one
// tenure, which self-fencing rules out. (integration/ecs_fence_test.go's
// ecsOverlaps, on these workers.)
func overlaps(ps ...*proc) []string {
	type event struct {
		at     time.Time
		worker string
		id     string
		taken  bool
	}
	byShard := map[string][]event{}
	for _, p := range ps {
		for _, l := range p.log() {
			switch l.Msg {
			case msgRecord:
				byShard[l.ShardID] = append(byShard[l.ShardID], event{l.Time, p.name, l.ID, false})
			case msgLeaseTaken:
				byShard[l.ShardID] = append(byShard[l.ShardID], event{l.Time, p.name, "", true})
			}
		}
	}
	var out []string
	for shard, es := range byShard {
		slices.SortStableFunc(es, func(a, b event) int { return a.at.Compare(b.at) })
		cut := map[string]*event{}
		for i := range es {
			e := &es[i]
			if e.taken {
				delete(cut, e.worker)
				continue
			}
			if c := cut[e.worker]; c != nil {
				out = append(out, fmt.Sprintf("%s: %s started %s at %s after %s had started %s at %s",
					shard, e.worker, e.id, e.at.Format(time.StampMicro), c.worker, c.id, c.at.Format(time.StampMicro)))
				delete(cut, e.worker)
			}
			for _, p := range ps {
				if p.name != e.worker && cut[p.name] == nil {
					cut[p.name] = e
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// leaseTakes returns the "lease taken" lines of the workers at or after
// since, as "worker shard" strings.
func leaseTakes(since time.Time, ps ...*proc) []string {
	var out []string
	for _, p := range ps {
		for _, l := range p.log() {
			if l.Msg == msgLeaseTaken && !l.Time.Before(since) {
				out = append(out, p.name+" "+l.ShardID)
			}
		}
	}
	slices.Sort(out)
	return out
}

// feeder writes records to a stream directly (not through a fault layer)
// in the background: batch records from gen every interval until stopped.
type feeder struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	rs    []rec
	err   error
}

func startFeeder(t *testing.T, env *standin.Env, stream string, batch int, every time.Duration, gen func(i int) rec) *feeder {
	t.Helper()
	f := &feeder{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ; n += batch {
			rs := make([]rec, batch)
			for i := range rs {
				rs[i] = gen(n + i)
			}
			err := writeRecs(context.Background(), env.Kinesis, stream, rs)
			f.mu.Lock()
			if err != nil {
				f.err = err
			} else {
				f.rs = append(f.rs, rs...)
			}
			f.mu.Unlock()
			if err != nil {
				return
			}
			select {
			case <-f.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(f.halt)
	return f
}

func (f *feeder) halt() {
	select {
	case <-f.stopc:
	default:
		close(f.stopc)
	}
	<-f.done
}

// stop stops the feeder and returns what it wrote, failing the test if a
// write failed.
func (f *feeder) stop(t *testing.T) []rec {
	t.Helper()
	f.halt()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		t.Fatalf("feeder: %v", f.err)
	}
	return slices.Clone(f.rs)
}

// hashKeyOf returns a hash key in the middle of shard i of a stream
// created with n shards (equal hash key ranges).
func hashKeyOf(i, n int) string {
	space := new(big.Int).Lsh(big.NewInt(1), 128)
	width := new(big.Int).Div(space, big.NewInt(int64(n)))
	k := new(big.Int).Mul(width, big.NewInt(int64(i)))
	k.Add(k, new(big.Int).Rsh(width, 1))
	return k.String()
}
