//go:build integration

package faultcases_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// Settings shared by the tests: short leases, so that a fault of a few
// seconds is longer than a lease, and generous bounds for waiting.
const (
	leaseDuration      = 3 * time.Second
	listInterval       = 2 * time.Second
	shutdownTimeout    = 5 * time.Second
	checkpointInterval = time.Second // the default
	// handledWithin bounds waiting until every record was handled (or
	// dead-lettered) once the faults are over.
	handledWithin = 60 * time.Second
	// settleWithin bounds waiting for a lease distribution.
	settleWithin = 30 * time.Second
	// poll is the pause between two looks at a condition.
	poll = 50 * time.Millisecond
	// sdkTimeout bounds one set-up call to a stand-in.
	sdkTimeout = 30 * time.Second
)

// bootstrapPath is the bootstrap binary, built by TestMain.
var bootstrapPath string

// TestMain builds the bootstrap binary from the root module, failing the
// run when it cannot.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultcases:", err)
		return 1
	}
	root := filepath.Join(wd, "..", "..") // soak/faultcases → the repository
	dir, err := os.MkdirTemp("", "faultcases-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultcases:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bootstrapPath = filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrapPath, "./cmd/bootstrap")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "faultcases: building the bootstrap binary in %s: %v\n%s", root, err, out)
		return 1
	}
	return m.Run()
}

// clientConfig is the stand-ins' configuration with the SDK's default
// retryer (3 attempts, exponential backoff up to 20 s, the client-side
// retry quota), as the bootstrap binary gets it from LoadDefaultConfig: the
// faults meet the retryer production has.
func clientConfig() aws.Config {
	cfg := standin.NewConfig()
	cfg.Retryer = func() aws.Retryer { return retry.NewStandard() }
	return cfg
}

// newRoute starts a faultnet route to a stand-in, closed when the test
// ends.
func newRoute(t *testing.T, svc faultnet.Service, upstream string) *faultnet.Route {
	t.Helper()
	r, err := faultnet.NewRoute(svc, upstream)
	if err != nil {
		t.Fatalf("route to %s: %v", svc, err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close route to %s: %v", svc, err)
		}
	})
	return r
}

// routes are one client's routes to the three stand-ins, and SDK clients
// through them.
type routes struct {
	kinesis, dynamodb, sqs *faultnet.Route
	K                      *kinesis.Client
	D                      *dynamodb.Client
	S                      *sqs.Client
}

func newRoutes(t *testing.T, env *standin.Env) *routes {
	t.Helper()
	r := &routes{
		kinesis:  newRoute(t, faultnet.Kinesis, env.KinesisEndpoint),
		dynamodb: newRoute(t, faultnet.DynamoDB, env.DynamoDBEndpoint),
		sqs:      newRoute(t, faultnet.SQS, env.SQSEndpoint),
	}
	cfg := clientConfig()
	r.K = kinesis.NewFromConfig(cfg, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(r.kinesis.URL()) })
	r.D = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(r.dynamodb.URL()) })
	r.S = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(r.sqs.URL()) })
	return r
}

// environ points a child process's SDK at the routes.
func (r *routes) environ() []string {
	return []string{
		"AWS_ENDPOINT_URL_KINESIS=" + r.kinesis.URL(),
		"AWS_ENDPOINT_URL_DYNAMODB=" + r.dynamodb.URL(),
		"AWS_ENDPOINT_URL_SQS=" + r.sqs.URL(),
		"AWS_REGION=" + standin.Region,
		"AWS_ACCESS_KEY_ID=" + standin.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + standin.SecretAccessKey,
	}
}

// randomSuffix returns 12 random hex digits.
func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newLeaseTable creates a lease table with a unique name, deleted when the
// test ends.
func newLeaseTable(t *testing.T, env *standin.Env) (string, *lease.DynamoDB) {
	t.Helper()
	name := "leases-" + randomSuffix()
	store := lease.NewDynamoDB(env.DynamoDB, name)
	ctx, cancel := context.WithTimeout(t.Context(), sdkTimeout)
	defer cancel()
	if err := store.CreateTable(ctx); err != nil {
		t.Fatalf("create lease table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
		defer cancel()
		_, err := env.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		var missing *dynamodbtypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &missing) {
			t.Errorf("delete lease table %s: %v", name, err)
		}
	})
	return name, store
}

// leaseOwners returns the owner of each shard's lease of stream.
func leaseOwners(t *testing.T, store *lease.DynamoDB, stream string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), sdkTimeout)
	defer cancel()
	snap, err := store.Snapshot(ctx, stream)
	ls := snap.Leases
	if err != nil {
		t.Fatalf("list leases of %s: %v", stream, err)
	}
	m := map[string]string{}
	for _, l := range ls {
		m[l.Key.ShardID] = l.Owner
	}
	return m
}

// eventually polls check until it reports true, failing the test with
// what and check's last description after within.
func eventually(t *testing.T, within time.Duration, what string, check func() (bool, string)) time.Duration {
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
			t.Fatalf("%s: %v", what, t.Context().Err())
		case <-time.After(poll):
		}
	}
}

// --- records ---

// rec is one record a test writes: its id and what the handler does with
// it (the payload is JSON, as the bootstrap binary's demo handler reads
// it).
type rec struct {
	ID           string `json:"id"`
	Outcome      string `json:"outcome,omitempty"` // "", "ack", "drop", "retry", "retry_after"
	UntilAttempt int    `json:"until_attempt,omitempty"`
	DelayMS      int    `json:"delay_ms,omitempty"`
	SleepMS      int    `json:"sleep_ms,omitempty"`
	key          string // partition key; the id when empty
	hashKey      string // explicit hash key, if any
}

func (r rec) entry() kinesistypes.PutRecordsRequestEntry {
	data, _ := json.Marshal(r) // strings and numbers: cannot fail
	key := r.key
	if key == "" {
		key = r.ID
	}
	e := kinesistypes.PutRecordsRequestEntry{PartitionKey: aws.String(key), Data: data}
	if r.hashKey != "" {
		e.ExplicitHashKey = aws.String(r.hashKey)
	}
	return e
}

// acks returns n plain records prefix-0000 ... .
func acks(prefix string, n int) []rec {
	rs := make([]rec, n)
	for i := range rs {
		rs[i] = rec{ID: fmt.Sprintf("%s-%04d", prefix, i)}
	}
	return rs
}

// mixed returns n records, per 5: 3 acks, 1 transient retry (a counted
// copy, handled again at attempt 2 and acked) and 1 drop (dead-lettered).
func mixed(prefix string, n int) []rec {
	rs := acks(prefix, n)
	for i := range rs {
		switch i % 5 {
		case 1:
			rs[i].Outcome, rs[i].UntilAttempt = "retry", 2
		case 3:
			rs[i].Outcome = "drop"
		}
	}
	return rs
}

// write writes rs to the stream directly (not through a fault layer).
func write(t *testing.T, env *standin.Env, stream string, rs []rec) {
	t.Helper()
	if err := writeRecs(t.Context(), env.Kinesis, stream, rs); err != nil {
		t.Fatal(err)
	}
}

func writeRecs(ctx context.Context, k *kinesis.Client, stream string, rs []rec) error {
	for len(rs) > 0 {
		n := min(len(rs), 500)
		es := make([]kinesistypes.PutRecordsRequestEntry, n)
		for i := range es {
			es[i] = rs[i].entry()
		}
		cctx, cancel := context.WithTimeout(ctx, sdkTimeout)
		out, err := k.PutRecords(cctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: es})
		cancel()
		if err != nil {
			return fmt.Errorf("PutRecords to %s: %w", stream, err)
		}
		if n := aws.ToInt32(out.FailedRecordCount); n > 0 {
			return fmt.Errorf("PutRecords to %s: %d records failed", stream, n)
		}
		rs = rs[n:]
	}
	return nil
}

// --- what the handlers did ---

// handling is one run of a handler on a record.
type handling struct {
	worker, shard, id string
	attempt           int
	at                time.Time
}

// journal records the handlings of every worker of a test. Safe for
// concurrent use.
type journal struct {
	mu sync.Mutex
	hs []handling
	// ids maps a handled record's sequence number to its id; timedOut
	// holds the ids whose write (copy, dead letter, delay message) ended
	// in its deadline (OnWrite).
	ids      map[string]string
	timedOut map[string]bool
}

// OnWrite is an observe.WriteHook: it notes the records whose write ran
// out of its deadline. Such a write may have happened although the
// adapter saw it fail (on a loaded machine the stand-in can answer after
// the round's deadline), so it is ambiguous, as a lost answer is.
func (j *journal) OnWrite(w observe.Write) {
	if w.Err == nil || !errors.Is(w.Err, context.DeadlineExceeded) {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if id, ok := j.ids[w.SequenceNumber]; ok {
		if j.timedOut == nil {
			j.timedOut = map[string]bool{}
		}
		j.timedOut[id] = true
	}
}

// writeTimedOut reports whether a write of id ran out of its deadline.
func (j *journal) writeTimedOut(id string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.timedOut[id]
}

// handler returns a handler for worker that records each run and obeys the
// record's JSON (outcome, until_attempt, delay_ms, sleep_ms).
func (j *journal) handler(worker string) lambdaadapter.Handler {
	return lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		var r rec
		if err := json.Unmarshal(m.Payload, &r); err != nil {
			return lambdaadapter.Drop(fmt.Errorf("not a test record: %w", err))
		}
		j.mu.Lock()
		j.hs = append(j.hs, handling{worker: worker, shard: m.ShardID, id: r.ID, attempt: m.Attempt, at: time.Now()})
		if j.ids == nil {
			j.ids = map[string]string{}
		}
		j.ids[m.SequenceNumber] = r.ID
		j.mu.Unlock()
		if r.SleepMS > 0 {
			select {
			case <-time.After(time.Duration(r.SleepMS) * time.Millisecond):
			case <-ctx.Done():
			}
		}
		outcome := r.Outcome
		if r.UntilAttempt > 0 && m.Attempt >= r.UntilAttempt {
			outcome = ""
		}
		switch outcome {
		case "drop":
			return lambdaadapter.Drop(errors.New("test: drop"))
		case "retry":
			return lambdaadapter.Retry(errors.New("test: retry"))
		case "retry_after":
			return lambdaadapter.RetryAfter(time.Duration(r.DelayMS)*time.Millisecond, errors.New("test: later"))
		}
		return lambdaadapter.Ack()
	})
}

func (j *journal) all() []handling {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.hs)
}

// attempts returns, per id, the attempts of its handlings in order.
func (j *journal) attempts() map[string][]int {
	m := map[string][]int{}
	for _, h := range j.all() {
		m[h.id] = append(m[h.id], h.attempt)
	}
	return m
}

// finalAttempt is the attempt at which r ends: acked, or dropped.
func finalAttempt(r rec) int {
	if r.Outcome == "retry" || r.Outcome == "retry_after" {
		return r.UntilAttempt
	}
	return 1
}

// done reports whether every record was handled at its final attempt.
func (j *journal) done(rs []rec) (bool, string) {
	got := j.attempts()
	var miss []string
	for _, r := range rs {
		if !slices.Contains(got[r.ID], finalAttempt(r)) {
			miss = append(miss, r.ID)
		}
	}
	return len(miss) == 0, fmt.Sprintf("%d of %d not at their final attempt yet, first %v", len(miss), len(rs), miss[:min(len(miss), 5)])
}

// extra returns the handlings beyond the one each attempt of a record
// should have (attempts 1 .. final, once each): duplicates, with up to
// five examples.
func (j *journal) extra(rs []rec) (int, []string) {
	got := j.attempts()
	n := 0
	var eg []string
	for _, r := range rs {
		want := finalAttempt(r)
		if d := len(got[r.ID]) - want; d > 0 {
			n += d
			if len(eg) < 5 {
				eg = append(eg, fmt.Sprintf("%s %v", r.ID, got[r.ID]))
			}
		}
	}
	return n, eg
}

// checkExact fails the test unless every record was handled exactly once
// per attempt, 1 .. its final attempt: nothing lost, no duplicate, no
// attempt spent on a fault.
func (j *journal) checkExact(t *testing.T, rs []rec) {
	t.Helper()
	got := j.attempts()
	var bad []string
	for _, r := range rs {
		want := make([]int, finalAttempt(r))
		for i := range want {
			want[i] = i + 1
		}
		g := slices.Clone(got[r.ID])
		sort.Ints(g)
		if !slices.Equal(g, want) {
			bad = append(bad, fmt.Sprintf("%s: attempts %v, want %v", r.ID, got[r.ID], want))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d records not handled exactly once per attempt, e.g.\n\t%s", len(bad), len(rs), strings.Join(bad[:min(len(bad), 10)], "\n\t"))
	}
}

// --- dead letters ---

// deadLetterIDs receives the dead-letter queue's messages (at most want of
// them: pass one more than expected to prove there are no more) until the
// queue stays empty for a second, and returns how often each id was
// dead-lettered.
func deadLetterIDs(t *testing.T, env *standin.Env, queue string, want int) map[string]int {
	t.Helper()
	msgs := env.ReceiveAll(t.Context(), t, queue, want, time.Second)
	ids := map[string]int{}
	for _, m := range msgs {
		dl, err := publish.ParseDeadLetterBody([]byte(aws.ToString(m.Body)))
		if err != nil {
			t.Fatalf("dead letter %q: %v", aws.ToString(m.Body), err)
		}
		var r rec
		if err := json.Unmarshal(dl.Payload, &r); err != nil {
			t.Fatalf("dead letter's payload %q: %v", dl.Payload, err)
		}
		ids[r.ID]++
	}
	return ids
}

// checkDeadLetters fails the test unless each drop of rs was dead-lettered
// exactly once (and nothing else was).
func checkDeadLetters(t *testing.T, env *standin.Env, queue string, rs []rec) {
	t.Helper()
	checkDeadLettersAgain(t, env, queue, rs, false)
}

// checkDeadLettersAgain is checkDeadLetters; with again, a drop may have
// been dead-lettered more than once (a documented re-delivery came first).
func checkDeadLettersAgain(t *testing.T, env *standin.Env, queue string, rs []rec, again bool) {
	t.Helper()
	want := map[string]int{}
	for _, r := range rs {
		if r.Outcome == "drop" {
			want[r.ID] = 1
		}
	}
	most := len(want) + 1
	if again {
		most = 3*len(want) + 1
	}
	got := deadLetterIDs(t, env, queue, most)
	var bad []string
	for id, n := range got {
		if want[id] != n && !(again && want[id] > 0 && n > 0) {
			bad = append(bad, fmt.Sprintf("%s %d×", id, n))
		}
	}
	for id := range want {
		if got[id] == 0 {
			bad = append(bad, id+" missing")
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("dead letters: %d ids not dead-lettered exactly once (of %d drops): %v", len(bad), len(want), bad[:min(len(bad), 10)])
	}
}

// --- long-running mode, in process ---

// worker is one long-running adapter running in this process.
type worker struct {
	name   string
	cancel context.CancelFunc
	done   chan error
	logs   *logBuffer
}

// logBuffer keeps a worker's log lines for a failure message and for
// counting messages.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// count returns how many log lines contain s.
func (b *logBuffer) count(s string) int { return strings.Count(b.String(), s) }

// doorOptions returns shared options as options of one door, O being
// lambdaadapter.FunctionOption or lambdaadapter.ServiceOption (a
// []SharedOption does not spread into either).
func doorOptions[O lambdaadapter.Option](shared []lambdaadapter.SharedOption) []O {
	out := make([]O, len(shared))
	for i, o := range shared {
		out[i] = any(o).(O)
	}
	return out
}

// startWorker runs a long-running adapter as owner name on stream with the
// lease table, its clients through r, from TRIM_HORIZON, with short leases
// and opts. It stops it when the test ends (if still running) and prints
// its log if the test failed.
func startWorker(t *testing.T, name, stream, table string, r *routes, j *journal, opts ...lambdaadapter.ServiceOption) *worker {
	t.Helper()
	return startWorkerWith(t, name, stream, table, r, j.handler(name), opts...)
}

// startWorkerWith is startWorker with the handler h.
func startWorkerWith(t *testing.T, name, stream, table string, r *routes, h lambdaadapter.Handler, opts ...lambdaadapter.ServiceOption) *worker {
	t.Helper()
	w := &worker{name: name, done: make(chan error, 1), logs: &logBuffer{}}
	logger := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	all := []lambdaadapter.ServiceOption{
		lambdaadapter.WithStream(stream),
		lambdaadapter.WithLeaseTable(table),
		lambdaadapter.WithDynamoDBClient(r.D),
		lambdaadapter.WithKinesisClient(r.K),
		lambdaadapter.WithSQSClient(r.S),
		lambdaadapter.WithOwnerID(name),
		lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()),
		lambdaadapter.WithLeaseDuration(leaseDuration),
		lambdaadapter.WithListInterval(listInterval),
		lambdaadapter.WithShutdownTimeout(shutdownTimeout),
		lambdaadapter.WithRetryBackoff(100*time.Millisecond, time.Second),
		lambdaadapter.WithLogger(logger),
	}
	a, err := lambdaadapter.NewService(h, append(all, opts...)...)
	if err != nil {
		t.Fatalf("worker %s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- a.Run(ctx) }()
	t.Cleanup(func() {
		w.stop(t)
		if t.Failed() {
			t.Logf("worker %s logged:\n%s", name, w.logs)
		}
	})
	return w
}

// stop stops the worker gracefully and fails the test unless Run returns
// nil within a bound.
func (w *worker) stop(t *testing.T) {
	t.Helper()
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("worker %s: Run: %v", w.name, err)
		}
	case <-time.After(3 * shutdownTimeout):
		t.Errorf("worker %s: Run did not return within %v of its cancellation", w.name, 3*shutdownTimeout)
	}
}

// alive fails the test when the worker's Run returned on its own.
func (w *worker) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-w.done:
		w.cancel = nil
		t.Fatalf("worker %s: Run returned on its own: %v", w.name, err)
	default:
	}
}

// awaitDone waits until every record of rs was handled at its final
// attempt.
func awaitDone(t *testing.T, j *journal, rs []rec, ws ...*worker) time.Duration {
	t.Helper()
	return eventually(t, handledWithin, "every record handled", func() (bool, string) {
		for _, w := range ws {
			w.alive(t)
		}
		return j.done(rs)
	})
}

// --- Lambda mode, in process ---

// lambdaRun drives a Lambda-mode adapter with an event source until every
// record is done and nothing is pending. Round errors (the event source's
// own reads failing) are counted and the round is tried again, as Lambda
// does.
type lambdaRun struct {
	rounds, roundErrors, invocations int
	lastErr                          error
}

func driveLambda(t *testing.T, es *lambdaadaptertest.EventSource, a *lambdaadapter.Function, j *journal, rs []rec) lambdaRun {
	t.Helper()
	return driveLambdaUntil(t, es, a, func() (bool, string) { return j.done(rs) })
}

// driveLambdaUntil is driveLambda until done reports true.
func driveLambdaUntil(t *testing.T, es *lambdaadaptertest.EventSource, a *lambdaadapter.Function, done func() (bool, string)) lambdaRun {
	t.Helper()
	var lr lambdaRun
	start := time.Now()
	for {
		if time.Since(start) > handledWithin {
			ok, state := done()
			t.Fatalf("Lambda mode: not done after %v (%d rounds, %d failed, last error %v): %v %s", handledWithin, lr.rounds, lr.roundErrors, lr.lastErr, ok, state)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		st, err := es.Round(ctx, a.Invoke)
		cancel()
		lr.rounds++
		lr.invocations += st.Invocations
		if err != nil {
			lr.roundErrors++
			lr.lastErr = err
		}
		if ok, _ := done(); ok && err == nil && st.Invocations == 0 && !es.Pending() {
			return lr
		}
		if st.Invocations == 0 || err != nil {
			time.Sleep(poll)
		}
	}
}

// knownFailure skips a test of a promised behaviour that the adapter does
// not keep today, unless FAULTCASES_KNOWN_FAILURES=1 (then it runs, and is
// expected to fail until the adapter is fixed). Each such test is listed
// in the package comment and the README row of its fault.
func errorsIs(err, target error) bool { return errors.Is(err, target) }

func knownFailure(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("FAULTCASES_KNOWN_FAILURES") != "1" {
		t.Skipf("known failure (run with FAULTCASES_KNOWN_FAILURES=1): %s", why)
	}
}
