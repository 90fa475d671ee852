package lambdaadaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// TestEventSourceRules: Lambda's documented handling of a Kinesis partial
// batch response, as the event source applies it.
func TestEventSourceRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKinesis()
		k.CreateStream("s", 1)
		var seqs []string
		for i := range 6 {
			_, seq := k.Put("s", "k", fmt.Appendf(nil, "r%d", i))
			seqs = append(seqs, seq)
		}
		src := &EventSource{StreamARN: "s", Kinesis: k, BatchSize: 4}
		var batches [][]string
		answer := func(ev events.KinesisEvent) ([]byte, error) { return []byte(`{"batchItemFailures":[]}`), nil }
		fn := func(_ context.Context, payload []byte) ([]byte, error) {
			var ev events.KinesisEvent
			if err := json.Unmarshal(payload, &ev); err != nil {
				t.Fatal(err)
			}
			var b []string
			for _, r := range ev.Records {
				b = append(b, r.Kinesis.SequenceNumber)
				if r.EventSourceArn != "arn:aws:kinesis:us-east-1:123456789012:stream/s" || r.Kinesis.ApproximateArrivalTimestamp.IsZero() {
					t.Errorf("record not real-shaped: %+v", r)
				}
			}
			batches = append(batches, b)
			return answer(ev)
		}
		round := func() Stats {
			st, err := src.Round(t.Context(), fn)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		// A function error retries the whole batch.
		answer = func(events.KinesisEvent) ([]byte, error) { return nil, errors.New("boom") }
		round()
		if src.Checkpoint("shardId-000000000000") != "" {
			t.Fatalf("function error checkpointed")
		}
		// An identifier that names no record of the batch: the whole batch again.
		answer = func(events.KinesisEvent) ([]byte, error) {
			return []byte(`{"batchItemFailures":[{"itemIdentifier":"1"}]}`), nil
		}
		round()
		if src.Checkpoint("shardId-000000000000") != "" {
			t.Fatalf("invalid identifier checkpointed")
		}
		// The third record reported: checkpoint just before it, start there.
		answer = func(ev events.KinesisEvent) ([]byte, error) {
			return fmt.Appendf(nil, `{"batchItemFailures":[{"itemIdentifier":%q}]}`, seqs[2]), nil
		}
		round()
		if got := src.Checkpoint("shardId-000000000000"); got != seqs[1] {
			t.Fatalf("checkpoint %s, want the record before the reported one", got)
		}
		answer = func(events.KinesisEvent) ([]byte, error) { return []byte(`{"batchItemFailures":[]}`), nil }
		round()
		if got := batches[len(batches)-1]; got[0] != seqs[2] || len(got) != 4 {
			t.Fatalf("batch after a partial response %v, want 4 from %s", got, seqs[2])
		}
		if got := src.Checkpoint("shardId-000000000000"); got != seqs[5] {
			t.Fatalf("empty list: checkpoint %s, want the batch's last", got)
		}
		if st := round(); st.Invocations != 0 {
			t.Fatalf("nothing left, yet %d invocations", st.Invocations)
		}
		// A batching window gathers records that arrive within it.
		src.BatchWindow = 2 * time.Second
		go func() {
			for i := range 3 {
				time.Sleep(500 * time.Millisecond)
				k.Put("s", "k", fmt.Appendf(nil, "late%d", i))
			}
		}()
		time.Sleep(100 * time.Millisecond)
		k.Put("s", "k", []byte("first"))
		round()
		if got := batches[len(batches)-1]; len(got) != 4 {
			t.Fatalf("batching window gathered %d records, want 4", len(got))
		}
	})
}
