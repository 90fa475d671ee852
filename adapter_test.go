package lambdaadapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

func TestAdapterMessageFields(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders").
		WithEventSourceARN("arn:aws:kinesis:us-east-1:123456789012:stream/orders/consumer/efo-1:1700000000")
	seq1 := b.Add("user-42", []byte(`{"id":1}`), "Content-Type", "application/json", "x-tenant", "acme", "partition-key", "ignored")
	b.OnShard("shardId-000000000007")
	seq2 := b.AddRaw("user-43", []byte("plain"))
	seq3 := b.Add("user-44", []byte("copy"), "x-ruststream-retry-count", "2")
	ev := b.Event()

	var mu sync.Mutex
	got := map[string]lambdaadapter.Message{}
	h := lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		mu.Lock()
		defer mu.Unlock()
		c := *m
		c.Payload = append([]byte(nil), m.Payload...)
		c.Headers = m.Headers.Clone()
		got[m.SequenceNumber] = c
		return lambdaadapter.Ack()
	})
	res := lambdaadaptertest.Run(t, h, b)
	if !res.AllSettled() || string(res.Raw) != `{"batchItemFailures":[]}` {
		t.Fatalf("response %s", res.Raw)
	}
	streamARN := "arn:aws:kinesis:us-east-1:123456789012:stream/orders"
	want := map[string]lambdaadapter.Message{
		seq1: {
			Payload: []byte(`{"id":1}`),
			Headers: lambdaadapter.Headers{
				{Name: "content-type", Value: "application/json"}, {Name: "x-tenant", Value: "acme"},
				{Name: "partition-key", Value: "user-42"}, {Name: "kinesis-sequence-number", Value: seq1},
				{Name: "kinesis-shard-id", Value: "shardId-000000000000"},
			},
			PartitionKey: "user-42", SequenceNumber: seq1, ShardID: "shardId-000000000000",
			StreamARN: streamARN, EventSourceARN: ev.Records[0].EventSourceArn,
			ArrivalTime: ev.Records[0].Kinesis.ApproximateArrivalTimestamp.Time.UTC(), Attempt: 1,
		},
		seq2: {
			Payload: []byte("plain"),
			Headers: lambdaadapter.Headers{
				{Name: "partition-key", Value: "user-43"}, {Name: "kinesis-sequence-number", Value: seq2},
				{Name: "kinesis-shard-id", Value: "shardId-000000000007"},
			},
			PartitionKey: "user-43", SequenceNumber: seq2, ShardID: "shardId-000000000007",
			StreamARN: streamARN, EventSourceARN: ev.Records[1].EventSourceArn,
			ArrivalTime: ev.Records[1].Kinesis.ApproximateArrivalTimestamp.Time.UTC(), Attempt: 1,
		},
		seq3: {
			Payload: []byte("copy"),
			Headers: lambdaadapter.Headers{
				{Name: "x-ruststream-retry-count", Value: "2"},
				{Name: "partition-key", Value: "user-44"}, {Name: "kinesis-sequence-number", Value: seq3},
				{Name: "kinesis-shard-id", Value: "shardId-000000000007"},
			},
			PartitionKey: "user-44", SequenceNumber: seq3, ShardID: "shardId-000000000007",
			StreamARN: streamARN, EventSourceARN: ev.Records[2].EventSourceArn,
			ArrivalTime: ev.Records[2].Kinesis.ApproximateArrivalTimestamp.Time.UTC(), Attempt: 3,
		},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(lambdaadapter.Message{})); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if len(seq1) != 56 {
		t.Errorf("test kit sequence number %q has %d digits, want 56", seq1, len(seq1))
	}
	if got[seq1].Headers.Get("X-Tenant") != "acme" {
		t.Errorf("Header is not case-insensitive")
	}
}

// TestHandleEventMatchesInvoke checks both entry points give the same
// answer.
func TestHandleEventMatchesInvoke(t *testing.T) {
	b := lambdaadaptertest.NewBatch("s").Generate(50, 7, 64, true)
	fail := b.SequenceNumbers()[23]
	h := lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		if m.SequenceNumber == fail {
			return lambdaadapter.Retry(errors.New("no"))
		}
		return lambdaadapter.Ack()
	})
	a, err := lambdaadapter.NewFunction(h)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := a.HandleEvent(t.Context(), b.Event())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	res := lambdaadaptertest.Run(t, h, b)
	if string(raw) != string(res.Raw) || string(raw) != `{"batchItemFailures":[{"itemIdentifier":"`+fail+`"}]}` {
		t.Errorf("HandleEvent %s, Invoke %s", raw, res.Raw)
	}
}

func TestInvokeMalformed(t *testing.T) {
	a, err := lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
		t.Error("handler called on a malformed invocation")
		return lambdaadapter.Ack()
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{`{"Records":[`, `[]`, `{"Records":[{"kinesis":{"data":"!!"}}]}`, ``} {
		out, err := a.Invoke(t.Context(), []byte(in))
		if err == nil || out != nil {
			t.Errorf("Invoke(%q) = %q, %v; want an error", in, out, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "event: ") {
			t.Errorf("Invoke(%q) error %q is not prefixed", in, err)
		}
	}
}

func TestJSON(t *testing.T) {
	type order struct {
		ID int `json:"id"`
	}
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("a", []byte(`{"id":7}`))
	bad := b.Add("b", []byte(`{"id":"seven"}`))
	b.Add("c", []byte(`not json`))
	var mu sync.Mutex
	var ids []int
	h := lambdaadapter.JSON(func(_ context.Context, o order, _ *lambdaadapter.Message) lambdaadapter.Outcome {
		mu.Lock()
		ids = append(ids, o.ID)
		mu.Unlock()
		return lambdaadapter.Ack()
	})
	res := lambdaadaptertest.Run(t, h, b)
	if !res.AllSettled() {
		t.Errorf("poison records must be dropped, not retried: %v", res.Failures)
	}
	if diff := cmp.Diff([]int{7}, ids); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	// The drop reason names the type and the decode error.
	var got lambdaadapter.Outcome
	inner := lambdaadapter.JSON(func(context.Context, order, *lambdaadapter.Message) lambdaadapter.Outcome { return lambdaadapter.Ack() })
	got = inner.HandleRecord(t.Context(), &lambdaadapter.Message{Payload: []byte(`{"id":"seven"}`), SequenceNumber: bad})
	if got.Kind().String() != "drop" || !strings.Contains(got.Err().Error(), "lambdaadapter_test.order") {
		t.Errorf("outcome %v", got)
	}
}

func TestNewValidates(t *testing.T) {
	h := lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome { return lambdaadapter.Ack() })
	tests := []struct {
		name string
		opt  lambdaadapter.FunctionOption
		ok   bool
	}{
		{"concurrency 1", lambdaadapter.WithConcurrency(1), true},
		{"concurrency 0", lambdaadapter.WithConcurrency(0), false},
		{"concurrency -3", lambdaadapter.WithConcurrency(-3), false},
		{"margin 1ms", lambdaadapter.WithDeadlineMargin(time.Millisecond), true},
		{"margin 0", lambdaadapter.WithDeadlineMargin(0), false},
		{"margin negative", lambdaadapter.WithDeadlineMargin(-time.Second), false},
		{"nil logger is discard", lambdaadapter.WithLogger(nil), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lambdaadapter.NewFunction(h, tt.opt)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "lambdaadapter: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
	defer func() {
		if p := recover(); p == nil || !strings.HasPrefix(fmt.Sprint(p), "lambdaadapter: ") {
			t.Errorf("nil handler: recover() = %v", p)
		}
	}()
	_, _ = lambdaadapter.NewFunction(nil)
}
