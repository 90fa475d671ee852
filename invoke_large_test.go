package lambdaadapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/internal/settle"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
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
	a, err := lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
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
			a, err := lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
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

// copyMessage is a deep copy of m's exported fields.
func copyMessage(m *lambdaadapter.Message) lambdaadapter.Message {
	c := *m
	c.Payload = append([]byte(nil), m.Payload...)
	c.Headers = m.Headers.Clone()
	return c
}

// collect returns a handler that keeps a copy of every message it gets.
func collect() (lambdaadapter.Handler, func() map[string]lambdaadapter.Message) {
	var mu sync.Mutex
	got := map[string]lambdaadapter.Message{}
	h := lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		mu.Lock()
		got[m.ShardID+"/"+m.SequenceNumber] = copyMessage(m)
		mu.Unlock()
		return lambdaadapter.Ack()
	})
	return h, func() map[string]lambdaadapter.Message {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(got)
	}
}

// TestInvokeReusedStorageIsClean: an adapter reuses the storage of an
// invocation's messages in the next one; the messages of that next one
// are exactly what a fresh adapter gives, whatever the one before held
// (headers, attempts, more records).
func TestInvokeReusedStorageIsClean(t *testing.T) {
	first := lambdaadaptertest.NewBatch("s")
	for i := range 700 {
		first.Add(fmt.Sprintf("k%d", i%20), []byte(fmt.Sprintf("first-%d", i)), "x-a", "1", "x-ruststream-retry-count", "4")
	}
	second := lambdaadaptertest.NewBatch("t").OnShard("shardId-000000000009")
	for i := range 300 {
		second.AddRaw(fmt.Sprintf("j%d", i%7), []byte(fmt.Sprintf("second-%d", i)))
	}
	h, got := collect()
	a, err := lambdaadapter.NewFunction(h)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.Invoke(t.Context(), first.JSON()); err != nil {
			t.Fatal(err)
		}
	}
	before := got()
	if _, err := a.Invoke(t.Context(), second.JSON()); err != nil {
		t.Fatal(err)
	}
	reused := got()
	for s := range before {
		delete(reused, s)
	}
	fh, fresh := collect()
	b, err := lambdaadapter.NewFunction(fh)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Invoke(t.Context(), second.JSON()); err != nil {
		t.Fatal(err)
	}
	if len(reused) != 300 {
		t.Fatalf("%d messages from the second batch, want 300", len(reused))
	}
	if diff := cmp.Diff(fresh(), reused, cmpopts.IgnoreUnexported(lambdaadapter.Message{})); diff != "" {
		t.Errorf("messages after reuse differ from a fresh adapter's (-fresh +reused):\n%s", diff)
	}
}

// TestInvokeCutOffKeepsStorage: an invocation cut off at its deadline
// leaves a handler running; the next invocation must not reuse the storage
// of that handler's message (run with -race too).
func TestInvokeCutOffKeepsStorage(t *testing.T) {
	// In a bubble: the deadline passes in virtual time once every lane
	// but the hung handler's is idle, whatever the machine's speed.
	synctest.Test(t, func(t *testing.T) {
		first := lambdaadaptertest.NewBatch("s")
		var stuck string
		for i := range 300 {
			seq := first.Add(fmt.Sprintf("k%d", i%20), []byte(fmt.Sprintf("first-%d", i)), "x-a", "1")
			if i == 5 {
				stuck = seq
			}
		}
		second := lambdaadaptertest.NewBatch("t").OnShard("shardId-000000000003") // other sequence numbers
		for i := range 600 {
			second.Add(fmt.Sprintf("j%d", i%7), []byte(fmt.Sprintf("second-%d", i)), "x-b", "2")
		}
		release := make(chan struct{})
		started := make(chan lambdaadapter.Message, 1)
		checked := make(chan string, 1)
		a, err := lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
			if m.SequenceNumber == stuck && m.ShardID == "shardId-000000000000" {
				started <- copyMessage(m)
				<-release // ignores its context, as a hung handler does
				checked <- cmp.Diff(<-started, copyMessage(m), cmpopts.IgnoreUnexported(lambdaadapter.Message{}))
			}
			return lambdaadapter.Ack()
		}), lambdaadapter.WithDeadlineMargin(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		out, err := a.Invoke(ctx, first.JSON())
		if err != nil || !strings.Contains(string(out), stuck) {
			t.Fatalf("cut-off invocation = %s, %v; want %s reported", out, err, stuck)
		}
		m := <-started
		started <- m
		for range 3 {
			if _, err := a.Invoke(t.Context(), second.JSON()); err != nil {
				t.Fatal(err)
			}
		}
		close(release)
		if diff := <-checked; diff != "" {
			t.Errorf("the running handler's message changed under it (-before +after):\n%s", diff)
		}
	})
}

// TestInvokeKeptMessageReply: a handler that keeps its Message (against
// its contract) and replies after the invocation ended gets
// ErrReplyAfterReturn, as in long-running mode: the adapter recycled the
// message's storage for the next invocation (engine.Recycle), which both
// modes do the same way.
func TestInvokeKeptMessageReply(t *testing.T) {
	var kept *lambdaadapter.Message
	a, err := lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		kept = m
		return lambdaadapter.Ack()
	}))
	if err != nil {
		t.Fatal(err)
	}
	batch := lambdaadaptertest.NewBatch("s")
	batch.Add("k", []byte("p"))
	if _, err := a.Invoke(t.Context(), batch.JSON()); err != nil {
		t.Fatal(err)
	}
	if err := kept.Reply(t.Context(), lambdaadapter.Reply{Payload: []byte("late")}); !errors.Is(err, lambdaadapter.ErrReplyAfterReturn) {
		t.Errorf("reply after the invocation: %v, want ErrReplyAfterReturn", err)
	}
}

// TestInvokeLargeLateSurprises: a large invocation whose deliveries are
// built while it is decoded (see lambda.Runner.Invoke) behaves like a
// small one when a late record spoils what was built: data that is not
// base64 fails the invocation before any handler runs, and a KPL
// aggregate is handed out as its user records.
func TestInvokeLargeLateSurprises(t *testing.T) {
	t.Run("bad data", func(t *testing.T) {
		b, _ := largeBatch()
		ev := b.Event()
		payload, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		// The data of the last record, "x", is "eA==" in the payload.
		i := strings.LastIndex(string(payload), `"eA=="`)
		payload = []byte(string(payload[:i]) + `"e!=="` + string(payload[i+len(`"eA=="`):]))
		a, err := lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
			t.Error("handler called on an invocation with bad data")
			return lambdaadapter.Ack()
		}))
		if err != nil {
			t.Fatal(err)
		}
		if out, err := a.Invoke(t.Context(), payload); err == nil || out != nil || !strings.Contains(err.Error(), "record 1999") {
			t.Fatalf("Invoke = %q, %v; want an error naming record 1999", out, err)
		}
	})
	t.Run("aggregate", func(t *testing.T) {
		b, seqs := largeBatch()
		b.OnShard("shardId-000000000001")
		agg := b.AddAggregate(lambdaadaptertest.UserRecord{PartitionKey: "u1", Payload: []byte("one")}, lambdaadaptertest.UserRecord{PartitionKey: "u2", Payload: []byte("two")})
		h, got := collect()
		a, err := lambdaadapter.NewFunction(h)
		if err != nil {
			t.Fatal(err)
		}
		out, err := a.Invoke(t.Context(), b.JSON())
		if err != nil || string(out) != `{"batchItemFailures":[]}` {
			t.Fatalf("Invoke = %q, %v", out, err)
		}
		msgs := got()
		if len(msgs) != len(seqs)+1 { // the user records share their sequence number
			t.Errorf("%d distinct sequence numbers handled, want %d", len(msgs), len(seqs)+1)
		}
		if m, ok := msgs["shardId-000000000001/"+agg]; !ok || !m.Aggregated {
			t.Errorf("aggregate %s handled as %+v (found %v), want a user record", agg, m, ok)
		}
	})
}
