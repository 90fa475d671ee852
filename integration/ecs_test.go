//go:build integration

package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lease"
)

// The tests below run the bootstrap binary in long-running mode
// (bootstrap -mode=ecs) as real worker processes against kinesis-local and
// dynalite: several workers share a stream's shards through a lease table,
// are stopped with SIGTERM or killed with SIGKILL, and the stream is split
// and merged under them. Each worker logs one JSON line per record its
// demonstration handler runs ("msg":"record", with the payload's "id"); the
// tests collect those lines and read the lease table directly. Nothing may
// be lost; duplicates are allowed where the design allows them (a kill -9
// re-delivers what was not yet checkpointed) and are counted and logged. No
// test runs in parallel: the machine has few cores and the timings matter.

// Settings and bounds of the long-running tests.
const (
	// ecsLeaseDuration is the workers' lease duration: short, so that the
	// leases of a killed worker expire quickly.
	ecsLeaseDuration = 3 * time.Second
	// ecsListInterval is how often the workers list the shards again.
	ecsListInterval = 2 * time.Second
	// ecsShutdownTimeout bounds a worker's graceful stop.
	ecsShutdownTimeout = 5 * time.Second
	// ecsExitTimeout bounds how long a stopped worker may take to exit.
	ecsExitTimeout = 20 * time.Second
	// ecsHandledTimeout bounds waiting until every written record was
	// handled, once the writing has stopped.
	ecsHandledTimeout = 45 * time.Second
	// ecsSettleTimeout bounds waiting for the leases to reach a wanted
	// distribution.
	ecsSettleTimeout = 30 * time.Second
	// ecsPoll is the pause between two looks at the lease table or the
	// workers' logs.
	ecsPoll = 100 * time.Millisecond
)

// ecsLogLine is one JSON line a worker printed: the handler's "record" lines
// (their "record outcome" lines are left out of failure logs) and the
// consumer's lease lines (only the fields the tests read).
type ecsLogLine struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Msg     string    `json:"msg"`
	ShardID string    `json:"shard_id"`
	Seq     string    `json:"sequence_number"`
	Key     string    `json:"partition_key"`
	Attempt int       `json:"attempt"`
	ID      string    `json:"id"`
	// Checkpoint and From are set on "consumer: lease taken" lines.
	Checkpoint string `json:"checkpoint"`
	From       string `json:"from"`
}

// Messages of the log lines the tests look for.
const (
	ecsMsgRecord        = "record"
	ecsMsgRecordOutcome = "record outcome"
	ecsMsgLeaseTaken    = "consumer: lease taken"
)

// ecsWorker is one running bootstrap -mode=ecs process. Its methods are safe
// for concurrent use.
type ecsWorker struct {
	name   string // also its owner id
	cmd    *exec.Cmd
	exited chan struct{}
	stderr *syncBuffer

	mu       sync.Mutex
	partial  []byte       // stdout after the last newline
	lines    []ecsLogLine // every JSON line, in order
	raw      []string     // every line that is not a record line, for failure logs
	stopping bool         // the test stopped it: its exit is expected
}

// ecsStartWorker starts bootstrap -mode=ecs as the owner name, reading stream
// with the lease table, from TRIM_HORIZON, with short lease and list
// intervals, debug logs, and settings (KEY=value, later ones winning). It
// kills the worker when the test ends (if still running) and logs what the
// worker printed (without its record and record outcome lines) if the test
// failed.
func ecsStartWorker(t *testing.T, env *standin.Env, name, stream, table string, settings ...string) *ecsWorker {
	t.Helper()
	cmd := exec.Command(bootstrapPath, "-mode=ecs")
	cmd.Env = append(functionEnviron(), env.Environ()...)
	cmd.Env = append(cmd.Env,
		"LAMBDAADAPTER_STREAM="+stream,
		"LAMBDAADAPTER_LEASE_TABLE="+table,
		"LAMBDAADAPTER_OWNER_ID="+name,
		"LAMBDAADAPTER_START=trim_horizon",
		"LAMBDAADAPTER_LEASE_DURATION="+ecsLeaseDuration.String(),
		"LAMBDAADAPTER_LIST_INTERVAL="+ecsListInterval.String(),
		"LAMBDAADAPTER_SHUTDOWN_TIMEOUT="+ecsShutdownTimeout.String(),
		"LAMBDAADAPTER_LOG_LEVEL=debug",
	)
	cmd.Env = append(cmd.Env, settings...)
	w := &ecsWorker{name: name, cmd: cmd, exited: make(chan struct{}), stderr: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = w, w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting worker %s (%s -mode=ecs): %v", name, bootstrapPath, err)
	}
	go func() {
		_ = cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		w.mu.Lock()
		w.stopping = true
		w.mu.Unlock()
		_ = cmd.Process.Kill()
		select {
		case <-w.exited:
		case <-time.After(ecsExitTimeout):
			t.Errorf("worker %s (pid %d) did not exit after SIGKILL", name, cmd.Process.Pid)
		}
		if t.Failed() {
			w.mu.Lock()
			out := strings.Join(w.raw, "\n")
			n := len(w.lines)
			w.mu.Unlock()
			t.Logf("worker %s (%d log lines) printed, record lines left out:\n%s\nstderr:\n%s", name, n, out, w.stderr)
		}
	})
	return w
}

// Write collects the worker's stdout, one JSON line at a time.
func (w *ecsWorker) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := w.partial[:i]
		var l ecsLogLine
		if err := json.Unmarshal(line, &l); err != nil {
			w.raw = append(w.raw, "(not JSON) "+string(line))
		} else {
			w.lines = append(w.lines, l)
			if l.Msg != ecsMsgRecord && l.Msg != ecsMsgRecordOutcome {
				w.raw = append(w.raw, string(line))
			}
		}
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

// log returns a copy of every JSON line the worker printed so far.
func (w *ecsWorker) log() []ecsLogLine {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.lines)
}

// records returns the worker's "record" lines so far, in the order printed.
func (w *ecsWorker) records() []ecsLogLine {
	var out []ecsLogLine
	for _, l := range w.log() {
		if l.Msg == ecsMsgRecord {
			out = append(out, l)
		}
	}
	return out
}

// unexpectedExit returns a description of the worker's exit when it exited
// without the test stopping it, or "".
func (w *ecsWorker) unexpectedExit() string {
	select {
	case <-w.exited:
	default:
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopping {
		return ""
	}
	return fmt.Sprintf("worker %s exited on its own (%v); stderr: %s", w.name, w.cmd.ProcessState, w.stderr)
}

// terminate sends SIGTERM and waits until the worker exits; it fails the
// test unless the worker exits with status 0 within ecsExitTimeout.
func (w *ecsWorker) terminate(t *testing.T) {
	t.Helper()
	w.signal(t, syscall.SIGTERM)
	if code := w.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("worker %s exited with %v after SIGTERM, want status 0; stderr: %s", w.name, w.cmd.ProcessState, w.stderr)
	}
}

// kill sends SIGKILL (kill -9) and waits until the worker is gone.
func (w *ecsWorker) kill(t *testing.T) {
	t.Helper()
	w.signal(t, syscall.SIGKILL)
}

func (w *ecsWorker) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("worker %s: sending %v: %v", w.name, sig, err)
	}
	select {
	case <-w.exited:
	case <-time.After(ecsExitTimeout):
		t.Fatalf("worker %s did not exit within %v of %v", w.name, ecsExitTimeout, sig)
	}
}

// ecsCheckAlive fails the test when a worker exited without being told to.
func ecsCheckAlive(t *testing.T, ws ...*ecsWorker) {
	t.Helper()
	for _, w := range ws {
		if s := w.unexpectedExit(); s != "" {
			t.Fatal(s)
		}
	}
}

// ecsEventually polls check every ecsPoll until it reports true, and fails the
// test with what and check's last description after within. It returns how
// long it waited.
func ecsEventually(t *testing.T, within time.Duration, what string, check func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, state := check()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: not after %v; last seen: %s", what, within, state)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: test context done: %v", what, t.Context().Err())
		case <-time.After(ecsPoll):
		}
	}
}

// ecsRandomSuffix returns 12 random hex digits.
func ecsRandomSuffix(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// ecsNewLeaseTable creates a lease table with a unique name and deletes it
// when the test ends. With viaCLI it creates it with `bootstrap leases init`,
// else with lease.DynamoDB.CreateTable.
func ecsNewLeaseTable(t *testing.T, env *standin.Env, viaCLI bool) (string, *lease.DynamoDB) {
	t.Helper()
	name := "leases-" + ecsRandomSuffix(t)
	store := lease.NewDynamoDB(env.DynamoDB, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
		defer cancel()
		_, err := env.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		var missing *dynamodbtypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &missing) {
			t.Errorf("delete lease table %s: %v", name, err)
		}
	})
	if viaCLI {
		out, err := ecsBootstrapCommand(t, env, "leases", "init", "-table", name)
		if err != nil {
			t.Fatalf("bootstrap leases init -table %s: %v\n%s", name, err, out)
		}
		if want := "lease table " + name + " created (PAY_PER_REQUEST, hash key leaseKey, owner index leaseOwner-index)"; !strings.Contains(out, want) {
			t.Errorf("bootstrap leases init printed %q, want it to contain %q", out, want)
		}
	} else if err := store.CreateTable(sdkContext(t)); err != nil {
		t.Fatalf("create lease table %s: %v", name, err)
	}
	return name, store
}

// ecsBootstrapCommand runs the bootstrap binary with args against the
// stand-ins and returns its combined output.
func ecsBootstrapCommand(t *testing.T, env *standin.Env, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bootstrapPath, args...)
	cmd.Env = append(functionEnviron(), env.Environ()...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ecsLeases reads the stream's leases from the table, by shard id.
func ecsLeases(t *testing.T, store *lease.DynamoDB, stream string) map[string]lease.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), sdkTimeout)
	defer cancel()
	ls, err := leasesOf(store.Snapshot(ctx, stream))
	if err != nil {
		t.Fatalf("list leases of %s: %v", stream, err)
	}
	m := make(map[string]lease.Lease, len(ls))
	for _, l := range ls {
		m[l.Key.ShardID] = l
	}
	return m
}

// ecsOwnership returns the shards each owner holds among the given shards (all
// when shards is empty), with free ones under "".
func ecsOwnership(ls map[string]lease.Lease, shards ...string) map[string][]string {
	by := map[string][]string{}
	for id, l := range ls {
		if len(shards) > 0 && !slices.Contains(shards, id) {
			continue
		}
		by[l.Owner] = append(by[l.Owner], id)
	}
	for _, ids := range by {
		sort.Strings(ids)
	}
	return by
}

// ecsDescribeLeases formats leases for a failure message.
func ecsDescribeLeases(ls map[string]lease.Lease) string {
	ids := make([]string, 0, len(ls))
	for id := range ls {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for _, id := range ids {
		l := ls[id]
		owner := l.Owner
		if owner == "" {
			owner = "(free)"
		}
		fmt.Fprintf(&b, "\n\t%s owner %s counter %d checkpoint %q parents %v", id, owner, l.Counter, l.Checkpoint, l.ParentShardIDs)
	}
	return b.String()
}

// ecsEntry is one record to write: its id (also in the payload), its
// partition key and, optionally, an explicit hash key and more payload.
type ecsEntry struct {
	id, key, hashKey string
	sleepMS          int
	outcome          string // the demo handler's outcome ("" acks)
	delayMS          int    // the delay of outcome "retry_after"
	reply            string // a reply the demo handler writes first
}

func (e ecsEntry) request() kinesistypes.PutRecordsRequestEntry {
	payload := map[string]any{"id": e.id}
	if e.sleepMS > 0 {
		payload["sleep_ms"] = e.sleepMS
	}
	if e.outcome != "" {
		payload["outcome"] = e.outcome
	}
	if e.delayMS > 0 {
		payload["delay_ms"] = e.delayMS
	}
	if e.reply != "" {
		payload["reply"] = e.reply
	}
	data, _ := json.Marshal(payload)
	r := kinesistypes.PutRecordsRequestEntry{PartitionKey: aws.String(e.key), Data: data}
	if e.hashKey != "" {
		r.ExplicitHashKey = aws.String(e.hashKey)
	}
	return r
}

// ecsNumbered returns n entries with ids and partition keys prefix-from ...
// prefix-(from+n-1): keys spread over every shard.
func ecsNumbered(prefix string, from, n int) []ecsEntry {
	es := make([]ecsEntry, n)
	for i := range es {
		id := fmt.Sprintf("%s-%06d", prefix, from+i)
		es[i] = ecsEntry{id: id, key: id}
	}
	return es
}

// ecsWriteEntries writes es with PutRecords and returns their ids. It never
// calls t.Fatal, so feeders may use it from their goroutine.
func ecsWriteEntries(ctx context.Context, env *standin.Env, stream string, es []ecsEntry) ([]string, error) {
	ids := make([]string, 0, len(es))
	for len(es) > 0 {
		n := min(len(es), 500)
		reqs := make([]kinesistypes.PutRecordsRequestEntry, n)
		for i := range reqs {
			reqs[i] = es[i].request()
		}
		out, err := env.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: reqs})
		if err != nil {
			return ids, fmt.Errorf("PutRecords of %d records to %s: %w", n, stream, err)
		}
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				return ids, fmt.Errorf("PutRecords to %s: record %s failed: %s: %s", stream, es[i].id, aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage))
			}
			ids = append(ids, es[i].id)
		}
		es = es[n:]
	}
	return ids, nil
}

// ecsWrite writes es and fails the test on any error.
func ecsWrite(t *testing.T, env *standin.Env, stream string, es []ecsEntry) []string {
	t.Helper()
	ids, err := ecsWriteEntries(sdkContext(t), env, stream, es)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// ecsFeeder writes numbered records to a stream in the background, batch
// records every interval, until it wrote total records or is stopped. Its
// methods are safe for concurrent use.
type ecsFeeder struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	ids   []string
	err   error
}

// ecsStartFeeder starts a feeder of records with ids prefix-000000 and up; a
// total of 0 means no limit. The feeder stops when the test ends.
func ecsStartFeeder(t *testing.T, env *standin.Env, stream, prefix string, batch int, every time.Duration, total int) *ecsFeeder {
	t.Helper()
	return ecsStartFeederOf(t, env, stream, batch, every, total, func(from, n int) []ecsEntry { return ecsNumbered(prefix, from, n) })
}

// ecsStartFeederOf is ecsStartFeeder writing the entries entries(from, n)
// gives for the records from, ..., from+n-1.
func ecsStartFeederOf(t *testing.T, env *standin.Env, stream string, batch int, every time.Duration, total int, entries func(from, n int) []ecsEntry) *ecsFeeder {
	t.Helper()
	f := &ecsFeeder{stopc: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(f.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; total == 0 || n < total; {
			k := batch
			if total > 0 {
				k = min(k, total-n)
			}
			ids, err := ecsWriteEntries(ctx, env, stream, entries(n, k))
			f.mu.Lock()
			f.ids = append(f.ids, ids...)
			if err != nil && f.err == nil {
				f.err = err
			}
			f.mu.Unlock()
			if err != nil {
				return
			}
			n += k
			select {
			case <-f.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		f.halt()
	})
	return f
}

// count returns how many records the feeder wrote so far.
func (f *ecsFeeder) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ids)
}

func (f *ecsFeeder) halt() {
	select {
	case <-f.stopc:
	default:
		close(f.stopc)
	}
	<-f.done
}

// stop stops the feeder (if it is still writing), fails the test if a write
// failed, and returns the ids of every record written.
func (f *ecsFeeder) stop(t *testing.T) []string {
	t.Helper()
	f.halt()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		t.Fatalf("feeder: %v (after %d records)", f.err, len(f.ids))
	}
	return slices.Clone(f.ids)
}

// wait waits until the feeder wrote all its records (bounded) and returns
// their ids.
func (f *ecsFeeder) wait(t *testing.T, within time.Duration) []string {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(within):
		t.Fatalf("feeder: still writing after %v (%d records so far)", within, f.count())
	}
	return f.stop(t)
}

// ecsHandledCounts returns how often each id was handled, over all workers.
func ecsHandledCounts(ws ...*ecsWorker) map[string]int {
	n := map[string]int{}
	for _, w := range ws {
		w.mu.Lock()
		for _, l := range w.lines {
			if l.Msg == ecsMsgRecord {
				n[l.ID]++
			}
		}
		w.mu.Unlock()
	}
	return n
}

// ecsMissingIDs returns the ids not in counts, at most the first ten for a
// message, and how many there are.
func ecsMissingIDs(ids []string, counts map[string]int) (int, []string) {
	var miss []string
	for _, id := range ids {
		if counts[id] == 0 {
			miss = append(miss, id)
		}
	}
	return len(miss), miss[:min(len(miss), 10)]
}

// ecsAwaitHandled waits until every id was handled at least once by one of the
// workers, failing the test (with the first ids missing) after within or
// when a worker exited on its own. It returns how long it waited.
func ecsAwaitHandled(t *testing.T, ids []string, within time.Duration, ws ...*ecsWorker) time.Duration {
	t.Helper()
	return ecsEventually(t, within, fmt.Sprintf("all %d records handled", len(ids)), func() (bool, string) {
		ecsCheckAlive(t, ws...)
		n, first := ecsMissingIDs(ids, ecsHandledCounts(ws...))
		return n == 0, fmt.Sprintf("%d not handled yet, first %v", n, first)
	})
}

// ecsDuplicates returns how many handlings beyond the first there were over
// all the ids, and up to ten ids handled more than once.
func ecsDuplicates(counts map[string]int) (int, []string) {
	d := 0
	var ids []string
	for id, n := range counts {
		if n > 1 {
			d += n - 1
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return d, ids[:min(len(ids), 10)]
}

// ecsLastSequences returns the sequence number of the last record of each
// shard of recs.
func ecsLastSequences(recs []standin.Record) map[string]string {
	last := map[string]string{}
	for _, r := range recs {
		last[r.ShardID] = aws.ToString(r.SequenceNumber)
	}
	return last
}

// ecsSeqCompare compares two decimal sequence numbers.
func ecsSeqCompare(a, b string) int {
	x, _ := new(big.Int).SetString(a, 10)
	y, _ := new(big.Int).SetString(b, 10)
	if x == nil || y == nil {
		return strings.Compare(a, b)
	}
	return x.Cmp(y)
}

// ecsReadStream reads every record of the stream (want of them, following
// children), failing the test unless it finds exactly want.
func ecsReadStream(t *testing.T, env *standin.Env, stream string, want int) []standin.Record {
	t.Helper()
	recs := env.ReadAll(t.Context(), t, stream, want, awaitRead)
	if len(recs) != want {
		t.Fatalf("stream %s holds %d records, want %d", stream, len(recs), want)
	}
	return recs
}

// ecsListShards returns every shard of the stream, open and closed.
func ecsListShards(t *testing.T, env *standin.Env, stream string) []kinesistypes.Shard {
	t.Helper()
	var shards []kinesistypes.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
	for {
		ctx, cancel := context.WithTimeout(t.Context(), sdkTimeout)
		out, err := env.Kinesis.ListShards(ctx, in)
		cancel()
		if err != nil {
			t.Fatalf("ListShards of %s: %v", stream, err)
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			return shards
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// ecsHashRange returns the shard's hash key range.
func ecsHashRange(t *testing.T, s kinesistypes.Shard) (lo, hi *big.Int) {
	t.Helper()
	lo, ok1 := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
	hi, ok2 := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
	if !ok1 || !ok2 {
		t.Fatalf("shard %s has a malformed hash key range", aws.ToString(s.ShardId))
	}
	return lo, hi
}

// ecsAwaitActive waits until the stream is ACTIVE again after a reshard.
func ecsAwaitActive(t *testing.T, env *standin.Env, stream string) {
	t.Helper()
	ecsEventually(t, 30*time.Second, "stream "+stream+" ACTIVE", func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), sdkTimeout)
		defer cancel()
		out, err := env.Kinesis.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatalf("DescribeStreamSummary of %s: %v", stream, err)
		}
		s := out.StreamDescriptionSummary.StreamStatus
		return s == kinesistypes.StreamStatusActive, string(s)
	})
}

// ecsSplitShard splits the shard at the middle of its hash key range and
// waits until the stream is ACTIVE.
func ecsSplitShard(t *testing.T, env *standin.Env, stream string, s kinesistypes.Shard) {
	t.Helper()
	lo, hi := ecsHashRange(t, s)
	mid := new(big.Int).Add(lo, hi)
	mid.Rsh(mid, 1)
	mid.Add(mid, big.NewInt(1))
	_, err := env.Kinesis.SplitShard(sdkContext(t), &kinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: s.ShardId, NewStartingHashKey: aws.String(mid.String()),
	})
	if err != nil {
		t.Fatalf("SplitShard %s of %s: %v", aws.ToString(s.ShardId), stream, err)
	}
	ecsAwaitActive(t, env, stream)
}

// TestECSOneWorkerCheckpoints runs one worker over four shards: it handles
// every record exactly once and, stopped with SIGTERM, exits 0 leaving each
// shard's checkpoint at the shard's last record and every lease free.
func TestECSOneWorkerCheckpoints(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 4)
	table, store := ecsNewLeaseTable(t, env, true)
	const n = 400
	ids := ecsWrite(t, env, stream, ecsNumbered("one", 0, n))
	recs := ecsReadStream(t, env, stream, n)
	if last := ecsLastSequences(recs); len(last) != 4 {
		t.Fatalf("the %d records landed in %d shards, want all 4: %v", n, len(last), last)
	}

	// With a long checkpoint interval only the first checkpoint of each
	// shard is written while running: the final ones must be written by the
	// graceful stop.
	w := ecsStartWorker(t, env, "w1", stream, table, "LAMBDAADAPTER_CHECKPOINT_INTERVAL=1m")
	took := ecsAwaitHandled(t, ids, ecsHandledTimeout, w)
	t.Logf("%d records handled %v after the worker started", n, took)
	// It owns every shard (it handled records of all four).
	ecsEventually(t, 10*time.Second, "every lease owned by w1", func() (bool, string) {
		o := ecsOwnership(ecsLeases(t, store, stream))
		return len(o["w1"]) == 4, fmt.Sprint(o)
	})
	w.terminate(t)

	got := map[string]lease.Lease{}
	for id, l := range ecsLeases(t, store, stream) {
		got[id] = lease.Lease{Owner: l.Owner, Checkpoint: l.Checkpoint}
	}
	want := map[string]lease.Lease{}
	for id, seq := range ecsLastSequences(recs) {
		want[id] = lease.Lease{Checkpoint: seq}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("leases after SIGTERM (owner, checkpoint) (-want: free, at each shard's last record; +got):\n%s", diff)
	}

	counts := ecsHandledCounts(w)
	if d, dup := ecsDuplicates(counts); d != 0 {
		t.Errorf("one worker without faults handled %d records more than once, e.g. %v; want each exactly once", d, dup)
	}
	for _, r := range w.records() {
		if r.Attempt != 1 {
			t.Errorf("record %s handled with attempt %d, want 1", r.ID, r.Attempt)
		}
	}

	out, err := ecsBootstrapCommand(t, env, "leases", "-table", table, "-stream", stream)
	if err != nil {
		t.Fatalf("bootstrap leases -table %s -stream %s: %v\n%s", table, stream, err, out)
	}
	for id, seq := range ecsLastSequences(recs) {
		found := false
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) > 2 && f[0] == id {
				found = true
				if f[1] != "(free)" || !slices.Contains(f, seq) || !strings.Contains(line, "caught up") {
					t.Errorf("bootstrap leases shows %q, want shard %s free, at checkpoint %s, caught up", line, id, seq)
				}
			}
		}
		if !found {
			t.Errorf("bootstrap leases shows no line for shard %s:\n%s", id, out)
		}
	}
}

// ecsOwnerCounts returns the number of shards each of names owns, in the
// order of names, and the number of shards that are free.
func ecsOwnerCounts(ls map[string]lease.Lease, names ...string) (counts []int, free int) {
	o := ecsOwnership(ls)
	for _, n := range names {
		counts = append(counts, len(o[n]))
	}
	return counts, len(o[""])
}

// TestECSBalance starts three workers over six shards, which settle at two
// shards each; a fourth joins and they settle at 2/2/1/1 (each worker's share
// is ceil(6/4) = 2, leases are handed over one at a time) and stay there. Records
// are written the whole time; none is lost.
func TestECSBalance(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 6)
	table, store := ecsNewLeaseTable(t, env, false)
	f := ecsStartFeeder(t, env, stream, "bal", 20, 100*time.Millisecond, 0)

	names := []string{"w1", "w2", "w3"}
	var ws []*ecsWorker
	for _, n := range names {
		ws = append(ws, ecsStartWorker(t, env, n, stream, table))
	}
	took := ecsEventually(t, ecsSettleTimeout, "three workers at 2/2/2", func() (bool, string) {
		ecsCheckAlive(t, ws...)
		ls := ecsLeases(t, store, stream)
		c, free := ecsOwnerCounts(ls, names...)
		return len(ls) == 6 && slices.Equal(c, []int{2, 2, 2}), fmt.Sprintf("counts %v, %d free:%s", c, free, ecsDescribeLeases(ls))
	})
	t.Logf("three workers at 2/2/2 after %v", took)

	names = append(names, "w4")
	ws = append(ws, ecsStartWorker(t, env, "w4", stream, table))
	// The newcomer takes one lease at a time: it must never hold two, and
	// nobody may drop below one.
	var history []string
	took = ecsEventually(t, ecsSettleTimeout, "four workers at 2/2/1/1", func() (bool, string) {
		ecsCheckAlive(t, ws...)
		ls := ecsLeases(t, store, stream)
		c, free := ecsOwnerCounts(ls, names...)
		state := fmt.Sprintf("%v/%d free", c, free)
		if len(history) == 0 || history[len(history)-1] != state {
			history = append(history, state)
		}
		if c[3] > 1 {
			t.Fatalf("w4 holds %d leases, want at most ceil(6/4)-1 = 1 (one steal at a time); history %v:%s", c[3], history, ecsDescribeLeases(ls))
		}
		if slices.Min(c[:3]) == 0 {
			t.Fatalf("a worker lost all its leases to the newcomer; history %v:%s", history, ecsDescribeLeases(ls))
		}
		sorted := slices.Sorted(slices.Values(c))
		return free == 0 && slices.Equal(sorted, []int{1, 1, 2, 2}) && c[3] == 1, state + ecsDescribeLeases(ls)
	})
	t.Logf("four workers at 2/2/1/1 after %v; counts (w1..w4) seen: %v", took, history)
	settled := ecsOwnership(ecsLeases(t, store, stream))
	// Stable: two more balancing rounds change nothing.
	stable := time.Now()
	for time.Since(stable) < ecsLeaseDuration {
		ecsCheckAlive(t, ws...)
		if now := ecsOwnership(ecsLeases(t, store, stream)); !cmp.Equal(settled, now) {
			t.Fatalf("the leases moved again after settling at 2/2/1/1 (-settled +now):\n%s", cmp.Diff(settled, now))
		}
		time.Sleep(ecsPoll)
	}

	ids := f.stop(t)
	took = ecsAwaitHandled(t, ids, ecsHandledTimeout, ws...)
	d, dup := ecsDuplicates(ecsHandledCounts(ws...))
	t.Logf("%d records written while balancing, all handled (%v after the writing stopped), %d duplicates (e.g. %v)", len(ids), took, d, dup)
	if d != 0 {
		// Leases move to joining workers by hand-over (stop, settle,
		// checkpoint, transfer): a planned move delivers nothing twice.
		t.Errorf("%d records handled twice while leases moved to joining workers, e.g. %v; want none", d, dup)
	}
	for _, w := range ws {
		w.terminate(t)
	}
}

// TestECSKill kills one of three workers with SIGKILL while records flow:
// after the lease duration the others take its shards and resume each from
// its checkpoint (the first record they handle there is the one after it).
// Every record is handled; duplicates are counted and logged.
func TestECSKill(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 6)
	table, store := ecsNewLeaseTable(t, env, false)
	f := ecsStartFeeder(t, env, stream, "kill", 20, 50*time.Millisecond, 0)

	names := []string{"w1", "w2", "w3"}
	var ws []*ecsWorker
	for _, n := range names {
		ws = append(ws, ecsStartWorker(t, env, n, stream, table))
	}
	ecsEventually(t, ecsSettleTimeout, "three workers at 2/2/2", func() (bool, string) {
		ecsCheckAlive(t, ws...)
		ls := ecsLeases(t, store, stream)
		c, free := ecsOwnerCounts(ls, names...)
		return slices.Equal(c, []int{2, 2, 2}), fmt.Sprintf("counts %v, %d free", c, free)
	})
	victim, survivors := ws[0], ws[1:]
	// Records must flow through the victim when it dies.
	before := len(victim.records())
	ecsEventually(t, 10*time.Second, "w1 handling records", func() (bool, string) {
		n := len(victim.records())
		return n > before+50, fmt.Sprintf("%d records handled by w1", n)
	})
	victim.kill(t)
	killed := time.Now()
	marks := make([]int, len(survivors)) // where each survivor's log was at the kill
	for i, s := range survivors {
		marks[i] = len(s.log())
	}
	t.Logf("killed w1 after it handled %d records", len(victim.records()))
	// The process is reaped; a write it sent just before may still be in
	// dynalite's hands for a moment.
	time.Sleep(200 * time.Millisecond)
	atKill := ecsLeases(t, store, stream)
	var orphans []string
	for id, l := range atKill {
		if l.Owner == "w1" {
			orphans = append(orphans, id)
		}
	}
	sort.Strings(orphans)
	if len(orphans) != 2 {
		t.Fatalf("w1 owned %v at its death, want 2 shards:%s", orphans, ecsDescribeLeases(atKill))
	}
	ecsEventually(t, ecsSettleTimeout, "w1's shards taken over", func() (bool, string) {
		ecsCheckAlive(t, survivors...)
		o := ecsOwnership(ecsLeases(t, store, stream), orphans...)
		return len(o["w1"]) == 0 && len(o[""]) == 0, fmt.Sprint(o)
	})
	t.Logf("w1's shards %v taken over %v after the kill (lease duration %v)", orphans, time.Since(killed).Round(time.Millisecond), ecsLeaseDuration)

	ids := f.stop(t)
	ecsAwaitHandled(t, ids, ecsHandledTimeout, ws...)
	recs := ecsReadStream(t, env, stream, len(ids))

	// Each orphan resumed right after the checkpoint w1 left: the first
	// survivor to take it after the kill took it at that checkpoint, and the
	// lowest record it handled there is the one after it (lanes may log
	// records of one shard out of order).
	for _, id := range orphans {
		cp := atKill[id].Checkpoint
		next := ""
		for _, r := range recs {
			if r.ShardID == id && (cp == "" || ecsSeqCompare(aws.ToString(r.SequenceNumber), cp) > 0) {
				next = aws.ToString(r.SequenceNumber)
				break
			}
		}
		var taker *ecsWorker
		var log []ecsLogLine
		for i, s := range survivors {
			l := s.log()
			for j := marks[i]; j < len(l); j++ {
				if l[j].Msg == ecsMsgLeaseTaken && l[j].ShardID == id {
					if taker == nil || l[j].Time.Before(log[0].Time) {
						taker, log = s, l[j:]
					}
					break
				}
			}
		}
		if taker == nil {
			t.Errorf("no survivor logged taking %s after the kill", id)
			continue
		}
		if log[0].Checkpoint != cp {
			t.Errorf("%s took %s at checkpoint %q, want %q, the one w1 left", taker.name, id, log[0].Checkpoint, cp)
		}
		lowest := ""
		for _, l := range log {
			if l.Msg == ecsMsgRecord && l.ShardID == id && (lowest == "" || ecsSeqCompare(l.Seq, lowest) < 0) {
				lowest = l.Seq
			}
		}
		if lowest != next {
			t.Errorf("%s resumed %s at %s, want %s: the first record after w1's checkpoint %q", taker.name, id, lowest, next, cp)
		}
	}
	counts := ecsHandledCounts(ws...)
	d, dup := ecsDuplicates(counts)
	t.Logf("kill -9: %d records, 0 lost, %d duplicates (e.g. %v)", len(ids), d, dup)
	for _, w := range survivors {
		w.terminate(t)
	}
}

// TestECSGracefulHandoff stops a worker that owns every shard with SIGTERM
// once it handled every record: it exits 0 with the leases free and
// checkpointed, a worker started next owns them all at once (well before
// the lease duration, which is long here), and handles the records written
// since, but none the first worker handled.
func TestECSGracefulHandoff(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 4)
	table, store := ecsNewLeaseTable(t, env, false)
	const longLease = 10 * time.Second
	// A long checkpoint interval leaves the final checkpoints to the
	// graceful stop.
	settings := []string{"LAMBDAADAPTER_LEASE_DURATION=" + longLease.String(), "LAMBDAADAPTER_CHECKPOINT_INTERVAL=1m"}

	first := ecsWrite(t, env, stream, ecsNumbered("a", 0, 200))
	a := ecsStartWorker(t, env, "A", stream, table, settings...)
	ecsAwaitHandled(t, first, ecsHandledTimeout, a)
	ecsEventually(t, 10*time.Second, "A owns every shard", func() (bool, string) {
		o := ecsOwnership(ecsLeases(t, store, stream))
		return len(o["A"]) == 4, fmt.Sprint(o)
	})
	a.terminate(t)
	recs := ecsReadStream(t, env, stream, len(first))
	ls := ecsLeases(t, store, stream)
	for id, seq := range ecsLastSequences(recs) {
		if l := ls[id]; l.Owner != "" || l.Checkpoint != seq {
			t.Errorf("after A's SIGTERM, lease %s has owner %q, checkpoint %q; want free at %s", id, l.Owner, l.Checkpoint, seq)
		}
	}

	second := ecsWrite(t, env, stream, ecsNumbered("b", 0, 100))
	started := time.Now()
	b := ecsStartWorker(t, env, "B", stream, table, settings...)
	took := ecsEventually(t, longLease, "B owns every shard", func() (bool, string) {
		ecsCheckAlive(t, b)
		o := ecsOwnership(ecsLeases(t, store, stream))
		return len(o["B"]) == 4, fmt.Sprint(o)
	})
	t.Logf("B owned every shard %v after it started (lease duration %v)", took, longLease)
	if limit := longLease / 2; time.Since(started) > limit {
		t.Errorf("B took %v to own the released leases, want well under the %v lease duration (< %v)", time.Since(started), longLease, limit)
	}
	ecsAwaitHandled(t, second, ecsHandledTimeout, b)
	handledByA := ecsHandledCounts(a)
	var again []string
	for _, r := range b.records() {
		if handledByA[r.ID] > 0 {
			again = append(again, r.ID)
		}
	}
	if len(again) > 0 {
		t.Errorf("B handled %d records A had handled before its graceful stop, first %v; want none", len(again), again[:min(len(again), 10)])
	}
	if d, dup := ecsDuplicates(ecsHandledCounts(a, b)); d != 0 {
		t.Errorf("%d duplicates across a graceful handoff, e.g. %v; want none", d, dup)
	}
	b.terminate(t)
}

// TestECSReshard splits one shard and merges two others under a running
// worker with one lane, while records of the parents are still being
// handled: no record of a child is handled before every record of all its
// parents, the parents end at SHARD_END, and nothing is lost. It runs with
// both start positions: a child shard has no checkpoint when it is first
// taken, yet it must be read from its first record even when new shards
// start at LATEST (records written to a child before its parents were done
// would be lost otherwise).
func TestECSReshard(t *testing.T) {
	for _, start := range []string{"trim_horizon", "latest"} {
		t.Run(start, func(t *testing.T) { ecsReshard(t, start) })
	}
}

func ecsReshard(t *testing.T, start string) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 3)
	table, store := ecsNewLeaseTable(t, env, false)
	parents := ecsListShards(t, env, stream)
	if len(parents) != 3 {
		t.Fatalf("new stream has %d shards, want 3", len(parents))
	}
	parentIDs := make([]string, len(parents))
	for i, p := range parents {
		parentIDs[i] = aws.ToString(p.ShardId)
	}
	// Records for a given shard: explicit hash keys at the start of its
	// range.
	toShard := func(prefix string, s kinesistypes.Shard, n, sleepMS int) []ecsEntry {
		lo, _ := ecsHashRange(t, s)
		es := ecsNumbered(prefix+"-"+aws.ToString(s.ShardId), 0, n)
		for i := range es {
			es[i].hashKey, es[i].sleepMS = lo.String(), sleepMS
		}
		return es
	}
	// The shards are listed every 500ms and leases taken every 500ms (half
	// the lease duration), so the children are found and could be taken
	// well before the parents' backlog below is done.
	w := ecsStartWorker(t, env, "w1", stream, table, "LAMBDAADAPTER_CONCURRENCY=1",
		"LAMBDAADAPTER_START="+start, "LAMBDAADAPTER_LIST_INTERVAL=500ms", "LAMBDAADAPTER_LEASE_DURATION=1s")
	ecsEventually(t, ecsSettleTimeout, "w1 owns the three shards", func() (bool, string) {
		ecsCheckAlive(t, w)
		o := ecsOwnership(ecsLeases(t, store, stream))
		return len(o["w1"]) == 3, fmt.Sprint(o)
	})
	probes := 0
	if start == "latest" {
		// A reader at LATEST sees only what is written after it got its
		// iterator: write probes until one of each shard was handled.
		for _, p := range parents {
			id := aws.ToString(p.ShardId)
			ecsEventually(t, 10*time.Second, "a probe of "+id+" handled", func() (bool, string) {
				for _, r := range w.records() {
					if r.ShardID == id {
						return true, ""
					}
				}
				ecsWrite(t, env, stream, toShard(fmt.Sprintf("probe%d", probes), p, 1, 0))
				probes++
				return false, fmt.Sprintf("%d probes written", probes)
			})
		}
	}
	var ids []string
	for _, p := range parents {
		ids = append(ids, ecsWrite(t, env, stream, toShard("early", p, 10, 0))...)
	}
	ecsAwaitHandled(t, ids, ecsHandledTimeout, w)
	// A backlog of slow parent records (150 x 20ms with one lane) is still
	// being handled when the children appear. It is longer than the
	// consumer's channel (64) and lane, so a child's reader taken too early
	// would get its records in between the parents'.
	var late []string
	for _, p := range parents {
		late = append(late, ecsWrite(t, env, stream, toShard("late", p, 50, 20))...)
	}
	ids = append(ids, late...)
	ecsSplitShard(t, env, stream, parents[0])
	_, err := env.Kinesis.MergeShards(sdkContext(t), &kinesis.MergeShardsInput{
		StreamName: aws.String(stream), ShardToMerge: parents[1].ShardId, AdjacentShardToMerge: parents[2].ShardId,
	})
	if err != nil {
		t.Fatalf("MergeShards %s and %s: %v", parentIDs[1], parentIDs[2], err)
	}
	ecsAwaitActive(t, env, stream)
	childParents := map[string][]string{}
	var children []kinesistypes.Shard
	for _, s := range ecsListShards(t, env, stream) {
		var ps []string
		for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
			if aws.ToString(p) != "" {
				ps = append(ps, aws.ToString(p))
			}
		}
		if len(ps) > 0 {
			children = append(children, s)
			childParents[aws.ToString(s.ShardId)] = ps
		}
	}
	if len(children) != 3 {
		t.Fatalf("after the split and the merge the stream has children %v, want 3", childParents)
	}
	for _, c := range children {
		ids = append(ids, ecsWrite(t, env, stream, toShard("child", c, 20, 0))...)
	}
	// The test proves something only if the worker knew the children while
	// records of their parents were still pending.
	ecsEventually(t, 10*time.Second, "the children's lease rows", func() (bool, string) {
		ls := ecsLeases(t, store, stream)
		return len(ls) == 6, ecsDescribeLeases(ls)
	})
	if n, _ := ecsMissingIDs(late, ecsHandledCounts(w)); n < 80 {
		t.Fatalf("test precondition: only %d parent records were left to handle when the worker found the children, want more than the consumer's channel holds; make the backlog longer", n)
	} else {
		t.Logf("the worker found the children with %d parent records still to handle", n)
	}
	// Done in about three seconds (the backlog, then the children).
	took := ecsAwaitHandled(t, ids, 20*time.Second, w)
	t.Logf("every record of parents and children handled %v after the children were found", took)

	last := map[string]int{}  // shard -> index of its last record handled
	first := map[string]int{} // shard -> index of its first record handled
	for i, r := range w.records() {
		if _, ok := first[r.ShardID]; !ok {
			first[r.ShardID] = i
		}
		last[r.ShardID] = i
	}
	for child, ps := range childParents {
		for _, p := range ps {
			if first[child] < last[p] {
				t.Errorf("record %d (in handling order) of child %s handled before record %d, the last of its parent %s", first[child], child, last[p], p)
			}
		}
	}
	ecsEventually(t, 10*time.Second, "parents at SHARD_END", func() (bool, string) {
		ls := ecsLeases(t, store, stream)
		for _, id := range parentIDs {
			if ls[id].Checkpoint != lease.ShardEnd {
				return false, ecsDescribeLeases(ls)
			}
		}
		return true, ""
	})
	w.terminate(t)
	ls := ecsLeases(t, store, stream)
	recs := ecsReadStream(t, env, stream, len(ids)+probes)
	lastSeq := ecsLastSequences(recs)
	for id, l := range ls {
		want := lastSeq[id]
		if _, child := childParents[id]; !child {
			want = lease.ShardEnd
		}
		if l.Owner != "" || l.Checkpoint != want {
			t.Errorf("after SIGTERM lease %s has owner %q checkpoint %q, want free at %q", id, l.Owner, l.Checkpoint, want)
		}
		if ps := childParents[id]; !slices.Equal(l.ParentShardIDs, ps) {
			t.Errorf("lease %s has parents %v, want %v", id, l.ParentShardIDs, ps)
		}
	}
	if len(ls) != 6 {
		t.Errorf("the table holds %d leases, want 6 (3 parents, 3 children):%s", len(ls), ecsDescribeLeases(ls))
	}
}

// TestECSChildrenStartWhenParentEnds: against kinesis-local, the worker that
// reads a split parent to its end starts the children at once: long before
// its next listing (10 minutes) or balancing (every minute), which are the
// only other ways it would find and take them.
func TestECSChildrenStartWhenParentEnds(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 1)
	table, store := ecsNewLeaseTable(t, env, false)
	w := ecsStartWorker(t, env, "w1", stream, table,
		"LAMBDAADAPTER_LIST_INTERVAL=10m", "LAMBDAADAPTER_LEASE_DURATION=2m")
	parents := ecsListShards(t, env, stream)
	ecsAwaitHandled(t, ecsWrite(t, env, stream, ecsNumbered("parent", 0, 20)), ecsHandledTimeout, w)
	ecsSplitShard(t, env, stream, parents[0])
	ecsAwaitActive(t, env, stream)
	// Partition keys spread these over both children.
	ids := ecsWrite(t, env, stream, ecsNumbered("child", 0, 40))
	took := ecsAwaitHandled(t, ids, ecsHandledTimeout, w)
	t.Logf("the children's records were handled %v after they were written", took)
	ls := ecsLeases(t, store, stream)
	if len(ls) != 3 || ls[aws.ToString(parents[0].ShardId)].Checkpoint != lease.ShardEnd {
		t.Errorf("want the parent at SHARD_END and two children:%s", ecsDescribeLeases(ls))
	}
	children := map[string]bool{}
	for _, r := range w.records() {
		if r.ShardID != aws.ToString(parents[0].ShardId) {
			children[r.ShardID] = true
		}
	}
	if len(children) != 2 {
		t.Errorf("records handled from children %v, want both", children)
	}
}

// TestECSFaultRun writes 10,000 records over four shards while workers
// come and go: three start, one is killed with SIGKILL, a shard is split and
// a fourth worker joins late (and steals). Not one record may be lost; the
// duplicates are counted and printed.
func TestECSFaultRun(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 4)
	table, store := ecsNewLeaseTable(t, env, false)
	const total = 10000
	names := []string{"w1", "w2", "w3"}
	var ws []*ecsWorker
	for _, n := range names {
		ws = append(ws, ecsStartWorker(t, env, n, stream, table))
	}
	f := ecsStartFeeder(t, env, stream, "fault", 250, 250*time.Millisecond, total)
	at := func(n int, what string) {
		t.Helper()
		ecsEventually(t, ecsSettleTimeout, fmt.Sprintf("%d records written before %s", n, what), func() (bool, string) {
			ecsCheckAlive(t, ws...)
			return f.count() >= n, fmt.Sprint(f.count())
		})
		t.Logf("%s at %d records written", what, f.count())
	}

	at(2500, "kill -9 of w1")
	ws[0].kill(t)
	at(5000, "split")
	shards := ecsListShards(t, env, stream)
	ecsSplitShard(t, env, stream, shards[1])
	at(6000, "late worker w4")
	ws = append(ws, ecsStartWorker(t, env, "w4", stream, table))

	ids := f.wait(t, 90*time.Second)
	took := ecsAwaitHandled(t, ids, ecsHandledTimeout, ws...)
	t.Logf("all %d records handled %v after the last was written", len(ids), took)
	ls := ecsLeases(t, store, stream)
	if o := ecsOwnership(ls); len(o["w4"]) == 0 {
		t.Errorf("the late worker w4 owns no lease:%s", ecsDescribeLeases(ls))
	}
	if l := ls[aws.ToString(shards[1].ShardId)]; l.Checkpoint != lease.ShardEnd {
		t.Errorf("split parent %s has checkpoint %q, want SHARD_END", aws.ToString(shards[1].ShardId), l.Checkpoint)
	}
	counts := ecsHandledCounts(ws...)
	n, _ := ecsMissingIDs(ids, counts)
	d, dup := ecsDuplicates(counts)
	t.Logf("duplicates (e.g.): %v", dup)
	line := fmt.Sprintf("fault run: %d records, %d lost, %d duplicates", len(ids), n, d)
	t.Log(line)
	fmt.Println(line)
	for _, w := range ws[1:] {
		w.terminate(t)
	}
}
