package lambdaadapter_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/internal/kpl"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/observe/emf"
	"google.golang.org/protobuf/encoding/protowire"
)

// recorder is a hook of every kind that keeps what it was told.
type recorder struct {
	mu          sync.Mutex
	records     []observe.Record
	writes      []observe.Write
	invocations []observe.Invocation
	reads       []observe.Read
	leases      []observe.Lease
	checkpoints []observe.Checkpoint
	inflight    []observe.InFlight
	flushes     int
}

func (r *recorder) OnRecord(x observe.Record) {
	r.mu.Lock()
	r.records = append(r.records, x)
	r.mu.Unlock()
}
func (r *recorder) OnWrite(x observe.Write) {
	r.mu.Lock()
	r.writes = append(r.writes, x)
	r.mu.Unlock()
}
func (r *recorder) OnInvocation(x observe.Invocation) {
	r.mu.Lock()
	r.invocations = append(r.invocations, x)
	r.mu.Unlock()
}
func (r *recorder) OnRead(x observe.Read) { r.mu.Lock(); r.reads = append(r.reads, x); r.mu.Unlock() }
func (r *recorder) OnLease(x observe.Lease) {
	r.mu.Lock()
	r.leases = append(r.leases, x)
	r.mu.Unlock()
}
func (r *recorder) OnCheckpoint(x observe.Checkpoint) {
	r.mu.Lock()
	r.checkpoints = append(r.checkpoints, x)
	r.mu.Unlock()
}
func (r *recorder) OnInFlight(x observe.InFlight) {
	r.mu.Lock()
	r.inflight = append(r.inflight, x)
	r.mu.Unlock()
}
func (r *recorder) Flush(context.Context) { r.mu.Lock(); r.flushes++; r.mu.Unlock() }

func (r *recorder) actions() map[observe.Action]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := map[observe.Action]int{}
	for _, x := range r.records {
		n[x.Action]++
	}
	return n
}

// byPayload answers Ack, except drop → Drop and retry → Retry.
var byPayload = lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
	switch string(m.Payload) {
	case "drop":
		return lambdaadapter.Drop(errors.New("poison"))
	case "retry":
		return lambdaadapter.Retry(errors.New("later"))
	}
	return lambdaadapter.Ack()
})

// TestHooksLambda: one invocation reports each record's action, the copy's
// write, the invocation and one flush.
func TestHooksLambda(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	for _, p := range []string{"a", "b", "drop", "retry", "c"} {
		b.Add("k-"+p, []byte(p))
	}
	h := &recorder{}
	res := lambdaadaptertest.Run(t, byPayload, b, lambdaadapter.WithHooks(h), lambdaadapter.WithMaxAttempts(3))
	if !res.AllSettled() {
		t.Fatalf("failures %v", res.Failures)
	}
	if got := h.actions(); got[observe.ActionSettled] != 4 || got[observe.ActionCopy] != 1 || len(h.records) != 5 {
		t.Errorf("actions %v, want 4 settled and 1 copy", got)
	}
	for _, x := range h.records {
		if x.Mode != observe.ModeLambda || x.ShardID == "" || x.SequenceNumber == "" || x.Age <= 0 || x.Attempt != 1 {
			t.Errorf("record event %+v lacks its mode, place, age or attempt", x)
		}
		if x.SequenceNumber != "" && x.Outcome == "drop" && x.Err == nil {
			t.Errorf("the drop's event has no error")
		}
	}
	if len(h.writes) != 1 || h.writes[0].Kind != observe.WriteCopy || h.writes[0].Err != nil {
		t.Errorf("writes %+v, want one copy written", h.writes)
	}
	if len(h.invocations) != 1 {
		t.Fatalf("%d invocation events, want 1", len(h.invocations))
	}
	inv := h.invocations[0]
	if inv.Records != 5 || inv.Failures != 0 || inv.Cut || inv.OldestAge < 0 || inv.Duration <= 0 || inv.Stream == "" {
		t.Errorf("invocation %+v", inv)
	}
	if h.flushes != 1 {
		t.Errorf("%d flushes, want one per invocation", h.flushes)
	}
}

// TestHooksLambdaDeadlineCut: an invocation cut at the deadline margin
// still reports and flushes, before the deadline.
func TestHooksLambdaDeadlineCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := lambdaadaptertest.NewBatch("orders")
		b.Add("k", []byte("stuck"))
		h := &recorder{}
		stuck := lambdaadapter.HandlerFunc(func(ctx context.Context, _ *lambdaadapter.Message) lambdaadapter.Outcome {
			<-ctx.Done()
			return lambdaadapter.Ack()
		})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		dl, _ := ctx.Deadline()
		res := lambdaadaptertest.RunContext(ctx, t, stuck, b, lambdaadapter.WithHooks(h), lambdaadapter.WithDeadlineMargin(2*time.Second))
		if len(res.Failures) != 1 {
			t.Errorf("failures %v, want the stuck record", res.Failures)
		}
		if !time.Now().Before(dl) {
			t.Errorf("answered at the deadline")
		}
		if len(h.invocations) != 1 || !h.invocations[0].Cut || h.flushes != 1 {
			t.Errorf("invocations %+v, %d flushes; want one cut invocation and one flush", h.invocations, h.flushes)
		}
		// The stuck record's lane ends when its handler returns, which may
		// be after the answer.
		synctest.Wait()
		if a := h.actions(); a[observe.ActionUnsettled] != 1 {
			t.Errorf("actions %v, want the stuck record unsettled", a)
		}
	})
}

// TestHooksECS: long-running mode reports lease takes, reads, checkpoints,
// an in-flight snapshot whose oldest age grows while a record is stuck, and
// flushes every interval and once more before Run returns.
func TestHooksECS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := awsfake.NewKinesis()
		k.CreateStream("orders", 1)
		shard := "shardId-000000000000"
		k.PutTo("orders", shard, "k1", []byte("a"))
		k.PutTo("orders", shard, "k2", []byte("retry"))
		k.PutTo("orders", shard, "k3", []byte("b"))
		h := &recorder{}
		a, err := lambdaadapter.NewService(byPayload, lambdaadapter.WithStream("orders"),
			lambdaadapter.WithKinesisClient(k), lambdaadapter.WithLeaseStore(lease.NewMemory()), lambdaadapter.WithOwnerID("w1"),
			lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()), lambdaadapter.WithHooks(h))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		time.Sleep(150 * time.Second) // two flush intervals
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		unsettled := h.actions()[observe.ActionUnsettled]
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.leases) == 0 || h.leases[0].Kind != observe.LeaseTaken || h.leases[0].Held != 1 {
			t.Errorf("lease events %+v, want a take first", h.leases)
		}
		if len(h.reads) == 0 || h.reads[0].ShardID != shard {
			t.Errorf("read events %+v", h.reads)
		}
		if len(h.checkpoints) == 0 {
			t.Errorf("no checkpoint event")
		}
		if h.flushes != 3 {
			t.Errorf("%d flushes, want 2 intervals + 1 at the end", h.flushes)
		}
		if len(h.inflight) != 3 {
			t.Fatalf("%d in-flight snapshots, want 3", len(h.inflight))
		}
		first := h.inflight[0]
		if first.Records != 1 || first.LeasesHeld != 1 || first.OldestAge < time.Minute {
			t.Errorf("first snapshot %+v, want the stuck record, over a minute old", first)
		}
		if h.inflight[1].OldestAge <= first.OldestAge {
			t.Errorf("the stuck record's age did not grow: %v then %v", first.OldestAge, h.inflight[1].OldestAge)
		}
		if unsettled < 2 {
			t.Errorf("the stuck record was reported unsettled %d times, want one per attempt", unsettled)
		}
	})
}

// fakeTracer is a TraceHook that marks contexts and counts ends.
type fakeTracer struct {
	mu          sync.Mutex
	invocations int
	invEnds     []observe.Invocation
	starts      map[string]int
	ends        map[string][]observe.Action
}

type spanKey struct{}

func (f *fakeTracer) StartInvocation(ctx context.Context, msgs []*lambdaadapter.Message) (context.Context, func(observe.Invocation)) {
	f.mu.Lock()
	f.invocations++
	f.mu.Unlock()
	return context.WithValue(ctx, spanKey{}, "invocation"), func(i observe.Invocation) {
		f.mu.Lock()
		f.invEnds = append(f.invEnds, i)
		f.mu.Unlock()
	}
}

func (f *fakeTracer) StartRecord(ctx context.Context, m *lambdaadapter.Message) (context.Context, func(observe.Record)) {
	p := string(m.Payload)
	f.mu.Lock()
	if f.starts == nil {
		f.starts, f.ends = map[string]int{}, map[string][]observe.Action{}
	}
	f.starts[p]++
	f.mu.Unlock()
	parent, _ := ctx.Value(spanKey{}).(string)
	return context.WithValue(ctx, spanKey{}, parent+"/"+p), func(r observe.Record) {
		f.mu.Lock()
		f.ends[p] = append(f.ends[p], r.Action)
		f.mu.Unlock()
	}
}

func (f *fakeTracer) Inject(ctx context.Context, h *lambdaadapter.Headers) {
	span, _ := ctx.Value(spanKey{}).(string)
	h.Set("traceparent", span)
}

// TestTraceHook: every record's handler runs in the context its span start
// returned, under the invocation's; each span ends once with the action;
// a reply carries the record's trace context.
func TestTraceHook(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders")
	for _, p := range []string{"a", "drop", "reply"} {
		b.Add("k-"+p, []byte(p))
	}
	f := &fakeTracer{}
	var mu sync.Mutex
	seen := map[string]string{}
	h := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		span, _ := ctx.Value(spanKey{}).(string)
		mu.Lock()
		seen[string(m.Payload)] = span
		mu.Unlock()
		if string(m.Payload) == "reply" {
			if err := m.Reply(ctx, lambdaadapter.Reply{Payload: []byte("answer")}); err != nil {
				return lambdaadapter.Retry(err)
			}
		}
		return byPayload(ctx, m)
	})
	res := lambdaadaptertest.Run(t, h, b, lambdaadapter.WithHooks(f), lambdaadapter.WithReplyStream("replies"))
	if !res.AllSettled() {
		t.Fatalf("failures %v", res.Failures)
	}
	for _, p := range []string{"a", "drop", "reply"} {
		if seen[p] != "invocation/"+p {
			t.Errorf("%s: the handler's span context %q, want invocation/%s", p, seen[p], p)
		}
		if f.starts[p] != 1 || len(f.ends[p]) != 1 || f.ends[p][0] != observe.ActionSettled {
			t.Errorf("%s: %d starts, ends %v; want one start and one settled end", p, f.starts[p], f.ends[p])
		}
	}
	if f.invocations != 1 || len(f.invEnds) != 1 || f.invEnds[0].Records != 3 {
		t.Errorf("%d invocation spans, ends %+v", f.invocations, f.invEnds)
	}
	w := res.Kinesis.Written()
	if len(w) != 1 || w[0].Headers.Get("traceparent") != "invocation/reply" {
		t.Errorf("reply written with headers %v, want the record's trace context", w)
	}
}

// TestTraceHookWithoutHandler: a record concluded without its handler — a
// malformed KPL aggregate (poison) or one past the maximum record age — gets
// its span too, in both the per-record and the batch handler, ended once
// with what became of it.
func TestTraceHookWithoutHandler(t *testing.T) {
	// A KPL aggregate whose MD5 matches but whose one user record names a
	// partition key the table does not have.
	var body []byte
	body = protowire.AppendTag(body, 1, protowire.BytesType)
	body = protowire.AppendString(body, "k")
	var rec []byte
	rec = protowire.AppendTag(rec, 1, protowire.VarintType)
	rec = protowire.AppendVarint(rec, 5)
	rec = protowire.AppendTag(rec, 3, protowire.BytesType)
	rec = protowire.AppendBytes(rec, []byte("poison"))
	body = protowire.AppendTag(body, 3, protowire.BytesType)
	body = protowire.AppendBytes(body, rec)
	sum := md5.Sum(body)
	poison := append(append(append([]byte{}, kpl.Magic[:]...), body...), sum[:]...)

	for _, tc := range []struct {
		what    string
		payload []byte
		opts    []lambdaadapter.FunctionOption
	}{
		{"poison", poison, nil},
		// lambdaadaptertest's records arrived in January 2026.
		{"too old", []byte("old"), []lambdaadapter.FunctionOption{lambdaadapter.WithMaxRecordAge(time.Hour)}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			b := lambdaadaptertest.NewBatch("orders")
			b.AddRaw("k", tc.payload)
			f := &fakeTracer{}
			opts := append([]lambdaadapter.FunctionOption{lambdaadapter.WithHooks(f)}, tc.opts...)
			h := lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
				t.Error("the handler ran")
				return lambdaadapter.Ack()
			})
			res := lambdaadaptertest.Run(t, h, b, opts...)
			if !res.AllSettled() {
				t.Fatalf("failures %v", res.Failures)
			}
			p := string(tc.payload)
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.starts[p] != 1 || len(f.ends[p]) != 1 || f.ends[p][0] != observe.ActionSettled {
				t.Errorf("%d starts, ends %v; want one start and one settled end", f.starts[p], f.ends[p])
			}
		})
	}

	// Long-running mode with a BatchHandler: the poison record and the
	// record of the batch get a span each.
	synctest.Test(t, func(t *testing.T) {
		k := awsfake.NewKinesis()
		k.CreateStream("orders", 1)
		shard := "shardId-000000000000"
		k.PutTo("orders", shard, "k1", poison)
		k.PutTo("orders", shard, "k2", []byte("a"))
		f := &fakeTracer{}
		var mu sync.Mutex
		var got []string
		bh := lambdaadapter.BatchHandlerFunc(func(_ context.Context, ms []*lambdaadapter.Message) []lambdaadapter.Outcome {
			outs := make([]lambdaadapter.Outcome, len(ms))
			mu.Lock()
			defer mu.Unlock()
			for i, m := range ms {
				got = append(got, string(m.Payload))
				outs[i] = lambdaadapter.Ack()
			}
			return outs
		})
		a, err := lambdaadapter.NewBatchService(bh, lambdaadapter.WithStream("orders"),
			lambdaadapter.WithKinesisClient(k), lambdaadapter.WithLeaseStore(lease.NewMemory()), lambdaadapter.WithOwnerID("w1"),
			lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()), lambdaadapter.WithHooks(f))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		time.Sleep(30 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 || got[0] != "a" {
			t.Errorf("the batch handler got %q, want only a", got)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range []string{string(poison), "a"} {
			if f.starts[p] != 1 || len(f.ends[p]) != 1 || f.ends[p][0] != observe.ActionSettled {
				t.Errorf("%.12q: %d starts, ends %v; want one start and one settled end", p, f.starts[p], f.ends[p])
			}
		}
	})
}

// TestECSIdleStreamWritesMillisBehindLatest: a long-running worker reading
// an idle stream writes MillisBehindLatest (0: at the tip) in every flush
// interval. The template's MillisBehindLatest alarm treats missing data as
// breaching on that premise: a minute without it means nothing read the
// stream, not that the stream was idle.
func TestECSIdleStreamWritesMillisBehindLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := awsfake.NewKinesis()
		k.CreateStream("idle", 2)
		var out lockedBuffer
		e := emf.New(&out, emf.WithService("svc"))
		a, err := lambdaadapter.NewService(byPayload, lambdaadapter.WithStream("idle"),
			lambdaadapter.WithKinesisClient(k), lambdaadapter.WithLeaseStore(lease.NewMemory()), lambdaadapter.WithOwnerID("w1"),
			lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()), lambdaadapter.WithHooks(e))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		const intervals = 5
		time.Sleep(intervals*emf.DefaultInterval + emf.DefaultInterval/2)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		var behind []float64
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var doc struct {
				Stream             string
				MillisBehindLatest []float64
			}
			if err := json.Unmarshal([]byte(line), &doc); err != nil {
				t.Fatalf("EMF line %q: %v", line, err)
			}
			if doc.Stream == "idle" && doc.MillisBehindLatest != nil {
				if len(doc.MillisBehindLatest) != 2 || doc.MillisBehindLatest[0] != 0 || doc.MillisBehindLatest[1] != 0 {
					t.Errorf("MillisBehindLatest %v, want 0 for each of the 2 shards", doc.MillisBehindLatest)
				}
				behind = append(behind, doc.MillisBehindLatest...)
			}
		}
		// One document per interval, and one more at the stop.
		if n := len(behind) / 2; n < intervals {
			t.Errorf("MillisBehindLatest written in %d flushes of an idle stream, want every one of the %d intervals:\n%s", n, intervals, out.String())
		}
	})
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
