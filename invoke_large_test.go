package lambdaadapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/settle"
)

// largeBatch is 2,000 records, many build chunks, on two shards in runs of
// 100: what Lambda sends is one shard, but Invoke takes any.
func largeBatch() (*lambdaadaptertest.Batch, []string) {
	b := lambdaadaptertest.NewBatch("s")
	seqs := make([]string, 2000)
	for i := range seqs {
		shard := (i / 100) % 2
		b.OnShard(fmt.Sprintf("shardId-%012d", shard))
		// A partition key belongs to one shard, as in Kinesis.
		seqs[i] = b.Add(fmt.Sprintf("s%d-k%d", shard, i%50), []byte("x"))
	}
	return b, seqs
}

// TestInvokeLargeBatchResponse: a Retry on one record of each shard, both
// in late chunks, is what the response names, and every record is handled.
func TestInvokeLargeBatchResponse(t *testing.T) {
	b, seqs := largeBatch()
	retry := map[string]bool{seqs[1250]: true, seqs[1503]: true} // shard 0, shard 1
	var mu sync.Mutex
	handled := map[string]int{}
	a, err := lambdaadapter.New(lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		mu.Lock()
		handled[m.SequenceNumber]++
		mu.Unlock()
		if retry[m.SequenceNumber] {
			return lambdaadapter.Retry(errors.New("not yet"))
		}
		return lambdaadapter.Ack()
	}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.Invoke(t.Context(), b.JSON())
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		BatchItemFailures []struct{ ItemIdentifier string } `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range resp.BatchItemFailures {
		got = append(got, f.ItemIdentifier)
	}
	slices.Sort(got)
	want := []string{seqs[1250], seqs[1503]}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("failures %q, want %q", got, want)
	}
	// Every record before a retried one of its shard was handled once;
	// the rest of its key may or may not have been started.
	for i, s := range seqs[:1250] {
		if handled[s] != 1 {
			t.Fatalf("record %d handled %d times", i, handled[s])
		}
	}
}

// TestInvokeLargeUntrustworthyBatch: a record far into a large invocation
// whose sequence number does not grow, or is not a sequence number, makes
// the invocation fail before any handler runs.
func TestInvokeLargeUntrustworthyBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int
		seq  func(prev string) string
		want error
	}{
		{"repeated", 1950, func(prev string) string { return prev }, settle.ErrOutOfOrder},
		{"leading zero", 1701, func(prev string) string { return "0" + prev }, settle.ErrInvalidSequence},
		{"going back", 1999, func(prev string) string { return "3" + prev[1:] }, settle.ErrOutOfOrder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := largeBatch()
			ev := b.Event()
			// The previous record, of the same shard (runs of 100).
			if tc.at%100 == 0 {
				t.Fatal("test setup: the previous record is on another shard")
			}
			prev := ev.Records[tc.at-1].Kinesis.SequenceNumber
			r := &ev.Records[tc.at]
			r.Kinesis.SequenceNumber = tc.seq(prev)
			r.EventID = r.EventID[:len("shardId-000000000000:")] + r.Kinesis.SequenceNumber
			payload, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			a, err := lambdaadapter.New(lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
				t.Error("handler called on an untrustworthy invocation")
				return lambdaadapter.Ack()
			}))
			if err != nil {
				t.Fatal(err)
			}
			out, err := a.Invoke(t.Context(), payload)
			if !errors.Is(err, tc.want) || out != nil {
				t.Fatalf("Invoke = %q, %v; want %v", out, err, tc.want)
			}
			if want := fmt.Sprintf("lambda: record %d ", tc.at); len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
				t.Errorf("error %q does not name record %d", err, tc.at)
			}
		})
	}
}
