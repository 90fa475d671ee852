//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/idempotency"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

// The tests below run the idempotency helper (package idempotency) against
// dynalite: its conditional claim, completion and release with real
// DynamoDB expressions, and the redeliveries it must absorb in both modes.
// Each counts the side effects of every record id: a record redelivered
// after a reported failure (Lambda mode), after a kill -9 (long-running
// mode), or handed to two workers at once must have run its side effect
// exactly once.

// Bounds of the idempotency tests.
const (
	// idemRunTimeout bounds a whole event-source or worker phase.
	idemRunTimeout = 2 * time.Minute
	// idemPoll is the pause between two looks at a condition.
	idemPoll = 50 * time.Millisecond
)

// idemNewTable creates an idempotency table with a unique name through
// `bootstrap idempotency init` (the command operators use) and deletes it
// when the test ends.
func idemNewTable(t *testing.T, env *standin.Env) string {
	t.Helper()
	name := "idempotency-" + ecsRandomSuffix(t)
	deleteTableAtCleanup(t, env.DynamoDB, name)
	out, err := ecsBootstrapCommand(t, env, "idempotency", "init", "-table", name)
	if err != nil {
		t.Fatalf("bootstrap idempotency init -table %s: %v\n%s", name, err, out)
	}
	if want := "idempotency table " + name + " is ready"; !strings.Contains(out, want) {
		t.Fatalf("bootstrap idempotency init printed %q, want it to contain %q", out, want)
	}
	return name
}

// idemItems reads every item of the table: status by id.
func idemItems(t *testing.T, env *standin.Env, table string) map[string]string {
	t.Helper()
	items := map[string]string{}
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := env.DynamoDB.Scan(sdkContext(t), in)
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		for _, it := range out.Items {
			id, _ := it["id"].(*dynamodbtypes.AttributeValueMemberS)
			st, _ := it["status"].(*dynamodbtypes.AttributeValueMemberS)
			if id == nil || st == nil {
				t.Fatalf("malformed item %v", it)
			}
			items[id.Value] = st.Value
		}
		if out.LastEvaluatedKey == nil {
			return items
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// idemEventually polls check until it reports true, failing the test with
// what and check's description after within.
func idemEventually(t *testing.T, within time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v; last seen: %s", what, within, state)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		case <-time.After(idemPoll):
		}
	}
}

// effects counts side effects and deliveries per record id. It is safe for
// concurrent use.
type effects struct {
	mu         sync.Mutex
	ran        map[string]int // side effects
	deliveries map[string]int // deliveries to the wrapped handler
}

func newEffects() *effects { return &effects{ran: map[string]int{}, deliveries: map[string]int{}} }

func (e *effects) add(m map[string]int, id string) {
	e.mu.Lock()
	m[id]++
	e.mu.Unlock()
}

func (e *effects) snapshot() (ran, deliveries map[string]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.ran), maps.Clone(e.deliveries)
}

// counted wraps h so that every delivery is counted before it reaches h.
func (e *effects) counted(h lambdaadapter.Handler) lambdaadapter.Handler {
	return lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		e.add(e.deliveries, string(m.Payload))
		return h.HandleRecord(ctx, m)
	})
}

// TestIdempotencyInit checks `bootstrap idempotency init`: the table has
// the key schema the package checks, and a second init changes nothing.
func TestIdempotencyInit(t *testing.T) {
	env := standin.Require(t)
	table := idemNewTable(t, env)
	if err := idempotency.Check(sdkContext(t), env.DynamoDB, table); err != nil {
		t.Fatalf("Check after init: %v", err)
	}
	out, err := ecsBootstrapCommand(t, env, "idempotency", "init", "-table", table)
	if err != nil || !strings.Contains(out, "is ready") {
		t.Fatalf("second init: %v\n%s", err, out)
	}
	t.Logf("bootstrap idempotency init against dynalite:\n%s", out)
	missing := "idempotency-missing-" + ecsRandomSuffix(t)
	err = idempotency.Check(sdkContext(t), env.DynamoDB, missing)
	if !errors.Is(err, idempotency.ErrTableNotFound) || !strings.Contains(err.Error(), "bootstrap idempotency init -table "+missing) {
		t.Errorf("Check of a missing table: %v", err)
	}
}

// TestIdempotencyLambdaRedelivery runs a stream through the Lambda-mode
// adapter fed by lambdaadaptertest.EventSource (Lambda's checkpointing by
// the partial batch response). One early record fails once, after every
// later record of the batch has run in its own lane: the response names
// it, so the event source delivers it and every later record again. The
// later records are acknowledged without running again; the failed one
// runs once more and succeeds. Every record's side effect happens once.
func TestIdempotencyLambdaRedelivery(t *testing.T) {
	env := standin.Require(t)
	stream, arn := env.NewStream(t, 1)
	table := idemNewTable(t, env)
	const n, failing = 20, 5
	ids := make([]string, n)
	entries := make([]kinesistypes.PutRecordsRequestEntry, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%02d", i)
		entries[i] = kinesistypes.PutRecordsRequestEntry{PartitionKey: aws.String("key-" + ids[i]), Data: []byte(ids[i])}
	}
	if _, err := env.Kinesis.PutRecords(sdkContext(t), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
		t.Fatal(err)
	}

	fx := newEffects()
	var failedOnce atomic.Bool
	handler := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		id := string(m.Payload)
		if id == ids[failing] && !failedOnce.Load() {
			// Fail only once every later record has run, so that they
			// all come again with it.
			for {
				ran, _ := fx.snapshot()
				if len(ran) == n-1 {
					break
				}
				select {
				case <-ctx.Done():
					return lambdaadapter.Retry(ctx.Err())
				case <-time.After(idemPoll):
				}
			}
			failedOnce.Store(true)
			return lambdaadapter.Retry(errors.New("transient failure"))
		}
		fx.add(fx.ran, id)
		return lambdaadapter.Ack()
	})
	h, err := idempotency.New(handler, env.DynamoDB, table, idempotency.WithKeyPrefix("lambda-test"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := lambdaadapter.NewFunction(fx.counted(h), lambdaadapter.WithConcurrency(n+4),
		lambdaadapter.WithKinesisClient(env.Kinesis), lambdaadapter.WithSQSClient(env.SQS))
	if err != nil {
		t.Fatal(err)
	}
	src := &lambdaadaptertest.EventSource{StreamARN: arn, Kinesis: env.Kinesis, BatchSize: 100}
	ctx, cancel := context.WithTimeout(t.Context(), idemRunTimeout)
	defer cancel()
	invocations := 0
	for {
		st, err := src.Round(ctx, a.Invoke)
		if err != nil {
			t.Fatalf("event source round: %v", err)
		}
		invocations += st.Invocations
		if ran, _ := fx.snapshot(); len(ran) == n && !src.Pending() {
			break
		}
		if ctx.Err() != nil {
			ran, deliveries := fx.snapshot()
			t.Fatalf("not every record settled within %v: ran %v, deliveries %v", idemRunTimeout, ran, deliveries)
		}
		if st.Invocations == 0 {
			time.Sleep(idemPoll)
		}
	}
	ran, deliveries := fx.snapshot()
	for i, id := range ids {
		if ran[id] != 1 {
			t.Errorf("%s: side effect ran %d times, want 1", id, ran[id])
		}
		want := 1
		if i >= failing {
			want = 2 // redelivered from the failed record on
		}
		if deliveries[id] != want {
			t.Errorf("%s: delivered %d times, want %d", id, deliveries[id], want)
		}
	}
	statuses := idemItems(t, env, table)
	if len(statuses) != n {
		t.Errorf("table holds %d items, want %d", len(statuses), n)
	}
	for id, st := range statuses {
		if st != "COMPLETED" {
			t.Errorf("item %s is %s, want COMPLETED", id, st)
		}
	}
	t.Logf("%d invocations; records %s..%s delivered twice, side effects once each", invocations, ids[failing], ids[n-1])
}

// TestIdempotencyECSKill runs the bootstrap binary in long-running mode with
// the idempotency helper (LAMBDAADAPTER_IDEMPOTENCY_TABLE). The first worker
// writes no checkpoint (a checkpoint interval of an hour), handles every
// record and is killed with SIGKILL once the table shows them all
// COMPLETED; the second worker takes the shards after the lease duration
// and reads them again from where the first left its checkpoints. Every
// redelivered record is acknowledged without running the handler (logged
// at debug level), and every record's handler ran exactly once over both
// workers.
func TestIdempotencyECSKill(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 2)
	leases, store := ecsNewLeaseTable(t, env, false)
	table := idemNewTable(t, env)
	idem := []string{"LAMBDAADAPTER_IDEMPOTENCY_TABLE=" + table, "LAMBDAADAPTER_IDEMPOTENCY_PREFIX=ecs-test"}
	ids := ecsWrite(t, env, stream, ecsNumbered("idem", 0, 100))

	w1 := ecsStartWorker(t, env, "w1", stream, leases, append(idem, "LAMBDAADAPTER_CHECKPOINT_INTERVAL=1h")...)
	ecsAwaitHandled(t, ids, ecsHandledTimeout, w1)
	idemEventually(t, idemRunTimeout, "every record COMPLETED in the idempotency table", func() (bool, string) {
		ecsCheckAlive(t, w1)
		done := 0
		for _, st := range idemItems(t, env, table) {
			if st == "COMPLETED" {
				done++
			}
		}
		return done == len(ids), fmt.Sprintf("%d of %d COMPLETED", done, len(ids))
	})
	w1.kill(t)
	t.Logf("killed w1 after it handled %d records", len(w1.records()))

	w2 := ecsStartWorker(t, env, "w2", stream, leases, idem...)
	recs := ecsReadStream(t, env, stream, len(ids))
	last := ecsLastSequences(recs)
	idemEventually(t, idemRunTimeout, "w2 checkpoints every shard at its last record", func() (bool, string) {
		ecsCheckAlive(t, w2)
		ls := ecsLeases(t, store, stream)
		for shard, seq := range last {
			if ls[shard].Owner != "w2" || ls[shard].Checkpoint != seq {
				return false, ecsDescribeLeases(ls)
			}
		}
		return true, ""
	})
	// w2 read each shard from the checkpoint it took the lease at (the one
	// w1 left): every record after it came again.
	from := map[string]string{}
	for _, l := range w2.log() {
		if _, seen := from[l.ShardID]; l.Msg == ecsMsgLeaseTaken && !seen {
			from[l.ShardID] = l.Checkpoint
		}
	}
	if len(from) != len(last) {
		t.Fatalf("w2 logged taking %v, want every shard of %v", from, slices.Collect(maps.Keys(last)))
	}
	redelivered := 0
	for _, r := range recs {
		if cp := from[r.ShardID]; cp == "" || ecsSeqCompare(aws.ToString(r.SequenceNumber), cp) > 0 {
			redelivered++
		}
	}
	if redelivered == 0 {
		t.Fatalf("w1 checkpointed every record before the kill (w2 took the shards at %v); nothing was redelivered", from)
	}
	skipped := 0
	for _, l := range w2.log() {
		if l.Msg == "idempotency: completed before, not run again" {
			skipped++
		}
	}
	if skipped != redelivered {
		t.Errorf("w2 acknowledged %d redelivered records without running them, want %d (those after w1's checkpoints)", skipped, redelivered)
	}
	counts := ecsHandledCounts(w1, w2)
	for _, id := range ids {
		if counts[id] != 1 {
			t.Errorf("%s: handler ran %d times over both workers, want 1", id, counts[id])
		}
	}
	if n := len(w2.records()); n != 0 {
		t.Errorf("w2 ran the handler %d times, want 0: every record was completed by w1", n)
	}
	t.Logf("kill -9: %d records, %d redelivered to w2 and acknowledged without running; side effects once each", len(ids), redelivered)
	w2.terminate(t)
}

// TestIdempotencyConcurrentWorkers hands the same record to two workers at
// once (two goroutines calling the wrapped handler on equal messages). The
// handler blocks until both have tried: one runs it, the other finds it in
// progress and leaves it unsettled; once the first completes, a later
// delivery is acknowledged without running. A failed run releases its
// claim, and a record delivered again after it runs again.
func TestIdempotencyConcurrentWorkers(t *testing.T) {
	env := standin.Require(t)
	table := idemNewTable(t, env)
	fx := newEffects()
	refused := make(chan struct{})
	var fail atomic.Bool
	handler := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		if fail.Load() {
			return lambdaadapter.Retry(errors.New("transient failure"))
		}
		select {
		case <-refused:
		case <-ctx.Done():
			return lambdaadapter.Retry(ctx.Err())
		}
		fx.add(fx.ran, string(m.Payload))
		return lambdaadapter.Ack()
	})
	newWorker := func() *idempotency.Handler {
		h, err := idempotency.New(handler, env.DynamoDB, table, idempotency.WithKeyPrefix("workers-test"))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	workers := []*idempotency.Handler{newWorker(), newWorker()}
	msg := func(seq int) *lambdaadapter.Message {
		return &lambdaadapter.Message{
			Payload: []byte("record-" + strconv.Itoa(seq)), PartitionKey: "k", ShardID: "shardId-000000000000",
			SequenceNumber: fmt.Sprintf("4959033827149025660855969253836157109592157598913658%04d", seq),
			StreamARN:      "arn:aws:kinesis:us-east-1:123456789012:stream/orders", Attempt: 1,
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), idemRunTimeout)
	defer cancel()

	outs := make([]lambdaadapter.Outcome, len(workers))
	var wg sync.WaitGroup
	var once sync.Once
	for i, w := range workers {
		wg.Go(func() {
			outs[i] = w.HandleRecord(ctx, msg(1))
			if outs[i].Kind() == lambdaadapter.KindRetry {
				once.Do(func() { close(refused) })
			}
		})
	}
	wg.Wait()
	kinds := []string{outs[0].Kind().String(), outs[1].Kind().String()}
	slices.Sort(kinds)
	if !slices.Equal(kinds, []string{"ack", "retry"}) {
		t.Fatalf("outcomes %v, want one ack and one retry", outs)
	}
	for _, o := range outs {
		if o.Kind() == lambdaadapter.KindRetry && !errors.Is(o.Err(), idempotency.ErrInProgress) {
			t.Errorf("the refused worker's retry: %v, want ErrInProgress", o.Err())
		}
	}
	// The refused worker's record comes again: acknowledged, not run.
	for _, w := range workers {
		if out := w.HandleRecord(ctx, msg(1)); out.Kind() != lambdaadapter.KindAck {
			t.Errorf("redelivery: %v, want ack", out)
		}
	}
	// A failed run leaves no claim: the next delivery runs.
	fail.Store(true)
	if out := workers[0].HandleRecord(ctx, msg(2)); out.Kind() != lambdaadapter.KindRetry {
		t.Fatalf("failing run: %v", out)
	}
	fail.Store(false)
	if out := workers[1].HandleRecord(ctx, msg(2)); out.Kind() != lambdaadapter.KindAck {
		t.Errorf("after a failed run: %v, want ack", out)
	}
	ran, _ := fx.snapshot()
	if want := map[string]int{"record-1": 1, "record-2": 1}; !maps.Equal(ran, want) {
		t.Errorf("side effects %v, want %v", ran, want)
	}
	statuses := idemItems(t, env, table)
	if len(statuses) != 2 {
		t.Errorf("items %v, want two COMPLETED", statuses)
	}
	for id, st := range statuses {
		if st != "COMPLETED" || !strings.HasPrefix(id, "workers-test#") {
			t.Errorf("item %s: %s", id, st)
		}
	}
}
