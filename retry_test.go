package lambdaadapter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

const streamARN = "arn:aws:kinesis:us-east-1:123456789012:stream/orders"

// outcomeByPayload returns the outcome named by the payload's prefix.
func outcomeByPayload(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
	p := string(m.Payload)
	switch {
	case strings.HasPrefix(p, "retry-after-long"):
		return lambdaadapter.RetryAfter(10*time.Minute, errors.New("later"))
	case strings.HasPrefix(p, "retry-after"):
		return lambdaadapter.RetryAfter(300*time.Millisecond, errors.New("soon"))
	case strings.HasPrefix(p, "retry"):
		return lambdaadapter.Retry(errors.New("downstream 503"))
	case strings.HasPrefix(p, "drop"):
		return lambdaadapter.Drop(errors.New("poison"))
	default:
		return lambdaadapter.Ack()
	}
}

func userHeaders(h envelope.Headers) map[string]string {
	out := map[string]string{}
	for n, v := range h.All() {
		out[n] = v
	}
	return out
}

func TestRetryBecomesCountedCopy(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("user-1", []byte("ok"))
	b.Add("user-2", []byte("retry me"), "x-tenant", "acme")
	b.Add("user-3", []byte("retry again"), "x-ruststream-retry-count", "1")
	res := lambdaadaptertest.Run(t, lambdaadapter.HandlerFunc(outcomeByPayload), b, lambdaadapter.WithMaxAttempts(3))
	if !res.AllSettled() {
		t.Fatalf("copied records must settle: %s", res.Raw)
	}
	w := res.Kinesis.Written()
	if len(w) != 2 {
		t.Fatalf("%d records written, want 2 copies: %+v", len(w), w)
	}
	// A shard's copies go out in its order with PutRecords, together once
	// every record before them settled or is being written
	// (TestThousandCopies counts the calls of many).
	if res.Kinesis.Calls("PutRecords") > 2 || res.Kinesis.Calls("PutRecord") != 0 {
		t.Errorf("copies must go out with PutRecords, in shard order: %d PutRecords, %d PutRecord", res.Kinesis.Calls("PutRecords"), res.Kinesis.Calls("PutRecord"))
	}
	for i, want := range []struct {
		key, payload, count string
		extra               map[string]string
	}{
		{"user-2", "retry me", "1", map[string]string{"x-tenant": "acme"}},
		{"user-3", "retry again", "2", nil},
	} {
		got := w[i]
		if got.Stream != streamARN || got.PartitionKey != want.key || string(got.Payload) != want.payload {
			t.Errorf("copy %d: stream %q key %q payload %q", i, got.Stream, got.PartitionKey, got.Payload)
		}
		h := userHeaders(got.Headers)
		if h["x-ruststream-retry-count"] != want.count {
			t.Errorf("copy %d: retry count %q, want %q", i, h["x-ruststream-retry-count"], want.count)
		}
		for _, delivery := range []string{"partition-key", "kinesis-sequence-number", "kinesis-shard-id"} {
			if _, ok := h[delivery]; ok {
				t.Errorf("copy %d carries delivery header %s", i, delivery)
			}
		}
		for k, v := range want.extra {
			if h[k] != v {
				t.Errorf("copy %d: header %s = %q, want %q", i, k, h[k], v)
			}
		}
		if h["x-lambdaadapter-first-arrival"] == "" {
			t.Errorf("copy %d lacks the first arrival", i)
		}
	}
}

// TestCapAtExactlyN checks max attempts counts the first delivery: attempt
// n-1 is copied, attempt n is dead-lettered.
func TestCapAtExactlyN(t *testing.T) {
	for _, tt := range []struct {
		count      int // x-ruststream-retry-count of the delivered record
		wantCopy   bool
		wantDLQ    bool
		wantAttemp int
	}{
		{0, true, false, 1},
		{1, true, false, 2},
		{2, false, true, 3},
		{5, false, true, 6},
	} {
		t.Run(fmt.Sprintf("attempt %d", tt.count+1), func(t *testing.T) {
			b := lambdaadaptertest.NewBatch("orders")
			var h []string
			if tt.count > 0 {
				h = []string{"x-ruststream-retry-count", strconv.Itoa(tt.count)}
			}
			seq := b.Add("user-9", []byte("retry"), append(h, "x-tenant", "acme")...)
			var attempt atomic.Int32
			handler := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
				attempt.Store(int32(m.Attempt))
				return lambdaadapter.Retry(errors.New("boom\nsecond line"))
			})
			res := lambdaadaptertest.Run(t, handler, b, lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithDeadLetterStream("orders-dlq"))
			if !res.AllSettled() {
				t.Fatalf("response %s", res.Raw)
			}
			if int(attempt.Load()) != tt.wantAttemp {
				t.Errorf("Attempt = %d, want %d", attempt.Load(), tt.wantAttemp)
			}
			w := res.Kinesis.Written()
			if len(w) != 1 {
				t.Fatalf("%d writes, want 1", len(w))
			}
			if got := w[0].Stream == streamARN; got != tt.wantCopy {
				t.Errorf("written to %q, copy=%v want %v", w[0].Stream, got, tt.wantCopy)
			}
			if !tt.wantDLQ {
				return
			}
			hd := userHeaders(w[0].Headers)
			want := map[string]string{
				"x-tenant":                      "acme",
				"x-dead-letter-reason":          "cap reached after " + strconv.Itoa(tt.wantAttemp) + " attempts: boom second line",
				"x-dead-letter-source-stream":   streamARN,
				"x-dead-letter-shard-id":        lambdaadaptertest.DefaultShardID,
				"x-dead-letter-sequence-number": seq,
				"x-dead-letter-attempts":        strconv.Itoa(tt.wantAttemp),
				"x-dead-letter-first-arrival":   b.Event().Records[0].Kinesis.ApproximateArrivalTimestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			}
			if tt.count > 0 {
				want["x-ruststream-retry-count"] = strconv.Itoa(tt.count)
			}
			if diff := cmp.Diff(want, hd); diff != "" {
				t.Errorf("dead-letter headers (-want +got):\n%s", diff)
			}
			if w[0].Stream != "orders-dlq" || w[0].PartitionKey != "user-9" || string(w[0].Payload) != "retry" {
				t.Errorf("dead letter %q key %q payload %q", w[0].Stream, w[0].PartitionKey, w[0].Payload)
			}
		})
	}
}

func TestCapWithoutTargetRetires(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("k", []byte("retry"), "x-ruststream-retry-count", "1")
	res := lambdaadaptertest.Run(t, lambdaadapter.HandlerFunc(outcomeByPayload), b, lambdaadapter.WithMaxAttempts(2))
	if !res.AllSettled() || len(res.Kinesis.Written()) != 0 || len(res.SQS.Sent()) != 0 {
		t.Errorf("retired record: response %s, %d writes, %d messages", res.Raw, len(res.Kinesis.Written()), len(res.SQS.Sent()))
	}
}

func TestDeadLetterQueueBody(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	seq := b.Add("user-1", []byte{0, 1, 2, 255}, "content-type", "application/octet-stream", "x-ruststream-retry-count", "2")
	res := lambdaadaptertest.Run(t, lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
		return lambdaadapter.Retry(errors.New("still failing"))
	}), b, lambdaadapter.WithDeadLetterQueue("http://sqs.local/000000000000/dlq"))
	if !res.AllSettled() {
		t.Fatalf("response %s", res.Raw)
	}
	sent := res.SQS.Sent()
	if len(sent) != 1 || sent[0].QueueURL != "http://sqs.local/000000000000/dlq" {
		t.Fatalf("sent %+v", sent)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(sent[0].Body), &body); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"version": float64(1), "reason": "cap reached after 3 attempts: still failing", "source_stream_arn": streamARN,
		"shard_id": lambdaadaptertest.DefaultShardID, "sequence_number": seq, "partition_key": "user-1",
		"attempts": float64(3), "payload_base64": "AAEC/w==",
	} {
		if body[k] != want {
			t.Errorf("body[%q] = %v, want %v", k, body[k], want)
		}
	}
	dl, err := publish.ParseDeadLetterBody([]byte(sent[0].Body))
	if err != nil {
		t.Fatal(err)
	}
	if dl.Headers.Get("content-type") != "application/octet-stream" || dl.Headers.Get("kinesis-sequence-number") != "" {
		t.Errorf("dead-letter headers %v", dl.Headers)
	}
}

func TestDropsToDeadLetter(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("k", []byte("drop"))
	b.Add("k", []byte("fine"))
	res := lambdaadaptertest.Run(t, lambdaadapter.HandlerFunc(outcomeByPayload), b,
		lambdaadapter.WithDeadLetterStream("dlq"), lambdaadapter.WithDeadLetterDrops())
	w := res.Kinesis.Written()
	if !res.AllSettled() || len(w) != 1 || w[0].Stream != "dlq" || w[0].Headers.Get("x-dead-letter-reason") != "dropped: poison" {
		t.Errorf("response %s, writes %+v", res.Raw, w)
	}
}

// TestFailedWriteLeavesRecordUnsettled: a copy or dead letter that cannot be
// written keeps its record in the response, so nothing is lost. The write of
// the record after it went out in the same PutRecords call and was made;
// when Lambda delivers both again to the same execution environment (the
// same adapter), that record is recognised and settled without its handler
// or a second write: one record never has two copy chains (fault: a partial
// PutRecords failure started a second chain).
func TestFailedWriteLeavesRecordUnsettled(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []lambdaadapter.FunctionOption
	}{
		{"copy", []lambdaadapter.FunctionOption{lambdaadapter.WithMaxAttempts(5)}},
		{"dead-letter stream", []lambdaadapter.FunctionOption{lambdaadapter.WithMaxAttempts(1), lambdaadapter.WithDeadLetterStream("dlq")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := lambdaadaptertest.NewBatch("orders")
				b.Add("a", []byte("ok"))
				bad := b.Add("b", []byte("retry"))
				b.Add("c", []byte("retry too"))
				fake := lambdaadaptertest.NewKinesis()
				fake.Fail = func(stream, key string, data []byte) string {
					if key == "b" {
						return "InternalFailure"
					}
					return ""
				}
				var calls sync.Map
				h := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
					n, _ := calls.LoadOrStore(m.PartitionKey, new(atomic.Int32))
					n.(*atomic.Int32).Add(1)
					return outcomeByPayload(ctx, m)
				})
				a, err := lambdaadapter.NewFunction(h, append(tt.opts, lambdaadapter.WithKinesisClient(fake))...)
				if err != nil {
					t.Fatal(err)
				}
				ev := b.Event()
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
				defer cancel()
				resp, err := a.HandleEvent(ctx, ev)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != bad {
					t.Fatalf("failures %+v, want only %s", resp.BatchItemFailures, bad)
				}
				var keys []string
				for _, w := range fake.Written() {
					keys = append(keys, w.PartitionKey)
				}
				if want := []string{"c"}; !slices.Equal(keys, want) {
					t.Errorf("written for keys %v after the first delivery, want %v", keys, want)
				}
				// Lambda delivers b and c again; this time b's write works.
				fake.Fail = nil
				ev.Records = ev.Records[1:]
				resp, err = a.HandleEvent(t.Context(), ev)
				if err != nil || len(resp.BatchItemFailures) != 0 {
					t.Fatalf("redelivery: %+v, %v", resp, err)
				}
				keys = keys[:0]
				for _, w := range fake.Written() {
					keys = append(keys, w.PartitionKey)
				}
				if want := []string{"c", "b"}; !slices.Equal(keys, want) {
					t.Errorf("written for keys %v over both deliveries, want %v: one write per record", keys, want)
				}
				for key, want := range map[string]int32{"a": 1, "b": 2, "c": 1} {
					n, _ := calls.Load(key)
					if n == nil || n.(*atomic.Int32).Load() != want {
						t.Errorf("handler calls for %s: %v, want %d", key, n, want)
					}
				}
			})
		})
	}
}

// TestThrottlingBoundedByDeadline: a stream that throttles every write makes
// the adapter back off and retry, but it answers before the deadline with
// the record unsettled.
func TestThrottlingBoundedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := lambdaadaptertest.NewBatch("orders")
		seq := b.Add("a", []byte("retry"))
		fake := lambdaadaptertest.NewKinesis()
		fake.Fail = func(string, string, []byte) string { return "ProvisionedThroughputExceededException" }
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		res := lambdaadaptertest.RunContext(ctx, t, lambdaadapter.HandlerFunc(outcomeByPayload), b,
			lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithKinesisClient(fake))
		elapsed := time.Since(start)
		if diff := cmp.Diff([]string{seq}, res.Failures); diff != "" {
			t.Errorf("failures (-want +got):\n%s", diff)
		}
		if elapsed >= 2900*time.Millisecond || elapsed < time.Second {
			t.Errorf("answered after %v: want backoff for a while, but an answer before the deadline minus a fifth of the margin", elapsed)
		}
		if n := fake.Calls("PutRecords"); n < 3 {
			t.Errorf("only %d PutRecords attempts while throttled", n)
		}
	})
}

func TestRetryAfterShortWaitsInProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := lambdaadaptertest.NewBatch("orders")
		b.Add("a", []byte("retry-after"))
		b.Add("b", []byte("fine"))
		start := time.Now()
		res := lambdaadaptertest.Run(t, lambdaadapter.HandlerFunc(outcomeByPayload), b)
		if !res.AllSettled() {
			t.Fatalf("response %s", res.Raw)
		}
		if e := time.Since(start); e < 300*time.Millisecond {
			t.Errorf("copy written after %v, before the 300ms delay", e)
		}
		w := res.Kinesis.Written()
		if len(w) != 1 || w[0].Headers.Get("x-ruststream-retry-count") != "1" || w[0].Stream != streamARN {
			t.Errorf("writes %+v", w)
		}
	})
}

func TestRetryAfterLong(t *testing.T) {
	t.Run("through the delay queue", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := lambdaadaptertest.NewBatch("orders")
			b.Add("a", []byte("retry-after-long"), "x-tenant", "acme")
			res := lambdaadaptertest.Run(t, lambdaadapter.HandlerFunc(outcomeByPayload), b,
				lambdaadapter.WithDelayQueue("http://sqs.local/000000000000/delay"))
			if !res.AllSettled() {
				t.Fatalf("response %s", res.Raw)
			}
			sent := res.SQS.Sent()
			if len(sent) != 1 || sent[0].DelaySeconds != 600 || len(res.Kinesis.Written()) != 0 {
				t.Fatalf("sent %+v, written %d", sent, len(res.Kinesis.Written()))
			}
			d, ours, err := publish.ParseDelayed([]byte(sent[0].Body))
			if err != nil || !ours {
				t.Fatalf("ParseDelayed: %v %v", ours, err)
			}
			if d.StreamARN != streamARN || d.PartitionKey != "a" || string(d.Payload) != "retry-after-long" ||
				d.Headers.Get("x-ruststream-retry-count") != "1" || d.Headers.Get("x-tenant") != "acme" {
				t.Errorf("delayed %+v", d)
			}
			if got := d.NotBefore.Sub(time.Now()); got < 9*time.Minute || got > 10*time.Minute {
				t.Errorf("not before in %v, want about 10m", got)
			}
		})
	})
	t.Run("without a delay queue behaves as Retry", func(t *testing.T) {
		b := lambdaadaptertest.NewBatch("orders")
		seq := b.Add("a", []byte("retry-after-long"))
		res := lambdaadaptertest.Run(t, lambdaadapter.HandlerFunc(outcomeByPayload), b)
		if diff := cmp.Diff([]string{seq}, res.Failures); diff != "" {
			t.Errorf("failures (-want +got):\n%s", diff)
		}
	})
}

// TestDelayQueueForwarding: the same adapter, invoked by the delay queue,
// forwards due records to their stream, chains those not yet due and
// reports messages it cannot forward.
func TestDelayQueueForwarding(t *testing.T) {
	due, _ := publish.Delayed{StreamARN: streamARN, PartitionKey: "k1", Headers: envelope.Headers{{Name: "x-ruststream-retry-count", Value: "1"}}, Payload: []byte("p1"), NotBefore: time.Now().Add(-time.Second)}.Body()
	later, _ := publish.Delayed{StreamARN: streamARN, PartitionKey: "k2", Payload: []byte("p2"), NotBefore: time.Now().Add(40 * time.Minute)}.Body()
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: string(due), EventSource: "aws:sqs"},
		{MessageId: "m2", Body: string(later), EventSource: "aws:sqs"},
		{MessageId: "m3", Body: `{"hello":"world"}`, EventSource: "aws:sqs"},
	}}
	raw, _ := json.Marshal(ev)
	k, q := lambdaadaptertest.NewKinesis(), lambdaadaptertest.NewSQS()
	a, err := lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(outcomeByPayload),
		lambdaadapter.WithKinesisClient(k), lambdaadapter.WithSQSClient(q), lambdaadapter.WithDelayQueue("http://sqs.local/000000000000/delay"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.Invoke(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"batchItemFailures":[{"itemIdentifier":"m3"}]}` {
		t.Errorf("response %s", out)
	}
	w := k.Written()
	if len(w) != 1 || w[0].Stream != streamARN || w[0].PartitionKey != "k1" || string(w[0].Payload) != "p1" || w[0].Headers.Get("x-ruststream-retry-count") != "1" {
		t.Errorf("forwarded %+v", w)
	}
	s := q.Sent()
	if len(s) != 1 || s[0].DelaySeconds != 900 || s[0].Body != string(later) {
		t.Errorf("chained %+v", s)
	}
}

func TestReplies(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("user-1", []byte("q1"))
	failing := b.Add("user-2", []byte("q2"))
	h := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		r := lambdaadapter.Reply{Payload: append([]byte("answer to "), m.Payload...)}
		if m.PartitionKey == "user-2" {
			r.Stream = "broken"
		} else {
			r.Headers.Set("partition-key", "reply-key")
			r.Headers.Set("x-corr", m.SequenceNumber)
		}
		if err := m.Reply(ctx, r); err != nil {
			return lambdaadapter.Ack() // ignoring the error must not settle the record
		}
		return lambdaadapter.Ack()
	})
	fake := lambdaadaptertest.NewKinesis()
	fake.Fail = func(stream, _ string, _ []byte) string {
		if stream == "broken" {
			return "ResourceNotFoundException"
		}
		return ""
	}
	res := lambdaadaptertest.Run(t, h, b, lambdaadapter.WithReplyStream("replies"), lambdaadapter.WithKinesisClient(fake))
	if diff := cmp.Diff([]string{failing}, res.Failures); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	w := fake.Written()
	if len(w) != 1 || w[0].Stream != "replies" || w[0].PartitionKey != "reply-key" || string(w[0].Payload) != "answer to q1" || w[0].Headers.Get("x-corr") == "" {
		t.Errorf("replies %+v", w)
	}
	if fake.Calls("PutRecord") != 2 {
		t.Errorf("%d PutRecord calls, want one per reply", fake.Calls("PutRecord"))
	}
}

func TestReplyKeyResolution(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("user-1", []byte("q"))
	keys := []string{}
	h := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		var hk lambdaadapter.Headers
		hk.Set("partition-key", "from-header")
		for _, r := range []lambdaadapter.Reply{
			{PartitionKey: "explicit", Headers: hk, Payload: []byte("1")},
			{Headers: hk, Payload: []byte("2")},
			{Payload: []byte("3")},
		} {
			if err := m.Reply(ctx, r); err != nil {
				return lambdaadapter.Retry(err)
			}
		}
		return lambdaadapter.Ack()
	})
	res := lambdaadaptertest.Run(t, h, b, lambdaadapter.WithReplyStream("replies"), lambdaadapter.WithReplyPartitionKey("policy"))
	for _, w := range res.Kinesis.Written() {
		keys = append(keys, w.PartitionKey)
	}
	if diff := cmp.Diff([]string{"explicit", "from-header", "policy"}, keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

func TestEnhancedFanOutSource(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders").WithEventSourceARN(streamARN + "/consumer/efo:1700000000")
	b.Add("k", []byte("retry"))
	res := lambdaadaptertest.Run(t, lambdaadapter.HandlerFunc(outcomeByPayload), b, lambdaadapter.WithMaxAttempts(2))
	if w := res.Kinesis.Written(); len(w) != 1 || w[0].Stream != streamARN {
		t.Errorf("copy written to %+v, want the stream ARN", w)
	}
}

// TestThousandCopies: 1,000 copies from one invocation are all written, in
// shard order; copies of different shards share PutRecords calls.
func TestThousandCopies(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	for i := range 1000 {
		if i%250 == 0 {
			b.OnShard(fmt.Sprintf("shardId-%012d", i/250))
		}
		b.Add("k"+strconv.Itoa(i%50), []byte("retry "+strconv.Itoa(i)))
	}
	// The writes wait until every record was handled, so every shard has
	// copies waiting when they start, however fast the lanes run: each call
	// can then carry the next copy of every shard.
	k := lambdaadaptertest.NewKinesis()
	var handled atomic.Int64
	allHandled := make(chan struct{})
	h := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		out := outcomeByPayload(ctx, m)
		if handled.Add(1) == 1000 {
			close(allHandled)
		}
		return out
	})
	gate := gatedKinesis{k, allHandled}
	res := lambdaadaptertest.Run(t, h, b, lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithKinesisClient(gate))
	if !res.AllSettled() || len(k.Written()) != 1000 {
		t.Fatalf("response %s, %d written", res.Raw, len(k.Written()))
	}
	last := map[int]int{} // shard → last record number copied
	for _, w := range k.Written() {
		n, _ := strconv.Atoi(strings.TrimPrefix(string(w.Payload), "retry "))
		if prev, ok := last[n/250]; ok && n < prev {
			t.Fatalf("copy of record %d written after the copy of record %d of its shard", n, prev)
		}
		last[n/250] = n
	}
	t.Logf("%d PutRecords calls", k.Calls("PutRecords"))
	if n := k.Calls("PutRecords"); n > 4 {
		t.Errorf("%d PutRecords calls for 4 shards × 250 copies, want 2 (every shard's copies in order, 500 per call)", n)
	}
}

func TestNewValidatesRetryOptions(t *testing.T) {
	h := lambdaadapter.HandlerFunc(outcomeByPayload)
	k := lambdaadaptertest.NewKinesis()
	for name, opts := range map[string][]lambdaadapter.FunctionOption{
		"max attempts 0":           {lambdaadapter.WithMaxAttempts(0)},
		"both dead-letter targets": {lambdaadapter.WithDeadLetterStream("s"), lambdaadapter.WithDeadLetterQueue("q")},
		"drops without target":     {lambdaadapter.WithDeadLetterDrops()},
		"in-process delay 0":       {lambdaadapter.WithMaxInProcessDelay(0)},
	} {
		if _, err := lambdaadapter.NewFunction(h, append(opts, lambdaadapter.WithKinesisClient(k))...); err == nil || !strings.HasPrefix(err.Error(), "lambdaadapter: ") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// TestOversizeDeadLetterLosesNothing: a dead letter too large for the SQS
// limit is not sent; its record stays unsettled (reported), a record before
// it still goes, and a record after it waits for Lambda's redelivery (its
// shard's writes stop at the one that failed).
func TestOversizeDeadLetterLosesNothing(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("a", []byte("retry small"))
	big := b.Add("b", []byte("retry"+strings.Repeat("x", 3000)))
	b.Add("c", []byte("retry small after"))
	res := lambdaadaptertest.Run(t, lambdaadapter.HandlerFunc(outcomeByPayload), b,
		lambdaadapter.WithMaxAttempts(1), lambdaadapter.WithDeadLetterQueue("http://sqs.local/000000000000/dlq"), lambdaadapter.WithMaxMessageSize(2048))
	if diff := cmp.Diff([]string{big}, res.Failures); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	if sent := res.SQS.Sent(); len(sent) != 1 || !strings.Contains(sent[0].Body, `"partition_key":"a"`) {
		t.Errorf("sent %+v, want only the dead letter of the record before the oversize one", sent)
	}
}

// TestOversizeCopyLosesNothing (review fault 5g): a copy that would exceed
// the Kinesis record limit (the original was within a few bytes of it) can
// never be written, so the record can never reach its cap; it ends at once,
// as at the cap. With a dead-letter stream it goes there as it arrived (its
// dead letter would be too large as well); with a dead-letter queue too
// small for it, it stays unsettled (reported, as a dead letter too large at
// the cap does); with no target it is retired.
func TestOversizeCopyLosesNothing(t *testing.T) {
	data := []byte("retry" + strings.Repeat("x", 1<<20-len("retry")-1))
	for _, tt := range []struct {
		name      string
		opts      []lambdaadapter.FunctionOption
		unsettled bool
		toDLQ     bool
	}{
		{name: "no target", opts: []lambdaadapter.FunctionOption{lambdaadapter.WithMaxAttempts(3)}},
		{name: "dead-letter stream", opts: []lambdaadapter.FunctionOption{lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithDeadLetterStream("dlq")}, toDLQ: true},
		{name: "dead-letter queue", opts: []lambdaadapter.FunctionOption{lambdaadapter.WithMaxAttempts(3),
			lambdaadapter.WithDeadLetterQueue("http://sqs.local/000000000000/dlq")}, unsettled: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := lambdaadaptertest.NewBatch("orders")
			seq := b.AddRaw("k", data)
			res := lambdaadaptertest.Run(t, lambdaadapter.HandlerFunc(outcomeByPayload), b, tt.opts...)
			var want []string
			if tt.unsettled {
				want = []string{seq}
			}
			if diff := cmp.Diff(want, res.Failures); diff != "" {
				t.Errorf("failures (-want +got):\n%s", diff)
			}
			w := res.Kinesis.Written()
			switch {
			case !tt.toDLQ && len(w) != 0:
				t.Errorf("%d records written", len(w))
			case tt.toDLQ && (len(w) != 1 || w[0].Stream != "dlq" || w[0].PartitionKey != "k" || !bytes.Equal(w[0].Data, data)):
				t.Errorf("written %d records, want the original bytes in the dead-letter stream", len(w))
			}
			if n := len(res.SQS.Sent()); n != 0 {
				t.Errorf("%d messages sent", n)
			}
		})
	}
}

// TestCutOffOutcomeChangesNothing: a handler cut off by the deadline that
// then returns Retry must not get a copy written: its record is reported.
func TestCutOffOutcomeChangesNothing(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			b := lambdaadaptertest.NewBatch("orders")
			seq := b.Add("slow", []byte("x"))
			h := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
				<-ctx.Done()
				return lambdaadapter.Retry(ctx.Err())
			})
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			res := lambdaadaptertest.RunContext(ctx, t, h, b, lambdaadapter.WithMaxAttempts(3))
			if diff := cmp.Diff([]string{seq}, res.Failures); diff != "" {
				t.Fatalf("failures (-want +got):\n%s", diff)
			}
			if n := len(res.Kinesis.Written()); n != 0 {
				t.Fatalf("%d copies written for a record cut off by the deadline", n)
			}
		})
	}
}

// TestNoCopiesAfterAHole: records after the first record of a shard that
// stays unsettled are delivered again by Lambda, so their copies are not
// written now.
func TestNoCopiesAfterAHole(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("a", []byte("retry first"))
	hole := b.Add("b", []byte("stays"))
	b.Add("c", []byte("retry later"))
	h := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		if string(m.Payload) == "stays" {
			return lambdaadapter.RetryAfter(time.Hour, errors.New("no delay queue: as Retry"))
		}
		return lambdaadapter.Retry(errors.New("copy me"))
	})
	res := lambdaadaptertest.Run(t, h, b, lambdaadapter.WithMaxAttempts(3))
	_ = hole
	w := res.Kinesis.Written()
	// "stays" is counted too (RetryAfter without a delay queue on a counted
	// configuration becomes an immediate copy), so nothing is left: all three
	// are copied.
	if len(w) != 3 || !res.AllSettled() {
		t.Fatalf("counted config: %d copies, response %s", len(w), res.Raw)
	}
	// Without a cap the middle record is left unsettled: the copy of the
	// record after it is not written.
	res = lambdaadaptertest.Run(t, lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		switch string(m.Payload) {
		case "stays":
			return lambdaadapter.Retry(errors.New("left"))
		default:
			return lambdaadapter.RetryAfter(10*time.Millisecond, errors.New("short delay: a copy"))
		}
	}), b)
	if diff := cmp.Diff([]string{hole}, res.Failures); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	w = res.Kinesis.Written()
	if len(w) != 1 || w[0].PartitionKey != "a" {
		t.Errorf("copies %+v, want only the one before the hole", w)
	}
}

// TestNoCopiesAfterAHoleWhenLaterRecordFinishedFirst: the later record's
// handler finishes (asking for a copy) before the earlier one is left
// unsettled; its copy must still not be written.
func TestNoCopiesAfterAHoleWhenLaterRecordFinishedFirst(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	hole := b.Add("b", []byte("stays"))
	b.Add("c", []byte("later"))
	laterDone := make(chan struct{})
	h := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		if string(m.Payload) == "stays" {
			<-laterDone
			return lambdaadapter.Retry(errors.New("left"))
		}
		defer close(laterDone)
		return lambdaadapter.RetryAfter(time.Millisecond, errors.New("a copy, but after the hole"))
	})
	res := lambdaadaptertest.Run(t, h, b, lambdaadapter.WithConcurrency(2))
	if diff := cmp.Diff([]string{hole}, res.Failures); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	if w := res.Kinesis.Written(); len(w) != 0 {
		t.Errorf("copies %+v written for a record Lambda delivers again", w)
	}
}

// gatedKinesis holds every write until open is closed (or the call's
// context ends).
type gatedKinesis struct {
	*lambdaadaptertest.Kinesis
	open <-chan struct{}
}

func (g gatedKinesis) wait(ctx context.Context) {
	select {
	case <-g.open:
	case <-ctx.Done():
	}
}

func (g gatedKinesis) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	g.wait(ctx)
	return g.Kinesis.PutRecords(ctx, in, optFns...)
}

func (g gatedKinesis) PutRecord(ctx context.Context, in *kinesis.PutRecordInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	g.wait(ctx)
	return g.Kinesis.PutRecord(ctx, in, optFns...)
}

// TestCopyAndDeadLetterKeepRustHeaders: headers the Rust crate
// ruststream-kinesis writes although this module's encoder once refused
// them (an empty name, '\r' inside a value) reach the handler, and the
// record's counted copy and its dead letter carry them on.
func TestCopyAndDeadLetterKeepRustHeaders(t *testing.T) {
	// As ruststream-kinesis frames ": v\n" and "x-a: 1\r2\n".
	block := ": v\nx-a: 1\r2\n"
	data := func(extra, payload string) []byte {
		b := block + extra
		return append(append([]byte("RSK1"), byte(len(b)>>24), byte(len(b)>>16), byte(len(b)>>8), byte(len(b))), b+payload...)
	}
	b := lambdaadaptertest.NewBatch("orders")
	b.AddRaw("user-1", data("", "copy me"))
	b.AddRaw("user-2", data("x-ruststream-retry-count: 2\n", "dead-letter me"))
	var seen []map[string]string
	var mu sync.Mutex
	handler := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		mu.Lock()
		seen = append(seen, userHeaders(m.Headers))
		mu.Unlock()
		return lambdaadapter.Retry(errors.New("downstream failed"))
	})
	res := lambdaadaptertest.Run(t, handler, b, lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithDeadLetterStream("orders-dlq"))
	if !res.AllSettled() {
		t.Fatalf("response %s", res.Raw)
	}
	for i, h := range seen {
		if h[""] != "v" || h["x-a"] != "1\r2" {
			t.Errorf("handler %d saw headers %q, want \"\": v and x-a: 1\\r2", i, h)
		}
	}
	w := res.Kinesis.Written()
	if len(w) != 2 {
		t.Fatalf("%d records written, want a copy and a dead letter", len(w))
	}
	for _, r := range w {
		h := userHeaders(r.Headers)
		if h[""] != "v" || h["x-a"] != "1\r2" {
			t.Errorf("%s (%q) carries %q, want \"\": v and x-a: 1\\r2", r.Stream, r.Payload, h)
		}
	}
}
