package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/internal/retry"
	"github.com/shardsettle/lambdaadapter/internal/settle"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
)

const testARN = "arn:aws:kinesis:us-east-1:123456789012:stream/orders"

func TestCopyOf(t *testing.T) {
	const origin = "shardId-000000000001#4959#0"
	tests := []struct {
		name        string
		headers     envelope.Headers
		attempt     int
		sub         int
		wantHeaders envelope.Headers
	}{
		{
			name: "first copy",
			headers: envelope.Headers{
				{Name: "content-type", Value: "application/json"},
				{Name: "partition-key", Value: "user-42"},
				{Name: "kinesis-sequence-number", Value: "4959"},
				{Name: "kinesis-shard-id", Value: "shardId-000000000001"},
			},
			attempt: 1,
			wantHeaders: envelope.Headers{{Name: "content-type", Value: "application/json"}, {Name: "x-ruststream-retry-count", Value: "1"},
				{Name: publish.FirstArrivalHeader, Value: "2026-01-02T03:04:05.678Z"}, {Name: publish.OriginHeader, Value: origin}},
		},
		{
			name: "first copy of a KPL user record",
			headers: envelope.Headers{
				{Name: "kinesis-sequence-number", Value: "4959"},
				{Name: "kinesis-sub-sequence-number", Value: "3"},
			},
			attempt: 1, sub: 3,
			wantHeaders: envelope.Headers{{Name: "x-ruststream-retry-count", Value: "1"},
				{Name: publish.FirstArrivalHeader, Value: "2026-01-02T03:04:05.678Z"}, {Name: publish.OriginHeader, Value: "shardId-000000000001#4959#3"}},
		},
		{
			name: "counted copy, in place",
			headers: envelope.Headers{{Name: "x-ruststream-retry-count", Value: "3"}, {Name: "x-a", Value: "1"}, {Name: "partition-key", Value: "user-42"},
				{Name: publish.FirstArrivalHeader, Value: "2025-01-01T00:00:00.000Z"}, {Name: publish.OriginHeader, Value: "shardId-000000000000#1234#2"}},
			attempt: 4,
			wantHeaders: envelope.Headers{{Name: "x-ruststream-retry-count", Value: "4"}, {Name: "x-a", Value: "1"},
				{Name: publish.FirstArrivalHeader, Value: "2025-01-01T00:00:00.000Z"}, {Name: publish.OriginHeader, Value: "shardId-000000000000#1234#2"}},
		},
		{
			name:    "in-process redeliveries count",
			headers: envelope.Headers{{Name: "X-Ruststream-Retry-Count", Value: "1"}},
			attempt: 5,
			wantHeaders: envelope.Headers{{Name: "X-Ruststream-Retry-Count", Value: "5"}, {Name: publish.FirstArrivalHeader, Value: "2026-01-02T03:04:05.678Z"},
				{Name: publish.OriginHeader, Value: origin}},
		},
		{
			name:    "saturated count",
			headers: envelope.Headers{{Name: "x-ruststream-retry-count", Value: "99999999999999999999999"}},
			attempt: math.MaxInt,
			wantHeaders: envelope.Headers{{Name: "x-ruststream-retry-count", Value: "9223372036854775807"}, {Name: publish.FirstArrivalHeader, Value: "2026-01-02T03:04:05.678Z"},
				{Name: publish.OriginHeader, Value: origin}},
		},
	}
	arrival := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &message.Message{Payload: []byte("payload"), Headers: tt.headers, PartitionKey: "user-42", SequenceNumber: "4959",
				ShardID: "shardId-000000000001", StreamARN: testARN, Attempt: tt.attempt, ArrivalTime: arrival,
				Aggregated: tt.sub > 0, SubSequenceNumber: tt.sub}
			before := tt.headers.Clone()
			r := engine.CopyOf(m)
			want := publish.Record{Stream: testARN, PartitionKey: "user-42", Headers: tt.wantHeaders, Payload: []byte("payload")}
			if diff := cmp.Diff(want, r); diff != "" {
				t.Errorf("CopyOf (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, m.Headers); diff != "" {
				t.Errorf("CopyOf changed the message's headers (-before +after):\n%s", diff)
			}
		})
	}
}

// TestDeadLetterOfCopy: a copy's dead letter moves the first arrival into
// FirstArrival and leaves the origin header out (a dead letter written back
// to the stream is a new record, not the original's copy).
func TestDeadLetterOfCopy(t *testing.T) {
	m := &message.Message{Payload: []byte("p"), PartitionKey: "k", SequenceNumber: "5000", ShardID: "shardId-000000000001", StreamARN: testARN, Attempt: 3,
		Headers: envelope.Headers{{Name: "x-a", Value: "1"}, {Name: "x-ruststream-retry-count", Value: "2"},
			{Name: publish.FirstArrivalHeader, Value: "2025-01-01T00:00:00.000Z"}, {Name: publish.OriginHeader, Value: "shardId-000000000001#4959#0"}}}
	dl := engine.DeadLetterOf(m, "cap", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	want := envelope.Headers{{Name: "x-a", Value: "1"}, {Name: "x-ruststream-retry-count", Value: "2"}}
	if diff := cmp.Diff(want, dl.Headers); diff != "" {
		t.Errorf("dead letter headers (-want +got):\n%s", diff)
	}
	if !dl.FirstArrival.Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) || dl.SequenceNumber != "5000" {
		t.Errorf("dead letter first arrival %v, sequence number %s", dl.FirstArrival, dl.SequenceNumber)
	}
}

// world is one engine with fakes, and helpers to run sessions.
type world struct {
	k   *awsfake.Kinesis
	sqs *awsfake.SQS
	cfg engine.Config
}

func newWorld(t *testing.T, h message.Handler) *world {
	t.Helper()
	w := &world{k: awsfake.NewKinesis(), sqs: awsfake.NewSQS()}
	pub, err := publish.NewPublisher(w.k)
	if err != nil {
		t.Fatal(err)
	}
	q, err := publish.NewQueue(w.sqs)
	if err != nil {
		t.Fatal(err)
	}
	w.cfg = engine.Config{Handler: h, Publisher: pub, Queue: q}
	return w
}

func (w *world) engine(t *testing.T) *engine.Engine {
	t.Helper()
	e, err := engine.New(w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// shardOf registers n records on a new shard id: record i has sequence
// number 1000+i, key keys(i) and payload "r<i>".
func shardOf(t *testing.T, id string, n int, keys func(int) string) (*engine.Shard, []engine.Delivery) {
	t.Helper()
	sh := engine.NewShard(id, engine.Hooks{})
	ds := make([]engine.Delivery, n)
	for i := range ds {
		ds[i].Msg = message.Message{
			Payload: []byte(fmt.Sprintf("r%d", i)), PartitionKey: keys(i), SequenceNumber: fmt.Sprint(1000 + i),
			ShardID: id, StreamARN: testARN, Attempt: 1,
		}
	}
	register(t, sh, ds)
	return sh, ds
}

// register registers ds as the next records of sh.
func register(t *testing.T, sh *engine.Shard, ds []engine.Delivery) {
	t.Helper()
	if _, err := sh.Deliver(sh.Watermark().Epoch(), ds); err != nil {
		t.Fatal(err)
	}
}

// deliver registers m as the next record of sh, in a slice of its own.
func deliver(t *testing.T, sh *engine.Shard, m message.Message) []engine.Delivery {
	t.Helper()
	ds := []engine.Delivery{{Msg: m}}
	register(t, sh, ds)
	return ds
}

// submit submits ds to s, each slice in turn.
func submit(t *testing.T, s *engine.Session, ds ...[]engine.Delivery) {
	t.Helper()
	for _, part := range ds {
		if _, err := s.Submit(t.Context(), part); err != nil {
			t.Fatal(err)
		}
	}
}

// waitIdle waits until no delivery of sh is in flight, or ctx ends; it
// reports whether sh is idle.
func waitIdle(ctx context.Context, sh *engine.Shard) bool {
	select {
	case <-sh.Idle():
		return true
	case <-ctx.Done():
		return sh.Inflight() == 0
	}
}

// runLambda runs ds, each slice in turn, through a Lambda-mode session
// without a deadline.
func runLambda(t *testing.T, e *engine.Engine, lanes int, ds ...[]engine.Delivery) {
	t.Helper()
	s := e.Start(t.Context(), engine.SessionConfig{Mode: engine.ModeLambda, Lanes: lanes, WriteDeadline: time.Now().Add(time.Minute)})
	submit(t, s, ds...)
	s.Close()
	s.Wait()
}

func firstUnsettled(sh *engine.Shard) string {
	seq, _ := sh.Watermark().FirstUnsettled()
	return seq
}

// TestReplyRacingReturn: a reply made from another goroutine just as the
// handler returns is either refused (ErrReplyAfterReturn) or counted: when
// it was accepted and failed, its record stays unsettled; when refused,
// the record settles. Run with -race too.
func TestReplyRacingReturn(t *testing.T) {
	const n = 300
	var accepted, refused atomic.Int32
	failed := make([]atomic.Bool, n)
	var wg sync.WaitGroup
	h := message.HandlerFunc(func(ctx context.Context, m *message.Message) message.Outcome {
		i, _ := strconv.Atoi(m.SequenceNumber)
		i -= 1000
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := m.Reply(context.Background(), message.Reply{Payload: []byte("x"), PartitionKey: "k"})
			switch {
			case errors.Is(err, message.ErrReplyAfterReturn):
				refused.Add(1)
			case err != nil:
				accepted.Add(1)
				failed[i].Store(true)
			default:
				t.Error("a reply to a stream that refuses everything succeeded")
			}
		}()
		runtime.Gosched()
		return message.Ack()
	})
	w := newWorld(t, h)
	w.cfg.ReplyStream = "replies"
	w.k.Fail = func(string, string, []byte) string { return "InvalidArgumentException" }
	e := w.engine(t)
	for i := range n {
		sh := engine.NewShard("s", engine.Hooks{})
		ds := deliver(t, sh, message.Message{Payload: []byte("r"), PartitionKey: "a",
			SequenceNumber: strconv.Itoa(1000 + i), ShardID: "s", Attempt: 1})
		runLambda(t, e, 1, ds)
		wg.Wait()
		unsettled := firstUnsettled(sh) != ""
		if unsettled != failed[i].Load() {
			t.Fatalf("record %d: unsettled %v, its reply accepted and failed %v", i, unsettled, failed[i].Load())
		}
	}
	t.Logf("replies accepted %d, refused %d", accepted.Load(), refused.Load())
}

// TestLambdaNoCopyAfterAFailedWrite (fault 7): when A's copy cannot be
// written, A stays unsettled and Lambda delivers it again with every record
// after it. Copies of later records written in the same PutRecords call as
// A's are remembered: when those records come again to the same engine
// (execution environment) they settle without their handler, so no record
// gets a second copy (a second chain). Another shard's copies are not held
// up.
func TestLambdaNoCopyAfterAFailedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls sync.Map
		w := newWorld(t, message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
			n, _ := calls.LoadOrStore(m.PartitionKey, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			return message.Retry(errors.New("downstream 503"))
		}))
		w.k.Fail = func(_, key string, _ []byte) string {
			if key == "k1" {
				return "InternalFailure"
			}
			return ""
		}
		w.cfg.Policy.MaxAttempts = 3
		e := w.engine(t)
		keyOf := func(i int) string { return fmt.Sprint("k", i) }
		sh, ds := shardOf(t, "shardId-000000000000", 4, keyOf)
		other, ods := shardOf(t, "shardId-000000000001", 3, func(i int) string { return fmt.Sprint("o", i) })
		runLambda(t, e, 4, ds, ods)
		if got := firstUnsettled(sh); got != "1001" {
			t.Errorf("first unsettled %q, want 1001 (the record whose copy failed)", got)
		}
		if got := firstUnsettled(other); got != "" {
			t.Errorf("other shard: first unsettled %q, want none", got)
		}
		// Lambda delivers 1001..1003 again; k1's copy works now.
		w.k.Fail = nil
		again := engine.NewShard("shardId-000000000000", engine.Hooks{})
		rds := make([]engine.Delivery, 3)
		for j := range rds {
			i := j + 1
			rds[j].Msg = message.Message{
				Payload: []byte(fmt.Sprintf("r%d", i)), PartitionKey: keyOf(i), SequenceNumber: fmt.Sprint(1000 + i),
				ShardID: "shardId-000000000000", StreamARN: testARN, Attempt: 1,
			}
		}
		register(t, again, rds)
		runLambda(t, e, 4, rds)
		if got := firstUnsettled(again); got != "" {
			t.Errorf("redelivery: first unsettled %q, want none", got)
		}
		var copied []string
		for _, x := range w.k.Written() {
			copied = append(copied, x.PartitionKey)
		}
		slices.Sort(copied)
		if want := []string{"k0", "k1", "k2", "k3", "o0", "o1", "o2"}; !slices.Equal(copied, want) {
			t.Errorf("copies of %v over both deliveries, want %v: one copy per record", copied, want)
		}
		for _, x := range w.k.Written() {
			if x.Headers.Get(envelope.RetryCountHeader) != "1" {
				t.Errorf("copy %s with count %s", x.Payload, x.Headers.Get(envelope.RetryCountHeader))
			}
		}
		// A record after k1 whose copy was made the first time is not
		// handled again; one whose copy waited behind k1 is.
		for _, k := range []string{"k2", "k3"} {
			n, _ := calls.Load(k)
			t.Logf("%s handled %d times", k, n.(*atomic.Int32).Load())
		}
		if n, _ := calls.Load("k1"); n.(*atomic.Int32).Load() != 2 {
			t.Errorf("k1 handled %d times, want 2", n.(*atomic.Int32).Load())
		}
	})
}

// TestLambdaKPLCopyWaitsForEarlierUserRecord (review fault 5a): the user
// records of one KPL aggregate share its sequence number. User record 1's
// copy must not be written while user record 0 is still running: were user
// record 0 then left unsettled, Lambda would deliver the whole aggregate
// again and user record 1 would get a second copy. Once 0's copy is being
// written, 1's goes out with it; when 0's fails and the aggregate comes
// again to the same engine, 1 is recognised: one copy per user record.
func TestLambdaKPLCopyWaitsForEarlierUserRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls [2]atomic.Int32
		w := newWorld(t, message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
			calls[m.SubSequenceNumber].Add(1)
			if m.SubSequenceNumber == 0 && calls[0].Load() == 1 {
				<-release
			}
			return message.Retry(errors.New("downstream 503"))
		}))
		w.k.Fail = func(_, key string, _ []byte) string {
			if key == "u0" {
				return "InternalFailure"
			}
			return ""
		}
		w.cfg.Policy.MaxAttempts = 3
		e := w.engine(t)
		aggregate := func() (*engine.Shard, []engine.Delivery) {
			sh := engine.NewShard("shardId-000000000000", engine.Hooks{})
			ds := make([]engine.Delivery, 2)
			for i := range ds {
				ds[i].Msg = message.Message{Payload: []byte(fmt.Sprint("u", i)), PartitionKey: fmt.Sprint("u", i),
					SequenceNumber: "1000", SubSequenceNumber: i, Aggregated: true, ShardID: "shardId-000000000000",
					StreamARN: testARN, Attempt: 1}
			}
			if err := sh.DeliverGroup(sh.Watermark().Epoch(), ds, 0); err != nil {
				t.Fatal(err)
			}
			return sh, ds
		}
		sh, ds := aggregate()
		done := make(chan struct{})
		go func() {
			defer close(done)
			runLambda(t, e, 2, ds)
		}()
		// Record 0 blocks the inline runner, which hands record 1 to the
		// lanes at its next look (a few milliseconds of virtual time).
		time.Sleep(time.Second)
		synctest.Wait() // user record 1 returned Retry; user record 0 still runs
		if n := calls[1].Load(); n != 1 {
			t.Fatalf("user record 1 handled %d times, want 1", n)
		}
		if got := w.k.Written(); len(got) != 0 {
			t.Fatalf("a copy written while user record 0 still runs: %+v", got)
		}
		close(release)
		<-done
		if got := firstUnsettled(sh); got != "1000" {
			t.Fatalf("first unsettled %q, want the aggregate", got)
		}
		w.k.Fail = nil
		sh, ds = aggregate()
		runLambda(t, e, 2, ds)
		if got := firstUnsettled(sh); got != "" {
			t.Fatalf("redelivery: first unsettled %q", got)
		}
		var copied []string
		for _, x := range w.k.Written() {
			copied = append(copied, x.PartitionKey)
		}
		slices.Sort(copied)
		if want := []string{"u0", "u1"}; !slices.Equal(copied, want) {
			t.Errorf("copies of %v over both deliveries, want %v", copied, want)
		}
		t.Logf("user record 1 handled %d times", calls[1].Load())
	})
}

// TestLambdaWritesInShardOrder: a shard's writes go out in its order: a
// copy delayed by RetryAfter holds the copies of later records back.
func TestLambdaWritesInShardOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
			if string(m.Payload) == "r0" {
				return message.RetryAfter(time.Second, nil)
			}
			return message.Retry(nil)
		}))
		w.cfg.Policy.MaxAttempts = 3
		e := w.engine(t)
		sh, ds := shardOf(t, "s", 3, func(i int) string { return fmt.Sprint("k", i) })
		start := time.Now()
		runLambda(t, e, 3, ds)
		if time.Since(start) < time.Second {
			t.Errorf("answered after %v, before the 1 s delay", time.Since(start))
		}
		var got []string
		for _, x := range w.k.Written() {
			got = append(got, string(x.Payload))
		}
		if want := []string{"r0", "r1", "r2"}; !slices.Equal(got, want) {
			t.Errorf("copies written in the order %v, want %v", got, want)
		}
		if firstUnsettled(sh) != "" {
			t.Errorf("records left unsettled")
		}
	})
}

// TestLambdaWriteTurnDoesNotWaitForALane: a record's write goes out once
// every earlier record of its shard settled, even when a lane that
// settled one of them is busy in a later handler (lanes hand settlements to
// the watermark a run at a time; a submitted write makes them hand over).
func TestLambdaWriteTurnDoesNotWaitForALane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w *world
		sawWrite := make(chan bool, 1)
		w = newWorld(t, message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
			switch string(m.Payload) {
			case "r1":
				return message.Retry(nil)
			case "r2": // waits for r1's copy, which waits for r0 to settle
				for range 100 {
					if len(w.k.Written()) > 0 {
						sawWrite <- true
						return message.Ack()
					}
					time.Sleep(100 * time.Millisecond)
				}
				sawWrite <- false
			}
			return message.Ack()
		}))
		w.cfg.Policy.MaxAttempts = 3
		e := w.engine(t)
		sh := engine.NewShard("s", engine.Hooks{})
		ds := make([]engine.Delivery, 3)
		for i, key := range []string{"a", "b", "a"} {
			ds[i].Msg = message.Message{Payload: []byte(fmt.Sprintf("r%d", i)), PartitionKey: key, SequenceNumber: fmt.Sprint(1000 + i),
				ShardID: "s", StreamARN: testARN, Attempt: 1}
		}
		register(t, sh, ds)
		runLambda(t, e, 2, ds)
		if !<-sawWrite {
			t.Errorf("r1's copy was not written while r2's handler ran")
		}
		if got := firstUnsettled(sh); got != "" {
			t.Errorf("first unsettled %q, want none", got)
		}
	})
}

// TestLambdaWritesOfShardsTogether: writes of different shards share calls.
// The writes wait until every record was handled, so every shard has
// copies waiting when they start, however fast the lanes run. One lane: a
// lane concludes a record (submits its copy) before its next handler call,
// so when the last handler returns every other copy is waiting; with many
// lanes, a lane descheduled between its handler's return and the
// conclusion (a GC, a loaded machine) let its copies out one call each.
// The calls' sharing does not depend on the lanes.
func TestLambdaWritesOfShardsTogether(t *testing.T) {
	var handled atomic.Int64
	allHandled := make(chan struct{})
	w := newWorld(t, message.HandlerFunc(func(context.Context, *message.Message) message.Outcome {
		if handled.Add(1) == 40 {
			close(allHandled)
		}
		return message.Retry(nil)
	}))
	pub, err := publish.NewPublisher(gatedPuts{w.k, allHandled})
	if err != nil {
		t.Fatal(err)
	}
	w.cfg.Publisher = pub
	w.cfg.Policy.MaxAttempts = 3
	e := w.engine(t)
	var all [][]engine.Delivery
	for s := range 8 {
		_, ds := shardOf(t, fmt.Sprint("shard-", s), 5, func(i int) string { return fmt.Sprint(s, "-", i) })
		all = append(all, ds)
	}
	runLambda(t, e, 1, all...)
	if n := len(w.k.Written()); n != 40 {
		t.Fatalf("%d copies, want 40", n)
	}
	if n := w.k.Calls("PutRecords"); n > 15 {
		t.Errorf("%d PutRecords calls for 8 shards × 5 copies, want about 5 (one entry per shard per call)", n)
	}
}

// TestLongRunningRedelivers (fault 2): an unsettled record is delivered
// again in process after a backoff, with Attempt counted up; later records
// of its key wait for it, other keys do not.
func TestLongRunningRedelivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var log []string
		h := message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
			mu.Lock()
			log = append(log, fmt.Sprintf("%s@%d", m.Payload, m.Attempt))
			mu.Unlock()
			if string(m.Payload) == "r0" && m.Attempt < 3 {
				return message.Retry(errors.New("not yet"))
			}
			return message.Ack()
		})
		w := newWorld(t, h)
		e := w.engine(t)
		sh, ds := shardOf(t, "s", 3, func(i int) string { return []string{"a", "a", "b"}[i] })
		s := e.Start(t.Context(), engine.SessionConfig{Mode: engine.ModeLongRunning, Lanes: 2, Backoff: func(n int) time.Duration { return time.Duration(n) * time.Second }})
		submit(t, s, ds)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(log)
		mu.Unlock()
		// r2 (key b) runs at once; r1 waits until r0 settled on its third attempt.
		if i, j := slices.Index(got, "r0@3"), slices.Index(got, "r1@1"); i < 0 || j < i {
			t.Errorf("handled %v: want r0@1, r0@2, r0@3 and r1@1 after r0@3", got)
		}
		if !slices.Contains(got, "r2@1") || slices.Index(got, "r2@1") > slices.Index(got, "r0@2") {
			t.Errorf("handled %v: key b must not wait for key a", got)
		}
		if cp, _ := sh.Watermark().Checkpoint(); cp != "1002" {
			t.Errorf("checkpoint %q, want 1002", cp)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if !s.Stop(ctx, time.Second) {
			t.Error("Stop: a handler did not return")
		}
	})
}

// TestSlowKeyDoesNotStall: one key's handler sleeps 5 s per record; the
// other keys keep their throughput (lanes pull keys as they free up).
func TestSlowKeyDoesNotStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fast atomic.Int64
		h := message.HandlerFunc(func(ctx context.Context, m *message.Message) message.Outcome {
			if m.PartitionKey == "slow" {
				select {
				case <-time.After(5 * time.Second):
				case <-ctx.Done():
				}
			} else {
				time.Sleep(time.Millisecond)
				fast.Add(1)
			}
			return message.Ack()
		})
		e := newWorld(t, h).engine(t)
		// 1,000 records over 11 keys, every 11th of the slow key.
		_, ds := shardOf(t, "s", 1100, func(i int) string {
			if i%11 == 0 {
				return "slow"
			}
			return fmt.Sprint("k", i%11)
		})
		s := e.Start(t.Context(), engine.SessionConfig{Mode: engine.ModeLongRunning, Lanes: 4})
		go func() { _, _ = s.Submit(t.Context(), ds) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		// 1,000 fast records over 3 free lanes at 1 ms each: well within 5 s.
		if n := fast.Load(); n != 1000 {
			t.Errorf("%d of 1,000 records of the other keys handled while the slow key's first record ran; want all", n)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		s.Stop(ctx, time.Second)
	})
}

// TestQuiesceGivesUpRetries: a shard being handed over gives up its records
// waiting for a retry, and does not start records after them.
func TestQuiesceGivesUpRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var handled atomic.Int64
		h := message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
			handled.Add(1)
			if string(m.Payload) == "r1" {
				return message.Retry(nil)
			}
			return message.Ack()
		})
		e := newWorld(t, h).engine(t)
		sh, ds := shardOf(t, "s", 3, func(i int) string { return "a" })
		s := e.Start(t.Context(), engine.SessionConfig{Mode: engine.ModeLongRunning, Lanes: 2, Backoff: func(int) time.Duration { return time.Hour }})
		submit(t, s, ds)
		synctest.Wait()
		if sh.Inflight() != 2 {
			t.Fatalf("%d in flight, want 2 (r1 parked, r2 behind it)", sh.Inflight())
		}
		s.Quiesce(sh)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if !waitIdle(ctx, sh) {
			t.Fatalf("shard not idle after Quiesce: %d in flight", sh.Inflight())
		}
		if n := handled.Load(); n != 2 {
			t.Errorf("%d handler calls, want 2 (r2 is after the record given up on)", n)
		}
		if cp, _ := sh.Watermark().Checkpoint(); cp != "1000" {
			t.Errorf("checkpoint %q, want 1000", cp)
		}
		s.Stop(ctx, time.Second)
	})
}

// TestSaturatedAttemptGoesToDeadLetter (fault 8): a retry count of MaxInt64
// saturates instead of wrapping to a negative attempt, so the cap still
// applies.
func TestSaturatedAttemptGoesToDeadLetter(t *testing.T) {
	w := newWorld(t, message.HandlerFunc(func(context.Context, *message.Message) message.Outcome { return message.Retry(nil) }))
	w.cfg.Policy.MaxAttempts = 5
	w.cfg.DeadLetterStream = "dlq"
	e := w.engine(t)
	sh := engine.NewShard("s", engine.Hooks{})
	for i, v := range []string{"9223372036854775807", "99999999999999999999999"} {
		var h envelope.Headers
		h.Set(envelope.RetryCountHeader, v)
		ds := deliver(t, sh, message.Message{Payload: []byte(v), Headers: h, PartitionKey: "k", SequenceNumber: fmt.Sprint(10 + i),
			ShardID: "s", StreamARN: testARN, Attempt: message.AttemptOf(h)})
		runLambda(t, e, 1, ds)
	}
	for _, x := range w.k.Written() {
		if x.Stream != "dlq" {
			t.Errorf("%s written to %s, want the dead-letter stream", x.Payload, x.Stream)
		}
	}
	if len(w.k.Written()) != 2 || firstUnsettled(sh) != "" {
		t.Errorf("written %d, unsettled %q", len(w.k.Written()), firstUnsettled(sh))
	}
}

// TestReplies: replies go to the reply stream or a named one while the
// handler runs; after it returned they fail; a failed reply leaves the
// record unsettled.
func TestReplies(t *testing.T) {
	var late atomic.Pointer[message.Message]
	h := message.HandlerFunc(func(ctx context.Context, m *message.Message) message.Outcome {
		r := message.Reply{Payload: []byte("re " + string(m.Payload)), PartitionKey: "k"}
		if string(m.Payload) == "r1" {
			r.Stream = "other"
		}
		late.Store(m)
		_ = m.Reply(ctx, r)
		return message.Ack()
	})
	w := newWorld(t, h)
	w.cfg.ReplyStream = "replies"
	w.k.Fail = func(stream, _ string, data []byte) string {
		if _, p := envelope.Decode(data); string(p) == "re r2" {
			return "InvalidArgumentException"
		}
		return ""
	}
	e := w.engine(t)
	sh, ds := shardOf(t, "s", 3, func(i int) string { return "a" })
	runLambda(t, e, 1, ds)
	var got []string
	for _, x := range w.k.Written() {
		got = append(got, x.Stream+" "+string(x.Payload))
	}
	if want := []string{"replies re r0", "other re r1"}; !slices.Equal(got, want) {
		t.Errorf("replies %v, want %v", got, want)
	}
	if firstUnsettled(sh) != "1002" {
		t.Errorf("first unsettled %q, want 1002 (its reply failed)", firstUnsettled(sh))
	}
	if err := late.Load().Reply(t.Context(), message.Reply{Payload: []byte("late")}); !errors.Is(err, message.ErrReplyAfterReturn) {
		t.Errorf("late reply: %v", err)
	}
	// Without any stream.
	w2 := newWorld(t, message.HandlerFunc(func(ctx context.Context, m *message.Message) message.Outcome {
		if err := m.Reply(ctx, message.Reply{Payload: []byte("x")}); !errors.Is(err, message.ErrNoReplyStream) ||
			!strings.Contains(err.Error(), "shard s sequence number 1000") {
			t.Errorf("reply without a stream: %v", err)
		}
		return message.Ack()
	}))
	_, ds2 := shardOf(t, "s", 1, func(int) string { return "a" })
	runLambda(t, w2.engine(t), 1, ds2)
}

// TestBatchRedeliversInOrder: elements of a batch left unsettled come back
// in a later batch in their order, with their attempts counted up.
func TestBatchRedeliversInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var batches [][]string
		bh := message.BatchHandlerFunc(func(_ context.Context, ms []*message.Message) []message.Outcome {
			outs := make([]message.Outcome, len(ms))
			var names []string
			for i, m := range ms {
				names = append(names, fmt.Sprintf("%s@%d", m.Payload, m.Attempt))
				outs[i] = message.Ack()
				if m.Attempt == 1 && (string(m.Payload) == "r1" || string(m.Payload) == "r2") {
					outs[i] = message.Retry(nil)
				}
			}
			mu.Lock()
			batches = append(batches, names)
			mu.Unlock()
			return outs[:len(outs)]
		})
		w := newWorld(t, nil)
		w.cfg.Handler, w.cfg.BatchHandler = nil, bh
		e := w.engine(t)
		sh, ds := shardOf(t, "s", 4, func(int) string { return "a" })
		s := e.Start(t.Context(), engine.SessionConfig{Mode: engine.ModeLongRunning, BatchSize: 10, BatchWindow: 50 * time.Millisecond,
			Backoff: func(int) time.Duration { return time.Second }})
		submit(t, s, ds)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		mu.Lock()
		got := batches
		mu.Unlock()
		want := [][]string{{"r0@1", "r1@1", "r2@1", "r3@1"}, {"r1@2", "r2@2"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		if cp, _ := sh.Watermark().Checkpoint(); cp != "1003" {
			t.Errorf("checkpoint %q, want 1003", cp)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		s.Stop(ctx, time.Second)
	})
}

// TestStaleDeliveriesDropped: records registered before a Reset are
// dropped, and their settlement changes nothing.
func TestStaleDeliveriesDropped(t *testing.T) {
	var n atomic.Int64
	e := newWorld(t, message.HandlerFunc(func(context.Context, *message.Message) message.Outcome {
		n.Add(1)
		return message.Ack()
	})).engine(t)
	sh, ds := shardOf(t, "s", 3, func(int) string { return "a" })
	sh.Reset("")
	if _, err := sh.Deliver(1, []engine.Delivery{{Msg: message.Message{SequenceNumber: "5", PartitionKey: "a"}}}); !errors.Is(err, settle.ErrStale) {
		t.Errorf("Deliver in an old epoch: %v, want ErrStale", err)
	}
	runLambda(t, e, 1, ds)
	if n.Load() != 0 || sh.Inflight() != 0 {
		t.Errorf("%d stale records handled, %d in flight", n.Load(), sh.Inflight())
	}
}

// TestStopLeavesNothingRunning: after Stop every goroutine of the session
// (lanes, timer, writer) has ended, with records waiting for a retry and
// delayed copies pending.
func TestStopLeavesNothingRunning(t *testing.T) {
	defer goleak.VerifyNone(t)
	w := newWorld(t, message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
		if string(m.Payload) == "r0" {
			return message.RetryAfter(200*time.Millisecond, nil)
		}
		return message.Retry(nil)
	}))
	e := w.engine(t)
	_, ds := shardOf(t, "s", 5, func(i int) string { return fmt.Sprint(i % 2) })
	s := e.Start(context.Background(), engine.SessionConfig{Mode: engine.ModeLongRunning, Lanes: 3, Backoff: func(int) time.Duration { return time.Hour }})
	if _, err := s.Submit(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if !s.Stop(ctx, time.Second) {
		t.Error("Stop reported a handler still running")
	}
}

var _ = retry.Copy

// gatedPuts holds every PutRecords call until open is closed.
type gatedPuts struct {
	*awsfake.Kinesis
	open <-chan struct{}
}

func (g gatedPuts) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
	}
	return g.Kinesis.PutRecords(ctx, in, optFns...)
}

// TestFenceLapse (self-fencing, a process paused or cut off): once the
// deadline of a shard's fence has passed, no record of it starts any more,
// even one already waiting for a lane, and what a handler that was running
// returns writes nothing (no counted copy); the Lapsed hook is called once.
// Another shard's records go on.
func TestFenceLapse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var handled []string
		h := message.HandlerFunc(func(ctx context.Context, m *message.Message) message.Outcome {
			mu.Lock()
			handled = append(handled, string(m.Payload))
			mu.Unlock()
			if m.ShardID == "fenced" && string(m.Payload) == "r0" {
				time.Sleep(3 * time.Second) // a pause, past the fence's deadline
				return message.Retry(errors.New("downstream failed"))
			}
			return message.Ack()
		})
		w := newWorld(t, h)
		w.cfg.Policy.MaxAttempts = 5 // a Retry becomes a counted copy
		if arn := w.k.CreateStream("orders", 1); arn != testARN {
			t.Fatalf("stream %s, want %s", arn, testARN)
		}
		e := w.engine(t)
		var lapses atomic.Int32
		fenced := engine.NewShard("fenced", engine.Hooks{Lapsed: func() { lapses.Add(1) }})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		fenced.Fence(ctx)
		if !fenced.Extend(time.Now().Add(2 * time.Second)) {
			t.Fatal("Extend refused before the deadline")
		}
		other, ods := shardOf(t, "other", 1, func(int) string { return "b" })
		ds := make([]engine.Delivery, 3)
		for i := range ds {
			ds[i].Msg = message.Message{Payload: []byte(fmt.Sprintf("r%d", i)), PartitionKey: "a",
				SequenceNumber: fmt.Sprint(1000 + i), ShardID: "fenced", StreamARN: testARN, Attempt: 1}
		}
		register(t, fenced, ds)
		s := e.Start(t.Context(), engine.SessionConfig{Mode: engine.ModeLongRunning, Lanes: 2})
		submit(t, s, ds, ods)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(handled)
		mu.Unlock()
		slices.Sort(got)
		if want := []string{"r0", "r0"}; !slices.Equal(got, want) {
			t.Errorf("handled %v, want %v (r0 of each shard; r1 and r2 of the fenced shard not started)", got, want)
		}
		if n := lapses.Load(); n != 1 {
			t.Errorf("Lapsed called %d times, want 1", n)
		}
		if fenced.Extend(time.Now().Add(time.Hour)) || !fenced.Lapsed() || fenced.Live() {
			t.Error("the fence came back after it lapsed")
		}
		if n := len(w.k.Records(testARN)); n != 0 {
			t.Errorf("%d records written (a copy after the fence lapsed), want 0", n)
		}
		if seq := firstUnsettled(fenced); seq != "1000" {
			t.Errorf("fenced shard's first unsettled %q, want 1000", seq)
		}
		if seq := firstUnsettled(other); seq != "" {
			t.Errorf("other shard's first unsettled %q, want none", seq)
		}
		stopCtx, stop := context.WithTimeout(t.Context(), time.Second)
		defer stop()
		s.Stop(stopCtx, time.Second)
	})
}

// copyingWorld is a world whose handler retries every record, each retry a
// counted copy written to the stream "orders" (testARN).
func copyingWorld(t *testing.T) *world {
	t.Helper()
	h := message.HandlerFunc(func(context.Context, *message.Message) message.Outcome {
		return message.Retry(errors.New("downstream failed"))
	})
	w := newWorld(t, h)
	w.cfg.Policy.MaxAttempts = 5 // a Retry becomes a counted copy
	if arn := w.k.CreateStream("orders", 1); arn != testARN {
		t.Fatalf("stream %s, want %s", arn, testARN)
	}
	return w
}

// TestWriteRoundFollowsTheFence: a round of writes (long-running mode) ends
// when the fence of its shard lapses, at the fence's deadline as it stands
// while the round is on the wire: a PutRecords call that takes 5 s
// completes when the fence (2 s ahead) is extended every second meanwhile,
// and is cut at the deadline when it is not — nothing of a shard is still
// being written once another worker may have taken its lease.
func TestWriteRoundFollowsTheFence(t *testing.T) {
	for _, renewed := range []bool{true, false} {
		t.Run(fmt.Sprintf("renewed=%v", renewed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := copyingWorld(t)
				w.k.Delay = 5 * time.Second
				e := w.engine(t)
				sh := engine.NewShard("fenced", engine.Hooks{})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				sh.Fence(ctx)
				sh.Extend(time.Now().Add(2 * time.Second))
				ds := deliver(t, sh, message.Message{Payload: []byte("r0"), PartitionKey: "a",
					SequenceNumber: "1000", ShardID: "fenced", StreamARN: testARN, Attempt: 1})
				s := e.Start(t.Context(), engine.SessionConfig{Mode: engine.ModeLongRunning, Lanes: 1})
				start := time.Now()
				submit(t, s, ds)
				if renewed {
					for range 6 {
						time.Sleep(time.Second)
						sh.Extend(time.Now().Add(2 * time.Second))
					}
				} else {
					time.Sleep(6 * time.Second)
				}
				synctest.Wait()
				written := len(w.k.Records(testARN))
				switch {
				case renewed && (written != 1 || firstUnsettled(sh) != ""):
					t.Errorf("renewed: %d copies written, first unsettled %q; want 1 and none", written, firstUnsettled(sh))
				case !renewed && (written != 0 || firstUnsettled(sh) != "1000" || sh.Live()):
					t.Errorf("lapsed: %d copies written, first unsettled %q, live %v; want 0, 1000, false", written, firstUnsettled(sh), sh.Live())
				}
				t.Logf("%v after the submit: %d written", time.Since(start), written)
				stopCtx, stop := context.WithTimeout(t.Context(), time.Second)
				defer stop()
				s.Stop(stopCtx, time.Second)
			})
		})
	}
}

// lostAnswer applies the first PutRecords call and loses its answer, as a
// connection reset after Kinesis wrote the records does.
type lostAnswer struct {
	*awsfake.Kinesis
	mu   sync.Mutex
	seen map[string]bool // the records written before, by data
}

// PutRecords applies every call and loses the answer of each call with a
// record it had not seen: every copy is written twice, whether the copies
// went out in one call or in several (which depends on the lanes' timing).
func (l *lostAnswer) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	out, err := l.Kinesis.PutRecords(ctx, in, optFns...)
	l.mu.Lock()
	fresh := false
	for _, r := range in.Records {
		if l.seen == nil {
			l.seen = map[string]bool{}
		}
		if !l.seen[string(r.Data)] {
			l.seen[string(r.Data)], fresh = true, true
		}
	}
	l.mu.Unlock()
	if fresh && err == nil {
		return nil, &smithyhttp.RequestSendError{Err: errors.New("read: connection reset by peer")}
	}
	return out, err
}

// TestUnansweredWriteLogged: a copy whose first write got no answer (it was
// applied, the answer lost) and was made again exists twice; the engine
// says so, in both modes, with a line that names the record and carries
// unanswered=true, so that an operator (and the soak's checker) can tell
// these duplicates from unexplained ones.
func TestUnansweredWriteLogged(t *testing.T) {
	for _, mode := range []engine.Mode{engine.ModeLambda, engine.ModeLongRunning} {
		t.Run(string(mode), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := copyingWorld(t)
				la := &lostAnswer{Kinesis: w.k}
				pub, err := publish.NewPublisher(la, publish.WithBackoff(time.Millisecond, 10*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				var logs bytes.Buffer
				var logMu sync.Mutex
				w.cfg.Publisher = pub
				w.cfg.Logger = slog.New(slog.NewJSONHandler(lockedWriter{&logMu, &logs}, nil))
				e := w.engine(t)
				sh, ds := shardOf(t, "s1", 2, func(int) string { return "a" })
				if mode == engine.ModeLambda {
					runLambda(t, e, 1, ds)
				} else {
					s := e.Start(t.Context(), engine.SessionConfig{Mode: mode, Lanes: 1})
					submit(t, s, ds)
					time.Sleep(time.Minute)
					synctest.Wait()
					stopCtx, stop := context.WithTimeout(t.Context(), time.Second)
					defer stop()
					s.Stop(stopCtx, time.Second)
				}
				if seq := firstUnsettled(sh); seq != "" {
					t.Errorf("first unsettled %q, want none", seq)
				}
				// Both copies went out in the call whose answer was lost,
				// and again in the next.
				if n := len(w.k.Records(testARN)); n != 4 {
					t.Errorf("%d records in the stream, want 4 (each copy twice)", n)
				}
				logMu.Lock()
				defer logMu.Unlock()
				var lines []string
				for l := range strings.Lines(logs.String()) {
					var rec struct {
						Msg        string `json:"msg"`
						Seq        string `json:"sequence_number"`
						Unanswered bool   `json:"unanswered"`
					}
					if err := json.Unmarshal([]byte(l), &rec); err != nil {
						t.Fatal(err)
					}
					if rec.Unanswered {
						lines = append(lines, rec.Seq+" "+rec.Msg)
					}
				}
				want := []string{
					"1000 lambdaadapter: writing the copy failed at first without an answer, then succeeded; it may have been written twice",
					"1001 lambdaadapter: writing the copy failed at first without an answer, then succeeded; it may have been written twice",
				}
				slices.Sort(lines) // the copies may go out in one call or in two, in either order
				if !slices.Equal(lines, want) {
					t.Errorf("unanswered lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
				}
			})
		})
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
