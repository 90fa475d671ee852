package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"
)

func TestParseID(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		want    int
	}{
		{"zero", []byte("0000000000rest"), 0},
		{"max width", []byte("9999999999"), 9999999999},
		{"formatted", []byte(formatID(12345) + "xyz"), 12345},
		{"short", []byte("000000001"), -1},
		{"not a digit", []byte("00000000x1"), -1},
		{"empty", nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseID(tt.payload); got != tt.want {
				t.Errorf("parseID(%q) = %d, want %d", tt.payload, got, tt.want)
			}
		})
	}
}

func TestMakeRecords(t *testing.T) {
	const n, size = 1000, 64
	a, b := makeRecords(n, size), makeRecords(n, size)
	if diff := cmp.Diff(a, b, cmp.AllowUnexported(record{})); diff != "" {
		t.Fatalf("two calls differ (-first +second):\n%s", diff)
	}
	keys := map[string]bool{}
	for i, r := range a {
		if len(r.data) != size {
			t.Fatalf("record %d: %d bytes, want %d", i, len(r.data), size)
		}
		if got := parseID(r.data); got != i {
			t.Fatalf("record %d: id %d in the payload", i, got)
		}
		if len(r.key) != 16 {
			t.Fatalf("record %d: partition key %q, want 16 hex digits", i, r.key)
		}
		keys[r.key] = true
	}
	if len(keys) < n-1 {
		t.Errorf("%d distinct partition keys among %d records", len(keys), n)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.xs), func(t *testing.T) {
			if got := median(tt.xs); got != tt.want {
				t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
			}
		})
	}
}

// result returns a worker result of phase ph in round r that handled n
// records in elapsed, its readers losing slack.
func result(ph string, r, n int, elapsed, slack time.Duration, writes int) workerResult {
	w := workerResult{Phase: ph, Round: r, Distinct: n, Handled: n, Elapsed: elapsed, FirstRecord: elapsed / 10, Total: elapsed,
		Kinesis: kinesisStats{FirstCall: 50 * time.Millisecond, Slack: slack, Tail: time.Millisecond}}
	if ph == phaseDynamo {
		w.DynamoDB = map[string]int{"PutItem": 4, "UpdateItem": writes - 4, "Scan": 1}
	}
	return w
}

// withCPU gives w ms milliseconds of user CPU time.
func withCPU(w workerResult, ms int) workerResult {
	w.UserCPU = time.Duration(ms) * time.Millisecond
	return w
}

func TestSummarize(t *testing.T) {
	o := options{records: 1000, rounds: 2}
	tests := []struct {
		name    string
		results []workerResult
		want    targets
		dynMem  float64
		dynPln  float64
		writes  float64
		estMem  float64
		estPln  float64
	}{
		{
			name: "all met",
			results: []workerResult{
				withCPU(result(phasePlain, 1, 1000, time.Second, 0, 0), 10),
				withCPU(result(phaseMemory, 1, 1000, time.Second, 0, 0), 4),
				withCPU(result(phaseDynamo, 1, 1000, time.Second, 0, 10), 5),
				withCPU(result(phasePlain, 2, 1000, 2*time.Second, 0, 0), 10),
				withCPU(result(phaseMemory, 2, 1000, 2*time.Second, 0, 0), 4),
				withCPU(result(phaseDynamo, 2, 1000, 2*time.Second, 0, 10), 5),
			},
			want: targets{DynamoVsMemory: "PASS", ConsumerVsPlain: "PASS", WritesPerRecord: "PASS", EstDynamoVsMemory: "PASS", EstConsumerVsPlain: "PASS",
				CPUVsPlainDynamo: "PASS", CPUVsPlainMemory: "PASS"},
			dynMem: 1, dynPln: 1, writes: 0.01, estMem: 1, estPln: 1,
		},
		{
			// Per round the DynamoDB phase takes 25% longer: the ratios
			// are paired by round, not taken from the medians of the
			// rates.
			name: "DynamoDB slower",
			results: []workerResult{
				withCPU(result(phasePlain, 1, 1000, time.Second, 0, 0), 10),
				withCPU(result(phaseMemory, 1, 1000, time.Second, 0, 0), 5),
				withCPU(result(phaseDynamo, 1, 1000, 1250*time.Millisecond, 250*time.Millisecond, 11), 6),
				withCPU(result(phasePlain, 2, 1000, 4*time.Second, 0, 0), 10),
				withCPU(result(phaseMemory, 2, 1000, 4*time.Second, 0, 0), 5),
				withCPU(result(phaseDynamo, 2, 1000, 5*time.Second, 250*time.Millisecond, 11), 6),
			},
			// CPU per record: the in-memory consumer at exactly half the
			// plain loop's passes, the DynamoDB one at 0.6 misses.
			want: targets{DynamoVsMemory: "MISS", ConsumerVsPlain: "MISS", WritesPerRecord: "MISS", EstDynamoVsMemory: "MISS", EstConsumerVsPlain: "MISS",
				CPUVsPlainDynamo: "MISS", CPUVsPlainMemory: "PASS"},
			// Estimates: the plain loop's median 2.5 s against 2.5 s plus
			// the DynamoDB phase's 250 ms of slack.
			dynMem: 0.8, dynPln: 0.8, writes: 0.011, estMem: 2500.0 / 2750, estPln: 2500.0 / 2750,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &report{opts: o, results: tt.results, started: time.Unix(0, 0), finished: time.Unix(10, 0)}
			s := r.summarize()
			if diff := cmp.Diff(tt.want, s.Targets); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
			approx(t, "DynamoVsMemory", s.DynamoVsMemory, tt.dynMem)
			approx(t, "DynamoVsPlain", s.DynamoVsPlain, tt.dynPln)
			approx(t, "WritesPerRecord", s.WritesPerRecord, tt.writes)
			approx(t, "EstDynamoVsMemory", s.EstDynamoVsMemory, tt.estMem)
			approx(t, "EstDynamoVsPlain", s.EstDynamoVsPlain, tt.estPln)
			if s.Redelivered != -1 {
				t.Errorf("Redelivered = %d without a kill test, want -1", s.Redelivered)
			}
			var out bytes.Buffer
			r.print(&out)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "{") || !strings.Contains(last, `"dynamodb_vs_memory_ge_0.95":"`+tt.want.DynamoVsMemory+`"`) {
				t.Errorf("last line is not the JSON summary with the target: %s", last)
			}
		})
	}
}

// fakeKinesis serves one shard: each GetRecords call takes latency and
// returns the next of batches (a count of records; -1 closes the shard).
// It records the start of every call. It is safe for concurrent use.
type fakeKinesis struct {
	latency time.Duration
	batches []int

	mu       sync.Mutex
	starts   []time.Duration
	limits   []int32                        // the Limit of every GetRecords call
	iterType kinesistypes.ShardIteratorType // of the last GetShardIterator call
	t0       time.Time
	next     int
	id       int
}

func (f *fakeKinesis) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return &kinesis.ListShardsOutput{Shards: []kinesistypes.Shard{{ShardId: aws.String("shardId-000000000000")}}}, nil
}

func (f *fakeKinesis) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	f.mu.Lock()
	f.iterType = in.ShardIteratorType
	f.mu.Unlock()
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String("it-0")}, nil
}

// PutRecord and PutRecords complete kinesisAPI; the readers never write.
func (f *fakeKinesis) PutRecord(context.Context, *kinesis.PutRecordInput, ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	return nil, errors.New("fakeKinesis: PutRecord is not served")
}

func (f *fakeKinesis) PutRecords(context.Context, *kinesis.PutRecordsInput, ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	return nil, errors.New("fakeKinesis: PutRecords is not served")
}

func (f *fakeKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	f.mu.Lock()
	f.starts = append(f.starts, time.Since(f.t0))
	f.limits = append(f.limits, aws.ToInt32(in.Limit))
	i := f.next
	f.next++
	f.mu.Unlock()
	// Virtual time: the tests run in a synctest bubble. A call cut short
	// by its context fails, as the SDK's does.
	select {
	case <-time.After(f.latency):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if i >= len(f.batches) {
		return &kinesis.GetRecordsOutput{NextShardIterator: aws.String(fmt.Sprintf("it-%d", i+1))}, nil
	}
	out := &kinesis.GetRecordsOutput{NextShardIterator: aws.String(fmt.Sprintf("it-%d", i+1))}
	n := f.batches[i]
	if n < 0 {
		out.NextShardIterator = nil
		n = 0
	}
	for range n {
		f.mu.Lock()
		id := f.id
		f.id++
		f.mu.Unlock()
		out.Records = append(out.Records, kinesistypes.Record{Data: []byte(formatID(id)), SequenceNumber: aws.String(fmt.Sprint(id))})
	}
	return out, nil
}

// TestReadShardPacing checks that the plain loop keeps the consumer's
// rules: call starts at least 200 ms apart, 1 s after an empty read, the
// next call at once when a call took longer than 200 ms, and no slack.
func TestReadShardPacing(t *testing.T) {
	tests := []struct {
		name    string
		latency time.Duration
		batches []int
		want    []time.Duration
	}{
		{
			name:    "fast calls are spaced 200 ms",
			latency: 10 * time.Millisecond,
			batches: []int{3, 3, 3, -1},
			want:    []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond},
		},
		{
			name:    "slow calls follow each other",
			latency: 300 * time.Millisecond,
			batches: []int{3, 3, -1},
			want:    []time.Duration{0, 300 * time.Millisecond, 600 * time.Millisecond},
		},
		{
			name:    "an empty read waits 1 s",
			latency: 50 * time.Millisecond,
			batches: []int{2, 0, 2, -1},
			want:    []time.Duration{0, 200 * time.Millisecond, 1250 * time.Millisecond, 1450 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := 0
				for _, b := range tt.batches {
					n += max(b, 0)
				}
				f := &fakeKinesis{latency: tt.latency, batches: tt.batches, t0: time.Now()}
				k := newCountingKinesis(f)
				tr := newTracker(n + 1) // one more than exists: the loop reads to the shard's end
				tr.begin()
				o := options{stream: "s", limit: 500}
				if err := readShard(t.Context(), k, o, "shardId-000000000000", tr); err != nil {
					t.Fatalf("readShard: %v", err)
				}
				if diff := cmp.Diff(tt.want, f.starts); diff != "" {
					t.Errorf("call starts (-want +got):\n%s", diff)
				}
				if got := tr.count(); got != n {
					t.Errorf("%d records marked, want %d", got, n)
				}
				if s := k.stats(tr.start, time.Time{}); s.Slack != 0 || s.Early != 0 {
					t.Errorf("Slack = %v, Early = %d for a loop that keeps the rules, want 0, 0", s.Slack, s.Early)
				}
			})
		})
	}
}

// TestSlack checks that calls started later than the rules allow are
// counted as slack, per shard, the worst shard reported.
func TestSlack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeKinesis{latency: 50 * time.Millisecond, batches: []int{1, 1, 0, 1, 1}, t0: time.Now()}
		k := newCountingKinesis(f)
		t0 := time.Now()
		ctx := t.Context()
		it, err := k.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{ShardId: aws.String("shardId-000000000000")})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		time.Sleep(70 * time.Millisecond) // start-up
		// The pause before each call: the first at once, then on time,
		// 30 ms late, (after an empty read) 1 s plus 5 ms late, 20 ms
		// early.
		pauses := []time.Duration{0, 150 * time.Millisecond, 180 * time.Millisecond, 1005 * time.Millisecond, 130 * time.Millisecond}
		for _, p := range pauses {
			time.Sleep(p)
			out, err := k.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			iter = out.NextShardIterator
		}
		time.Sleep(3 * time.Millisecond) // the hand-over of the last batch
		s := k.stats(t0, time.Now())
		if want := 3 * time.Millisecond; s.Tail != want {
			t.Errorf("Tail = %v, want %v", s.Tail, want)
		}
		if want := 35 * time.Millisecond; s.Slack != want {
			t.Errorf("Slack = %v, want %v", s.Slack, want)
		}
		if want := 70 * time.Millisecond; s.FirstCall != want {
			t.Errorf("FirstCall = %v, want %v", s.FirstCall, want)
		}
		if s.GetRecords != 5 || s.EmptyReads != 1 || s.Records != 4 || s.Early != 1 {
			t.Errorf("counts = %d calls, %d empty, %d records, %d early; want 5, 1, 4, 1", s.GetRecords, s.EmptyReads, s.Records, s.Early)
		}
	})
}

func TestTrackerPrintsIDs(t *testing.T) {
	var out bytes.Buffer
	tr := newTracker(3)
	tr.out = &out
	tr.begin()
	for _, id := range []int{2, 0, 2, 1} {
		if err := tr.mark([]byte(formatID(id))); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.mark([]byte("junk")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("id 2\nid 0\nid 2\nid 1\n", out.String()); diff != "" {
		t.Errorf("printed (-want +got):\n%s", diff)
	}
	select {
	case <-tr.done:
	default:
		t.Fatal("done not closed after every id was seen")
	}
	if tr.distinct != 3 || tr.handled != 5 || tr.bad != 1 {
		t.Errorf("distinct, handled, bad = %d, %d, %d; want 3, 5, 1", tr.distinct, tr.handled, tr.bad)
	}
}

// TestDetachedProxy checks that a request whose client goes away while the
// stand-in works on it is completed upstream, not aborted, and that the
// proxy passes requests and answers unchanged otherwise.
func TestDetachedProxy(t *testing.T) {
	arrived := make(chan struct{})
	release := make(chan struct{})
	finished := make(chan error, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/slow" {
			close(arrived)
			select {
			case <-r.Context().Done(): // the proxy dropped the request
				finished <- r.Context().Err()
			case <-release:
				finished <- nil
			}
			return
		}
		w.Header().Set("X-Amz-Crc32", "123")
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.Header.Get("X-Amz-Target"), body)
	}))
	defer up.Close()
	p, err := startDetachedProxy(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/", strings.NewReader("{}"))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.UpdateItem")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Amz-Crc32") != "123" || string(got) != "POST DynamoDB_20120810.UpdateItem {}" {
		t.Errorf("answer = %d %q %q, want 418, crc 123, the request echoed", resp.StatusCode, resp.Header.Get("X-Amz-Crc32"), got)
	}

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL()+"/slow", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	cancel() // the client goes away, as a killed worker's connection does
	if err := <-errc; err == nil {
		t.Fatal("the cancelled client got an answer")
	}
	// A proxy that passes the cancellation on aborts the upstream request
	// within milliseconds; "never" can only be observed for a while.
	window := time.NewTimer(300 * time.Millisecond)
	defer window.Stop()
	select {
	case err := <-finished:
		t.Fatalf("the upstream request was aborted (%v) when its client went away; want it completed", err)
	case <-window.C:
	}
	close(release)
	if err := <-finished; err != nil {
		t.Errorf("upstream request: %v", err)
	}
}

func TestCommonWindow(t *testing.T) {
	// n records, one every per, after a start-up.
	mk := func(startup, per time.Duration, n int) workerResult {
		step := n / marksPerRun
		w := workerResult{Distinct: n, MarkStep: step, Elapsed: startup + time.Duration(n)*per}
		for k := step; k <= n; k += step {
			w.Marks = append(w.Marks, startup+time.Duration(k)*per)
		}
		return w
	}
	fast, slow := mk(0, time.Millisecond, 400), mk(0, 2*time.Millisecond, 400)
	if got := recordsAt(slow, 100*time.Millisecond); got != 50 {
		t.Errorf("recordsAt(slow, 100ms) = %v, want 50", got)
	}
	if got := recordsAt(slow, 105*time.Millisecond); got != 52.5 {
		t.Errorf("recordsAt(slow, 105ms) = %v, want 52.5 (interpolated)", got)
	}
	if got := recordsAt(fast, time.Second); got != 400 {
		t.Errorf("recordsAt after the end = %v, want 400", got)
	}
	// The window runs from the slow one's 10 % (80 ms) to the fast one's
	// end (400 ms).
	rates := commonWindow([]workerResult{fast, slow})
	if math.Abs(rates[0]-1000) > 1e-6 || math.Abs(rates[1]-500) > 1e-6 {
		t.Errorf("commonWindow = %v, want [1000 500]", rates)
	}
	// A later start-up at the same speed costs nothing in the window.
	late := mk(150*time.Millisecond, time.Millisecond, 400)
	rates = commonWindow([]workerResult{fast, late})
	if math.Abs(rates[0]-rates[1]) > 1e-6 {
		t.Errorf("commonWindow with a later start-up = %v, want equal rates", rates)
	}
	// A worker whose last shard made its first call late (at 300 ms,
	// after its 10 % mark at 80 ms) opens the window then: before it,
	// it read with part of its shards, more slowly.
	partial := mk(0, 2*time.Millisecond, 400)
	partial.Kinesis.FirstCall = 300 * time.Millisecond
	if from, to := windowBounds([]workerResult{fast, partial}); from != 300*time.Millisecond || to != 400*time.Millisecond {
		t.Errorf("windowBounds with a late last shard = %v, %v; want 300ms, 400ms", from, to)
	}
	if from, _ := windowBounds([]workerResult{fast, slow}); from != 80*time.Millisecond {
		t.Errorf("windowBounds when every shard read before 10 %% = from %v, want 80ms", from)
	}
	// Batches: records arrive 40 at a time every 40 ms (a staircase of
	// marks). The rate is the staircase's slope, 1,000/s, wherever the
	// window's edges cut it.
	stairs := workerResult{Distinct: 400, MarkStep: 10, Elapsed: 400 * time.Millisecond}
	for k := 10; k <= 400; k += 10 {
		stairs.Marks = append(stairs.Marks, time.Duration((k+39)/40*40)*time.Millisecond)
	}
	for _, from := range []time.Duration{45 * time.Millisecond, 79 * time.Millisecond, 81 * time.Millisecond} {
		if got := slope(stairs, from, 400*time.Millisecond); math.Abs(got-1000) > 60 {
			t.Errorf("slope of the staircase from %v = %.0f/s, want about 1000/s", from, got)
		}
	}
}

// approx reports an error unless got is want, up to rounding.
func approx(t *testing.T, name string, got, want float64) {
	t.Helper()
	if d := got - want; d > 1e-9 || d < -1e-9 {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

// withSteady gives w ms milliseconds of CPU time over 800 steady records.
func withSteady(w workerResult, ms int) workerResult {
	w.SteadyCPU, w.SteadyRecords = time.Duration(ms)*time.Millisecond, 800
	return w
}

// TestSummarizeStartStopCPU: the start-up and stop CPU of each phase are
// reported as medians, in milliseconds.
func TestSummarizeStartStopCPU(t *testing.T) {
	o := options{records: 1000, rounds: 2}
	with := func(w workerResult, start, stop int) workerResult {
		w.StartCPU, w.StopCPU = time.Duration(start)*time.Millisecond, time.Duration(stop)*time.Millisecond
		return w
	}
	r := &report{opts: o, results: []workerResult{
		with(result(phasePlain, 1, 1000, time.Second, 0, 0), 30, 0),
		with(result(phaseMemory, 1, 1000, time.Second, 0, 0), 28, 1),
		with(result(phaseDynamo, 1, 1000, time.Second, 0, 10), 40, 5),
		with(result(phasePlain, 2, 1000, time.Second, 0, 0), 34, 0),
		with(result(phaseMemory, 2, 1000, time.Second, 0, 0), 32, 1),
		with(result(phaseDynamo, 2, 1000, time.Second, 0, 10), 44, 3),
		with(result(phasePlainFast, 1, 1000, time.Second, 0, 0), 25, 0),
	}, started: time.Unix(0, 0), finished: time.Unix(10, 0)}
	s := r.summarize()
	approx(t, "PlainStartCPUMS", s.PlainStartCPUMS, 32)
	approx(t, "MemoryStartCPUMS", s.MemoryStartCPUMS, 30)
	approx(t, "DynamoStartCPUMS", s.DynamoStartCPUMS, 42)
	approx(t, "PlainFastStartCPUMS", s.PlainFastStartCPUMS, 25)
	approx(t, "DynamoStopCPUMS", s.DynamoStopCPUMS, 4)
	approx(t, "MemoryStopCPUMS", s.MemoryStopCPUMS, 1)
	var out bytes.Buffer
	r.print(&out)
	for _, want := range []string{"CPU ms to the first record: consumer DynamoDB / in-memory / plain loop", "42.0 / 30.0 / 32.0", "the floor 25.0",
		"CPU ms after the last record: consumer DynamoDB / in-memory / plain loop", "4.0 / 1.0 / 0.0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSummarizeSteadyCPU(t *testing.T) {
	o := options{records: 1000, rounds: 2}
	steady := []workerResult{
		withSteady(result(phasePlain, 1, 1000, time.Second, 0, 0), 8),
		withSteady(result(phaseMemory, 1, 1000, time.Second, 0, 0), 4),
		withSteady(result(phaseDynamo, 1, 1000, time.Second, 0, 10), 6),
		withSteady(result(phasePlain, 2, 1000, time.Second, 0, 0), 16),
		withSteady(result(phaseMemory, 2, 1000, time.Second, 0, 0), 4),
		withSteady(result(phaseDynamo, 2, 1000, time.Second, 0, 10), 4),
		withSteady(result(phasePlainFast, 1, 1000, time.Second, 0, 0), 2),
	}
	r := &report{opts: o, results: steady, started: time.Unix(0, 0), finished: time.Unix(10, 0)}
	s := r.summarize()
	// µs per record: 8 ms / 800 = 10, 16 ms / 800 = 20; medians.
	approx(t, "PlainSteadyCPUPerRec", s.PlainSteadyCPUPerRec, 15)
	approx(t, "MemorySteadyCPUPerRec", s.MemorySteadyCPUPerRec, 5)
	approx(t, "DynamoSteadyCPUPerRec", s.DynamoSteadyCPUPerRec, 6.25)
	approx(t, "PlainFastSteadyCPUPerRec", s.PlainFastSteadyCPUPerRec, 2.5)
	// Paired by round: memory 0.5 and 0.25, DynamoDB 0.75 and 0.25.
	approx(t, "MemorySteadyCPUVsPlain", s.MemorySteadyCPUVsPlain, 0.375)
	approx(t, "DynamoSteadyCPUVsPlain", s.DynamoSteadyCPUVsPlain, 0.5)
	var out bytes.Buffer
	r.print(&out)
	for _, want := range []string{"steady-state CPU µs/record: consumer DynamoDB / in-memory / plain loop", "6.2 / 5.0 / 15.0", "the floor 2.5",
		"steady-state CPU, consumer ÷ plain loop: DynamoDB, in-memory", "0.500, 0.375"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}

	// Without steady-state figures (a worker of an older build, or one
	// that stopped early) the lines are left out.
	r = &report{opts: o, results: []workerResult{result(phasePlain, 1, 1000, time.Second, 0, 0), result(phaseMemory, 1, 1000, time.Second, 0, 0)},
		started: time.Unix(0, 0), finished: time.Unix(10, 0)}
	out.Reset()
	r.print(&out)
	if strings.Contains(out.String(), "steady-state") {
		t.Errorf("report has steady-state lines without steady-state figures:\n%s", out.String())
	}
}

func TestTrackerSteadyCPU(t *testing.T) {
	tr := newTracker(100)
	tr.begin()
	busy := func() { // spin until the process's CPU time moved
		u0 := rusage()
		for u := u0; u.user+u.sys == u0.user+u0.sys; u = rusage() {
		}
	}
	for id := range 100 {
		if id == 50 {
			busy()
		}
		if err := tr.mark([]byte(formatID(id))); err != nil {
			t.Fatal(err)
		}
		if id+1 == 10 && tr.steadyFrom == 0 {
			t.Fatalf("no CPU time noted at the 10th record")
		}
		if id+1 < 90 && tr.steadyTo != 0 {
			t.Fatalf("CPU time noted as the end of the steady state at record %d", id+1)
		}
	}
	if tr.steadyTo <= tr.steadyFrom {
		t.Errorf("steady state from %v to %v of CPU time, want an end after the start", tr.steadyFrom, tr.steadyTo)
	}

	// Too few records for a tenth: no steady state.
	tr = newTracker(5)
	tr.begin()
	for id := range 5 {
		if err := tr.mark([]byte(formatID(id))); err != nil {
			t.Fatal(err)
		}
	}
	if tr.steadyFrom != 0 || tr.steadyTo != 0 {
		t.Errorf("steady state %v..%v for 5 records, want none", tr.steadyFrom, tr.steadyTo)
	}
}

// TestHandlerWait checks that -handler-wait reaches the workers and that a
// tracker with a wait sleeps at least that long per record.
func TestHandlerWait(t *testing.T) {
	args := workerArgs(options{handlerWait: 30 * time.Millisecond}, phasePlain, "s", "t")
	if !slices.Contains(args, "-handler-wait") || args[slices.Index(args, "-handler-wait")+1] != "30ms" {
		t.Errorf("worker args %q lack -handler-wait 30ms", args)
	}
	tr := newTracker(2)
	tr.wait = 30 * time.Millisecond
	tr.begin()
	start := time.Now()
	for id := range 2 {
		if err := tr.mark([]byte(formatID(id))); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("two records with a 30ms wait took %v; want at least 60ms", d)
	}
}
