package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/message"
)

// TestSpareWatermark: an invocation whose handlers all returned leaves its
// sealed watermark for the next, whose shard takes its array; each
// invocation still reports exactly its own unsettled record.
func TestSpareWatermark(t *testing.T) {
	fail := "" // the sequence number the handler leaves unsettled
	e, err := engine.New(engine.Config{Handler: message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
		if m.SequenceNumber == fail {
			return message.Retry(errors.New("again"))
		}
		return message.Ack()
	})})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRunner(Config{Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	invoke := func(first, n int) string {
		var ev events.KinesisEvent
		for i := range n {
			var rec events.KinesisEventRecord
			rec.EventSource, rec.EventSourceArn = "aws:kinesis", "arn:aws:kinesis:eu-west-1:123456789012:stream/s"
			rec.EventID = fmt.Sprintf("shardId-000000000000:%d", first+i)
			rec.Kinesis.SequenceNumber = fmt.Sprint(first + i)
			rec.Kinesis.PartitionKey = fmt.Sprint("k", i%7)
			rec.Kinesis.Data = []byte("d")
			rec.Kinesis.ApproximateArrivalTimestamp = events.SecondsEpochTime{Time: time.Unix(1, 0)}
			ev.Records = append(ev.Records, rec)
		}
		payload, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Invoke(context.Background(), payload)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	fail = "1150"
	if got, want := invoke(1000, 300), `{"batchItemFailures":[{"itemIdentifier":"1150"}]}`; got != want {
		t.Fatalf("first invocation = %s, want %s", got, want)
	}
	spare := r.spare.Load()
	if spare == nil || spare.Pending() != 0 {
		t.Fatal("the invocation left no sealed watermark for the next")
	}
	fail = "2001"
	if got, want := invoke(2000, 200), `{"batchItemFailures":[{"itemIdentifier":"2001"}]}`; got != want {
		t.Fatalf("second invocation = %s, want %s", got, want)
	}
	if next := r.spare.Load(); next == nil || next == spare {
		t.Fatal("the second invocation did not take the spare and leave its own")
	}
	if _, ok := spare.FirstUnsettled(); ok {
		t.Error("the spare watermark holds a delivery after its array was taken")
	}
	fail = ""
	if got, want := invoke(3000, 100), `{"batchItemFailures":[]}`; got != want {
		t.Fatalf("third invocation = %s, want %s", got, want)
	}
}
