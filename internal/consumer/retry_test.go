package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/internal/retry"
	"github.com/shardsettle/lambdaadapter/internal/settle"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// failPayload adapts a failure rule on the record's payload (its RSK1
// envelope opened) to awsfake.Kinesis.Fail.
func failPayload(f func(p []byte) string) func(stream, key string, data []byte) string {
	return func(_, _ string, data []byte) string {
		_, p := envelope.Decode(data)
		return f(p)
	}
}

// TestCopiesBatched: 1,000 retries with a cap become 1,000 counted copies
// written with a few PutRecords calls (not 1,000 PutRecord), and every
// record settles once its copy is written.
func TestCopiesBatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		last := f.fill(1, 1000)
		k := awsfake.NewKinesis() // copies go here, not back to f
		k.Delay = 20 * time.Millisecond
		store := lease.NewMemory()
		h := newRecorder()
		h.outcome = func(*message.Message) message.Outcome { return message.Retry(errors.New("not yet")) }
		_, stop := run(t, Config{StreamARN: f.arn, Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1"},
			engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 3}, Publisher: newPublisher(t, k)})
		waitFor(t, "1,000 copies", func() bool { return len(k.Written()) == 1000 })
		time.Sleep(2 * time.Second) // a checkpoint interval
		if cp, want := checkpointOf(t, store, shardID(0)), last[shardID(0)]; cp != want {
			t.Errorf("checkpoint %s, want the last record %s: every record settles once copied", cp, want)
		}
		stop()
		if n := k.Calls("PutRecord"); n != 0 {
			t.Errorf("%d PutRecord calls, want every copy in a PutRecords batch", n)
		}
		if n := k.Calls("PutRecords"); n > 20 {
			t.Errorf("%d PutRecords calls for 1,000 copies, want at most 20", n)
		}
		seen := map[string]bool{}
		for _, w := range k.Written() {
			if w.Stream != f.arn || w.Headers.Get(envelope.RetryCountHeader) != "1" || w.Headers.Get(publish.FirstArrivalHeader) == "" {
				t.Fatalf("copy to %s with headers %v, want the source stream, %s 1 and a first arrival", w.Stream, w.Headers, envelope.RetryCountHeader)
			}
			seen[string(w.Payload)] = true
		}
		if len(seen) != 1000 {
			t.Errorf("%d distinct payloads copied, want 1,000", len(seen))
		}
	})
}

// TestCopiesComeRound: counted copies written back to the stream are read
// again with their attempt, until the cap retires them.
func TestCopiesComeRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		f.put(shardID(0), "k", "again")
		h := newRecorder()
		h.outcome = func(*message.Message) message.Outcome { return message.Retry(nil) }
		_, stop := run(t, Config{StreamARN: f.arn, Kinesis: f, Start: TrimHorizon(), Owner: "w1"},
			engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 3}, Publisher: newPublisher(t, f)})
		waitFor(t, "three attempts", func() bool { return len(h.attempts("again")) == 3 })
		time.Sleep(10 * time.Second)
		stop()
		if got := h.attempts("again"); !slices.Equal(got, []int{1, 2, 3}) {
			t.Errorf("attempts %v, want 1, 2, 3 (then retired at the cap)", got)
		}
		if n := len(f.Written()); n != 2 {
			t.Errorf("%d copies written, want 2", n)
		}
	})
}

// TestCopyFailureDeliveredAgain (fault: a copy that could not be written
// stalled its shard until the lease moved; review fault 5f: a write that
// failed re-ran the handler and counted an attempt, so write failures alone
// could retire a record): the write is made again after a backoff, holding
// the checkpoint meanwhile, without running the handler again or counting
// an attempt; once the copy is written the record settles.
func TestCopyFailureDeliveredAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		seqs := f.putNumbered(id, 20, true)
		k := awsfake.NewKinesis()
		var failing atomic.Bool
		failing.Store(true)
		k.Fail = failPayload(func(p []byte) string {
			if string(p) == "r10" && failing.Load() {
				return "InvalidArgumentException" // not retried by the publisher
			}
			return ""
		})
		store := lease.NewMemory()
		h := newRecorder()
		h.outcome = func(m *message.Message) message.Outcome {
			if string(m.Payload) == "r10" {
				return message.Retry(errors.New("poison"))
			}
			return message.Ack()
		}
		_, stop := run(t, Config{StreamARN: f.arn, Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", RetryBackoff: time.Second, MaxRetryBackoff: 2 * time.Second},
			engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 10}, Publisher: newPublisher(t, k)})
		waitFor(t, "the copy tried three times", func() bool { return k.Calls("PutRecords") >= 3 })
		time.Sleep(2 * time.Second)
		if cp := checkpointOf(t, store, id); cp != seqs[9] {
			t.Errorf("checkpoint %s, want %s (just before the record whose copy failed)", cp, seqs[9])
		}
		failing.Store(false)
		waitFor(t, "the copy", func() bool { return len(k.Written()) == 1 })
		time.Sleep(2 * time.Second)
		if cp := checkpointOf(t, store, id); cp != seqs[19] {
			t.Errorf("checkpoint %s, want %s once the copy was written", cp, seqs[19])
		}
		stop()
		if got := h.attempts("r10"); !slices.Equal(got, []int{1}) {
			t.Errorf("r10 handled with attempts %v, want [1]: a failed write is made again, the handler does not run again", got)
		}
		if w := k.Written()[0]; w.Headers.Get(envelope.RetryCountHeader) != "1" {
			t.Errorf("copy count %s, want 1", w.Headers.Get(envelope.RetryCountHeader))
		}
	})
}

// TestRetryOnClosedParentHeals (fault: an uncounted Retry on a closed
// parent stalled its children for ever): the record is delivered again in
// process, and once it settles the parent ends and the children are read.
func TestRetryOnClosedParentHeals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		parent := shardID(0)
		f.putNumbered(parent, 5, true)
		a, b := f.Split(testStream, parent)
		f.put(a, "k", "child-a")
		f.put(b, "k", "child-b")
		store := lease.NewMemory()
		h := newRecorder()
		h.outcome = func(m *message.Message) message.Outcome {
			if string(m.Payload) == "r2" && m.Attempt < 4 {
				return message.Retry(errors.New("transient"))
			}
			return message.Ack()
		}
		_, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", ListInterval: 2 * time.Second, RetryBackoff: time.Second}, handler(h))
		waitFor(t, "the children", func() bool { return h.on(a) == 1 && h.on(b) == 1 })
		stop()
		if got := h.attempts("r2"); !slices.Equal(got, []int{1, 2, 3, 4}) {
			t.Errorf("r2 attempts %v, want 1..4", got)
		}
		if cp := checkpointOf(t, store, parent); cp != lease.ShardEnd {
			t.Errorf("parent checkpoint %q, want SHARD_END", cp)
		}
	})
}

// TestDeadLetterAtCap: a record at its last attempt goes to the dead-letter
// stream with its payload and headers, and settles.
func TestDeadLetterAtCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		h0 := envelope.Headers{}
		h0.Set(envelope.RetryCountHeader, "2")
		h0.Set("tenant", "acme")
		data, err := envelope.Encode(h0, []byte("poison"))
		if err != nil {
			t.Fatal(err)
		}
		seq := f.put(id, "k", string(data))
		k := awsfake.NewKinesis()
		store := lease.NewMemory()
		h := newRecorder()
		h.outcome = func(*message.Message) message.Outcome { return message.Retry(errors.New("still broken")) }
		_, stop := run(t, Config{StreamARN: f.arn, Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1"},
			engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 3}, Publisher: newPublisher(t, k), DeadLetterStream: "dl"})
		waitFor(t, "the dead letter", func() bool { return len(k.Written()) == 1 })
		time.Sleep(2 * time.Second)
		stop()
		w := k.Written()[0]
		if w.Stream != "dl" || string(w.Payload) != "poison" || w.Headers.Get("tenant") != "acme" ||
			w.Headers.Get(publish.DeadLetterAttemptsHeader) != "3" || !strings.Contains(w.Headers.Get(publish.DeadLetterReasonHeader), "still broken") {
			t.Errorf("dead letter to %s: payload %q headers %v", w.Stream, w.Payload, w.Headers)
		}
		if cp := checkpointOf(t, store, id); cp != seq {
			t.Errorf("checkpoint %s, want %s: a dead-lettered record settles", cp, seq)
		}
	})
}

// TestRetryAfterSettlesOnceCopied: RetryAfter(d) holds the checkpoint until
// the delayed copy is written d later; with a delay queue, until the delay
// message is sent.
func TestRetryAfterSettlesOnceCopied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		seq := f.put(id, "k", "later")
		k := awsfake.NewKinesis()
		store := lease.NewMemory()
		h := newRecorder()
		h.outcome = func(*message.Message) message.Outcome { return message.RetryAfter(10*time.Second, nil) }
		_, stop := run(t, Config{StreamARN: f.arn, Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1"},
			engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 3, MaxInProcessDelay: time.Minute}, Publisher: newPublisher(t, k)})
		waitFor(t, "the record", func() bool { return h.count() == 1 })
		time.Sleep(5 * time.Second)
		if cp := checkpointOf(t, store, id); cp != "" || len(k.Written()) != 0 {
			t.Errorf("5 s into a 10 s delay: checkpoint %q, %d written; want none yet", cp, len(k.Written()))
		}
		time.Sleep(7 * time.Second)
		if cp := checkpointOf(t, store, id); cp != seq || len(k.Written()) != 1 {
			t.Errorf("after the delay: checkpoint %q, %d written; want %s and the copy", cp, len(k.Written()), seq)
		}
		stop()
	})
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		seq := f.put(id, "k", "much later")
		q := &fakeQueue{}
		queue, err := publish.NewQueue(q)
		if err != nil {
			t.Fatal(err)
		}
		store := lease.NewMemory()
		h := newRecorder()
		h.outcome = func(*message.Message) message.Outcome { return message.RetryAfter(time.Hour, nil) }
		_, stop := run(t, Config{StreamARN: f.arn, Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1"},
			engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 3}, Queue: queue, DelayQueue: "https://sqs.us-east-1.amazonaws.com/000000000000/delays",
				Publisher: newPublisher(t, awsfake.NewKinesis())})
		waitFor(t, "the delay message", func() bool { return len(q.snapshot()) == 1 })
		time.Sleep(2 * time.Second)
		if cp := checkpointOf(t, store, id); cp != seq {
			t.Errorf("checkpoint %q, want %s once the delay message is sent", cp, seq)
		}
		stop()
		if d, ok, err := publish.ParseDelayed([]byte(q.snapshot()[0].body)); err != nil || !ok || string(d.Payload) != "much later" || d.Headers.Get(envelope.RetryCountHeader) != "1" {
			t.Errorf("delay message %+v, %v, %v", d, ok, err)
		}
	})
}

// TestShutdownWithCopiesQueued: a graceful stop while copies are still
// queued loses nothing: every record is either copied or after the final
// checkpoint (it comes again).
func TestShutdownWithCopiesQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(2)
		f.fill(2, 500)
		k := awsfake.NewKinesis()
		k.Delay = 700 * time.Millisecond
		k.Fail = failPayload(func(p []byte) string { // one copy of the early ones fails
			if string(p) == shardID(0)+"-3" {
				return "InternalFailure"
			}
			return ""
		})
		store := lease.NewMemory()
		h := newRecorder()
		h.outcome = func(*message.Message) message.Outcome { return message.Retry(errors.New("again")) }
		_, stop := run(t, Config{StreamARN: f.arn, Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", ShutdownTimeout: 200 * time.Millisecond},
			engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 3}, Publisher: newPublisher(t, k)})
		waitFor(t, "1,000 records", func() bool { return h.count() >= 1000 })
		waitFor(t, "the first copies", func() bool { return len(k.Written()) > 0 })
		stop()
		copied := map[string]bool{}
		for _, w := range k.Written() {
			copied[string(w.Payload)] = true
		}
		if len(copied) == 1000 || len(copied) == 0 {
			t.Fatalf("%d copies written before the stop; the test needs some but not all", len(copied))
		}
		for s := range 2 {
			id := shardID(s)
			cp := checkpointOf(t, store, id)
			for _, r := range f.Records(testStream) {
				if r.ShardID == id && !copied[string(r.Payload)] && cp != "" && settle.CompareSequence(r.SequenceNumber, cp) <= 0 {
					t.Fatalf("%s: record %s neither copied nor after the checkpoint %s: lost", id, r.SequenceNumber, cp)
				}
			}
		}
	})
}

// TestCopiesFindTheStream: configured with the stream's name only, the
// consumer learns its ARN (DescribeStreamSummary) for messages and copies,
// or, with a client that cannot describe streams, copies by name.
func TestCopiesFindTheStream(t *testing.T) {
	for _, tc := range []struct {
		name     string
		describe bool
	}{{"described", true}, {"by name", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newStream(1)
				f.put(shardID(0), "k", "again")
				var kin KinesisAPI = f
				want := f.arn
				if !tc.describe {
					kin = readOnly{f}
					want = testStream
				}
				k := awsfake.NewKinesis()
				h := newRecorder()
				var arn atomic.Value
				h.outcome = func(m *message.Message) message.Outcome {
					arn.Store(m.StreamARN)
					return message.Retry(nil)
				}
				_, stop := run(t, Config{Kinesis: kin, Start: TrimHorizon(), Owner: "w1"},
					engineConfig{Handler: h, Policy: retry.Policy{MaxAttempts: 3}, Publisher: newPublisher(t, k)})
				waitFor(t, "the copy", func() bool { return len(k.Written()) == 1 })
				stop()
				if got := k.Written()[0].Stream; got != want || arn.Load() != want {
					t.Errorf("copy written to %q, Message.StreamARN %q; want %q", got, arn.Load(), want)
				}
			})
		})
	}
}

// readOnly offers only the read calls of KinesisAPI (no
// DescribeStreamSummary).
type readOnly struct{ k KinesisAPI }

func (r readOnly) ListShards(ctx context.Context, in *kinesis.ListShardsInput, o ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return r.k.ListShards(ctx, in, o...)
}
func (r readOnly) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, o ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return r.k.GetShardIterator(ctx, in, o...)
}
func (r readOnly) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, o ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	return r.k.GetRecords(ctx, in, o...)
}

// TestForwardDelays: the long-running mode forwards its own delay queue: a
// due message becomes a record of its stream and is deleted; one due in an
// hour goes round the queue again (900 s); a foreign message is left for
// the redrive policy; a message whose record cannot be written stays and
// is forwarded when it comes again.
func TestForwardDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const url = "https://sqs.us-east-1.amazonaws.com/000000000000/delays"
		f := newStream(1)
		body := func(payload string, notBefore time.Time) string {
			b, err := publish.Delayed{StreamARN: f.arn, PartitionKey: "k", Payload: []byte(payload), NotBefore: notBefore}.Body()
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		q := &fakeQueue{}
		q.add(body("due", time.Now()), 0)
		q.add(body("in an hour", time.Now().Add(time.Hour)), 0)
		q.add(`{"something":"else"}`, 0)
		q.add(body("flaky", time.Now().Add(2*time.Second)), 2)
		k := awsfake.NewKinesis()
		var failing atomic.Bool
		failing.Store(true)
		k.Fail = failPayload(func(p []byte) string {
			if string(p) == "flaky" && failing.Load() {
				return "InvalidArgumentException" // not retried by the publisher
			}
			return ""
		})
		queue, err := publish.NewQueue(q)
		if err != nil {
			t.Fatal(err)
		}
		_, stop := run(t, Config{StreamARN: f.arn, Kinesis: f, Owner: "w1", DelayReceiver: q},
			engineConfig{Handler: newRecorder(), Publisher: newPublisher(t, k), Queue: queue, DelayQueue: url})
		waitFor(t, "the due record", func() bool { return len(k.Written()) == 1 })
		if w := k.Written()[0]; string(w.Payload) != "due" || w.Stream != f.arn || w.PartitionKey != "k" {
			t.Errorf("forwarded %q to %s with key %s", w.Payload, w.Stream, w.PartitionKey)
		}
		time.Sleep(5 * time.Second) // "flaky" was due and failed
		failing.Store(false)
		waitFor(t, "the flaky record, after its visibility timeout", func() bool { return len(k.Written()) == 2 })
		stop()
		var left []string
		for _, m := range q.snapshot() {
			d, ours, _ := publish.ParseDelayed([]byte(m.body))
			switch {
			case !ours:
				left = append(left, "foreign")
			case string(d.Payload) == "in an hour" && m.delay == 900:
				left = append(left, "in an hour, 900 s")
			default:
				left = append(left, fmt.Sprintf("%s, %d s", d.Payload, m.delay))
			}
		}
		slices.Sort(left)
		if want := []string{"foreign", "in an hour, 900 s"}; !slices.Equal(left, want) {
			t.Errorf("queue holds %v, want %v", left, want)
		}
	})
}

// TestReplies: in long-running mode a handler replies like in Lambda mode:
// to the default reply stream or a named one, with the publisher's key
// rules; a failed reply leaves its record unsettled (the checkpoint stops
// before it, and it is delivered again); a reply after the handler returned
// fails; a batch handler's elements reply on their own.
func TestReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		seqs := f.putNumbered(id, 6, false)
		k := awsfake.NewKinesis()
		k.Fail = failPayload(func(p []byte) string {
			if string(p) == "answer to r3" {
				return "InvalidArgumentException" // not retried
			}
			return ""
		})
		store := lease.NewMemory()
		var late atomic.Pointer[message.Message]
		h := newRecorder()
		h.outcome = func(m *message.Message) message.Outcome {
			r := message.Reply{Payload: []byte("answer to " + string(m.Payload)), PartitionKey: "pk"}
			if string(m.Payload) == "r1" {
				r.Stream = "elsewhere"
			}
			if string(m.Payload) == "r5" {
				late.Store(m)
			}
			if err := m.Reply(t.Context(), r); err != nil && string(m.Payload) != "r3" {
				t.Errorf("reply for %s: %v", m.Payload, err)
			}
			return message.Ack()
		}
		_, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", Concurrency: 1},
			engineConfig{Handler: h, Publisher: newPublisher(t, k), ReplyStream: "replies"})
		waitFor(t, "r3 delivered again", func() bool { return len(h.attempts("r3")) >= 2 })
		time.Sleep(2 * time.Second)
		if cp := checkpointOf(t, store, id); cp != seqs[2] {
			t.Errorf("checkpoint %s, want %s: the record whose reply failed holds it", cp, seqs[2])
		}
		if n := len(h.attempts("r4")) + len(h.attempts("r5")); n != 0 || late.Load() != nil {
			t.Errorf("r4/r5 handled %d times: records of r3's key must wait for it", n)
		}
		stop()
	})
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		f.putNumbered(id, 6, true)
		k := awsfake.NewKinesis()
		var late atomic.Pointer[message.Message]
		hold := make(chan struct{})
		h := newRecorder()
		h.outcome = func(m *message.Message) message.Outcome {
			r := message.Reply{Payload: []byte("answer to " + string(m.Payload)), PartitionKey: "pk"}
			switch string(m.Payload) {
			case "r0":
				late.Store(m)
			case "r1":
				r.Stream = "elsewhere"
			case "r5":
				<-hold // keeps the answer, and so r0's message, in flight
			}
			if err := m.Reply(t.Context(), r); err != nil {
				t.Errorf("reply for %s: %v", m.Payload, err)
			}
			return message.Ack()
		}
		_, stop := run(t, Config{Kinesis: f, Start: TrimHorizon(), Owner: "w1", Concurrency: 2},
			engineConfig{Handler: h, Publisher: newPublisher(t, k), ReplyStream: "replies"})
		waitFor(t, "6 records started", func() bool { return h.count() == 6 })
		synctest.Wait() // every handler but r5's returned
		// r0's handler returned; its message is not reused while r5 of the
		// same answer is in flight (after that it may be: a handler must
		// not keep its Message).
		if err := late.Load().Reply(context.Background(), message.Reply{Payload: []byte("too late")}); !errors.Is(err, message.ErrReplyAfterReturn) {
			t.Errorf("reply after return: %v, want ErrReplyAfterReturn", err)
		}
		close(hold)
		waitFor(t, "6 replies", func() bool { return len(k.Written()) == 6 })
		stop()
		var got []string
		for _, w := range k.Written() {
			got = append(got, w.Stream+" "+w.PartitionKey+" "+string(w.Payload))
		}
		slices.Sort(got) // two lanes: in any order
		want := []string{"elsewhere pk answer to r1", "replies pk answer to r0", "replies pk answer to r2", "replies pk answer to r3", "replies pk answer to r4", "replies pk answer to r5"}
		if !slices.Equal(got, want) {
			t.Errorf("replies written %q, want %q", got, want)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		seq := ""
		for i := range 3 {
			seq = f.put(id, "k", fmt.Sprintf("b%d", i))
		}
		k := awsfake.NewKinesis()
		store := lease.NewMemory()
		bh := BatchHandlerFunc(func(ctx context.Context, ms []*message.Message) []message.Outcome {
			outs := make([]message.Outcome, len(ms))
			for i, m := range ms {
				if err := m.Reply(ctx, message.Reply{Payload: append([]byte("re "), m.Payload...)}); err != nil {
					t.Errorf("batch reply: %v", err)
				}
				outs[i] = message.Ack()
			}
			return outs
		})
		_, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1"},
			engineConfig{BatchHandler: bh, Publisher: newPublisher(t, k), ReplyStream: "replies"})
		waitFor(t, "3 replies", func() bool { return len(k.Written()) == 3 })
		time.Sleep(2 * time.Second)
		stop()
		if cp := checkpointOf(t, store, id); cp != seq {
			t.Errorf("checkpoint %s, want %s", cp, seq)
		}
	})
}
