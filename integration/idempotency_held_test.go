//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/idempotency"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

// The tests below hold a record's idempotency key with a run in progress
// elsewhere while the adapter, with counted retries (WithMaxAttempts 1 or
// 3), is handed the record again and again. The record must stay unsettled
// (no attempt counted, no copy, nothing retired) until the other run ends;
// when that run fails and releases its claim, the next delivery runs the
// handler once. With a cap of 1 the record used to be retired unhandled
// (lost once the other run failed); with a cap of 3 a copy was written and
// run, under a key of its own, while the claim was still held.

// heldPut writes one record and returns its shard and sequence number.
func heldPut(t *testing.T, env *standin.Env, stream, key, data string) (shardID, seq string) {
	t.Helper()
	out, err := env.Kinesis.PutRecord(sdkContext(t), &kinesis.PutRecordInput{StreamName: aws.String(stream),
		PartitionKey: aws.String(key), Data: []byte(data)})
	if err != nil {
		t.Fatalf("PutRecord to %s: %v", stream, err)
	}
	return aws.ToString(out.ShardId), aws.ToString(out.SequenceNumber)
}

// heldOnlyOriginals fails the test unless the stream holds exactly the n
// records written to it: no counted copy.
func heldOnlyOriginals(t *testing.T, env *standin.Env, stream string, n int) {
	t.Helper()
	recs := env.ReadAll(t.Context(), t, stream, n+1, settleRead)
	if len(recs) != n {
		var seen []string
		for _, r := range recs {
			h, payload := envelope.Decode(r.Data)
			seen = append(seen, fmt.Sprintf("%s (%s=%q)", payload, publish.OriginHeader, h.Get(publish.OriginHeader)))
		}
		t.Fatalf("stream %s holds %d records, want the %d written (no copy): %v", stream, len(recs), n, seen)
	}
}

// TestIdempotencyHeldUnderCountedRetriesLambda runs the Lambda-mode adapter
// behind lambdaadaptertest.EventSource. Another run (a second idempotency
// Handler on the same table, as a timed-out invocation still running or
// another function would be) holds the first record's key; the event source
// delivers the record three times, and each time it is reported, nothing is
// written and the handler does not run. The other run then fails (its claim
// is released): the next delivery runs the handler once.
func TestIdempotencyHeldUnderCountedRetriesLambda(t *testing.T) {
	for _, cap := range []int{1, 3} {
		t.Run("cap "+strconv.Itoa(cap), func(t *testing.T) {
			env := standin.Require(t)
			stream, arn := env.NewStream(t, 1)
			table := idemNewTable(t, env)
			const prefix = "held-lambda"
			shardID, seq := heldPut(t, env, stream, "key-a", "held-0")
			heldPut(t, env, stream, "key-b", "later-1")

			// The other run: claims the key and blocks until released,
			// then fails.
			release := make(chan struct{})
			claimed := make(chan struct{})
			other, err := idempotency.New(lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
				close(claimed)
				select {
				case <-release:
				case <-ctx.Done():
				}
				return lambdaadapter.Retry(errors.New("the other run failed"))
			}), env.DynamoDB, table, idempotency.WithKeyPrefix(prefix), idempotency.WithInProgressExpiry(10*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), idemRunTimeout)
			defer cancel()
			otherOut := make(chan lambdaadapter.Outcome, 1)
			go func() {
				otherOut <- other.HandleRecord(ctx, &lambdaadapter.Message{Payload: []byte("held-0"), PartitionKey: "key-a",
					ShardID: shardID, SequenceNumber: seq, StreamARN: arn, Attempt: 1})
			}()
			select {
			case <-claimed:
			case o := <-otherOut:
				t.Fatalf("the other run did not claim the key: %v", o)
			case <-ctx.Done():
				t.Fatal("the other run did not start")
			}

			fx := newEffects()
			h, err := idempotency.New(lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
				fx.add(fx.ran, string(m.Payload))
				return lambdaadapter.Ack()
			}), env.DynamoDB, table, idempotency.WithKeyPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			a, err := lambdaadapter.NewFunction(fx.counted(h), lambdaadapter.WithMaxAttempts(cap),
				lambdaadapter.WithKinesisClient(env.Kinesis), lambdaadapter.WithSQSClient(env.SQS))
			if err != nil {
				t.Fatal(err)
			}
			src := &lambdaadaptertest.EventSource{StreamARN: arn, Kinesis: env.Kinesis, BatchSize: 100}
			for i := range 3 {
				if _, err := src.Round(ctx, a.Invoke); err != nil {
					t.Fatalf("round %d: %v", i+1, err)
				}
				if !src.Pending() || src.Checkpoint(shardID) != "" {
					t.Fatalf("round %d: the held record settled (checkpoint %q, pending %v)", i+1, src.Checkpoint(shardID), src.Pending())
				}
			}
			ran, deliveries := fx.snapshot()
			if ran["held-0"] != 0 || deliveries["held-0"] != 3 {
				t.Fatalf("while held: held-0 ran %d times in %d deliveries, want 0 in 3", ran["held-0"], deliveries["held-0"])
			}
			heldOnlyOriginals(t, env, stream, 2)

			close(release)
			if o := <-otherOut; o.Kind() != lambdaadapter.KindRetry {
				t.Fatalf("the other run returned %v, want its Retry", o)
			}
			for {
				st, err := src.Round(ctx, a.Invoke)
				if err != nil {
					t.Fatalf("event source round: %v", err)
				}
				if !src.Pending() {
					break
				}
				if ctx.Err() != nil {
					ran, deliveries := fx.snapshot()
					t.Fatalf("not settled within %v: ran %v, deliveries %v", idemRunTimeout, ran, deliveries)
				}
				if st.Invocations == 0 {
					time.Sleep(idemPoll)
				}
			}
			ran, deliveries = fx.snapshot()
			if ran["held-0"] != 1 || ran["later-1"] != 1 {
				t.Errorf("side effects %v, want held-0 and later-1 once each", ran)
			}
			heldOnlyOriginals(t, env, stream, 2)
			statuses := idemItems(t, env, table)
			if len(statuses) != 2 {
				t.Errorf("items %v, want two COMPLETED", statuses)
			}
			for id, st := range statuses {
				if st != "COMPLETED" {
					t.Errorf("item %s is %s, want COMPLETED", id, st)
				}
			}
			t.Logf("cap %d: held-0 delivered %d times, reported while held, handled once after the other run failed", cap, deliveries["held-0"])
		})
	}
}

// TestIdempotencyHeldUnderCountedRetriesECS runs bootstrap -mode=ecs with
// LAMBDAADAPTER_MAX_ATTEMPTS=1 and the idempotency helper. Before it
// starts, the first record's key is claimed in the table (another run's
// INPROGRESS item, expiring in 10 minutes). The worker finds it in progress
// again and again and delivers it again in process without counting an
// attempt; once the claim is deleted (the other run failed), the handler
// runs on attempt 1, and no copy was written.
func TestIdempotencyHeldUnderCountedRetriesECS(t *testing.T) {
	env := standin.Require(t)
	stream, arn := env.NewStream(t, 1)
	leases, _ := ecsNewLeaseTable(t, env, false)
	table := idemNewTable(t, env)
	const prefix = "held-ecs"
	shardID, seq := heldPut(t, env, stream, "key-a", `{"id":"held-0"}`)
	heldPut(t, env, stream, "key-b", `{"id":"later-1"}`)
	id := prefix + "#" + arn + "#" + shardID + "#" + seq + "#0"
	now := time.Now()
	if _, err := env.DynamoDB.PutItem(sdkContext(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]dynamodbtypes.AttributeValue{
		"id":                     &dynamodbtypes.AttributeValueMemberS{Value: id},
		"status":                 &dynamodbtypes.AttributeValueMemberS{Value: "INPROGRESS"},
		"expiration":             &dynamodbtypes.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
		"in_progress_expiration": &dynamodbtypes.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(10*time.Minute).UnixMilli(), 10)},
	}}); err != nil {
		t.Fatalf("claiming %s for the other run: %v", id, err)
	}

	w := ecsStartWorker(t, env, "w1", stream, leases,
		"LAMBDAADAPTER_IDEMPOTENCY_TABLE="+table, "LAMBDAADAPTER_IDEMPOTENCY_PREFIX="+prefix,
		"LAMBDAADAPTER_MAX_ATTEMPTS=1", "LAMBDAADAPTER_RETRY_BACKOFF=100ms", "LAMBDAADAPTER_MAX_RETRY_BACKOFF=400ms")
	const refusals = 4
	refused := func() int {
		n := 0
		for _, l := range w.log() {
			if l.Msg == "idempotency: in progress elsewhere" && l.Seq == seq {
				n++
			}
		}
		return n
	}
	idemEventually(t, idemRunTimeout, "the worker finds held-0 in progress elsewhere "+strconv.Itoa(refusals)+" times", func() (bool, string) {
		ecsCheckAlive(t, w)
		return refused() >= refusals, fmt.Sprintf("%d refusals", refused())
	})
	for _, r := range w.records() {
		if r.ID == "held-0" {
			t.Fatalf("held-0 was handled while its key was held: %+v", r)
		}
	}
	// The other run fails: its claim goes.
	if _, err := env.DynamoDB.DeleteItem(sdkContext(t), &dynamodb.DeleteItemInput{TableName: aws.String(table),
		Key: map[string]dynamodbtypes.AttributeValue{"id": &dynamodbtypes.AttributeValueMemberS{Value: id}}}); err != nil {
		t.Fatal(err)
	}
	ecsAwaitHandled(t, []string{"held-0", "later-1"}, ecsHandledTimeout, w)
	var attempts []int
	for _, r := range w.records() {
		if r.ID == "held-0" {
			attempts = append(attempts, r.Attempt)
		}
	}
	if len(attempts) != 1 || attempts[0] != 1 {
		t.Errorf("held-0 handled with attempts %v, want once, attempt 1 (the refusals counted none)", attempts)
	}
	for _, l := range w.log() {
		if strings.Contains(l.Msg, "retired") || strings.Contains(l.Msg, "dead-letter") {
			t.Errorf("worker logged %q for %s", l.Msg, l.Seq)
		}
	}
	heldOnlyOriginals(t, env, stream, 2)
	idemEventually(t, idemRunTimeout, "held-0's item COMPLETED", func() (bool, string) {
		st := idemItems(t, env, table)[id]
		return st == "COMPLETED", st
	})
	t.Logf("held-0 refused %d times without counting an attempt, then handled once", refused())
	w.terminate(t)
}
