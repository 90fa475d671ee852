package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"
)

func TestReadPhases(t *testing.T) {
	if diff := cmp.Diff([]string{phasePlain, phaseMemory, phaseDynamo}, readPhases(false)); diff != "" {
		t.Errorf("readPhases(false) (-want +got):\n%s", diff)
	}
	want := []string{phasePlain, phaseMemory, phaseDynamo, phaseHarlowMemory, phaseHarlowDynamo}
	if diff := cmp.Diff(want, readPhases(true)); diff != "" {
		t.Errorf("readPhases(true) (-want +got):\n%s", diff)
	}
	for _, ph := range want {
		if got, want := isHarlow(ph), strings.HasPrefix(ph, "harlow-"); got != want {
			t.Errorf("isHarlow(%q) = %v, want %v", ph, got, want)
		}
	}
	if !isHarlow(phaseHarlowKill) || isHarlow(phaseKill) {
		t.Error("isHarlow gets the kill phases wrong")
	}
}

func TestRotate(t *testing.T) {
	// Three phases: the orders the benchmark used before it had peers.
	three := readPhases(false)
	old := [][]string{
		{phasePlain, phaseMemory, phaseDynamo},
		{phaseMemory, phaseDynamo, phasePlain},
		{phaseDynamo, phasePlain, phaseMemory},
	}
	for r := range 6 {
		if diff := cmp.Diff(old[r%3], rotate(three, r)); diff != "" {
			t.Errorf("round %d (-want +got):\n%s", r, diff)
		}
	}
	// Five phases: over five rounds each phase runs once in each place.
	five := readPhases(true)
	places := map[string]map[int]bool{}
	for r := range len(five) {
		got := rotate(five, r)
		if len(got) != len(five) {
			t.Fatalf("round %d: %v", r, got)
		}
		for i, ph := range got {
			if places[ph] == nil {
				places[ph] = map[int]bool{}
			}
			places[ph][i] = true
		}
	}
	for _, ph := range five {
		if len(places[ph]) != len(five) {
			t.Errorf("%s ran in places %v over %d rounds, want every place", ph, places[ph], len(five))
		}
	}
	if got := rotate(nil, 3); got != nil {
		t.Errorf("rotate(nil) = %v", got)
	}
}

// TestHarlowPacing runs the harlow in-memory phase against the fake
// shard: every call asks for the phase's Limit, the shard is read from
// TRIM_HORIZON, calls follow harlow's 200 ms ticker (a slow call is
// followed at once), and, unlike the plain loop, an empty read is followed
// by the next tick, not by a 1 s pause (counted as early).
func TestHarlowPacing(t *testing.T) {
	tests := []struct {
		name    string
		latency time.Duration
		batches []int
		want    []time.Duration
		early   int
	}{
		{
			name:    "fast calls follow the 200 ms ticker",
			latency: 10 * time.Millisecond,
			batches: []int{3, 3, 3},
			want:    []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond},
		},
		{
			name:    "slow calls follow each other",
			latency: 300 * time.Millisecond,
			batches: []int{3, 3, 3},
			want:    []time.Duration{0, 300 * time.Millisecond, 600 * time.Millisecond},
		},
		{
			name:    "no pause after an empty read",
			latency: 50 * time.Millisecond,
			batches: []int{2, 0, 2},
			want:    []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond},
			early:   1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := 0
				for _, b := range tt.batches {
					n += b
				}
				f := &fakeKinesis{latency: tt.latency, batches: tt.batches, t0: time.Now()}
				k := newCountingKinesis(f)
				tr := newTracker(n)
				o := options{stream: "s", records: n, limit: 250, timeout: time.Minute}
				store, stop, err := harlowStore(phaseHarlowMemory, "", nil, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if err := runHarlow(o, k, store, stop, tr, false, io.Discard); err != nil {
					t.Fatalf("runHarlow: %v", err)
				}
				// The calls until the last record: one more may start at
				// that instant, before the phase cancels Scan.
				var starts []time.Duration
				for _, st := range f.starts {
					if st < tr.lastAt.Sub(f.t0) {
						starts = append(starts, st)
					}
				}
				if diff := cmp.Diff(tt.want, starts); diff != "" {
					t.Errorf("call starts (-want +got):\n%s", diff)
				}
				for i, l := range f.limits {
					if l != 250 {
						t.Errorf("call %d asked for Limit %d, want 250", i, l)
					}
				}
				if f.iterType != kinesistypes.ShardIteratorTypeTrimHorizon {
					t.Errorf("iterator type %q, want TRIM_HORIZON", f.iterType)
				}
				if got := tr.count(); got != n {
					t.Errorf("%d records handled, want %d", got, n)
				}
				if s := k.stats(tr.start, tr.lastAt); s.Early != tt.early {
					t.Errorf("Early = %d, want %d (call starts %v)", s.Early, tt.early, f.starts)
				}
			})
		})
	}
}

func TestHarlowStore(t *testing.T) {
	store, stop, err := harlowStore(phaseHarlowMemory, "", nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SetCheckpoint("s", "shardId-0", "42"); err != nil {
		t.Fatal(err)
	}
	if got, err := store.GetCheckpoint("s", "shardId-0"); err != nil || got != "42" {
		t.Errorf("GetCheckpoint = %q, %v; want 42", got, err)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}

	// The DynamoDB store starts a flush loop; stop ends it (nothing is
	// buffered, so no call is made).
	c := dynamodb.New(dynamodb.Options{Region: region, BaseEndpoint: aws.String("http://127.0.0.1:1")})
	_, stop, err = harlowStore(phaseHarlowDynamo, "t", c, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}

	for _, tt := range []struct {
		ph, table string
		client    *dynamodb.Client
	}{
		{phaseHarlowDynamo, "", c},
		{phaseHarlowKill, "t", nil},
		{phaseMemory, "t", c},
	} {
		if _, _, err := harlowStore(tt.ph, tt.table, tt.client, time.Second); err == nil {
			t.Errorf("harlowStore(%q, %q, client %v) succeeded, want an error", tt.ph, tt.table, tt.client != nil)
		}
	}
}

// TestCountCalls checks that the middleware counts a *dynamodb.Client's
// calls by operation, once per call when the SDK retries an attempt.
func TestCountCalls(t *testing.T) {
	var putAttempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".PutItem") && putAttempts.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"try again"}`)
			return
		}
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	d := &countingDynamoDB{trace: &callTrace{}}
	c := newDynamoDB(srv.URL, nil, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, d.countCalls)
		o.Retryer = retry.AddWithMaxBackoffDelay(o.Retryer, time.Millisecond)
	})
	ctx := t.Context()
	table := aws.String("t")
	key := map[string]dynamodbtypes.AttributeValue{"k": &dynamodbtypes.AttributeValueMemberS{Value: "v"}}
	calls := []func() error{
		func() error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: key})
			return err
		},
		func() error { _, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key}); return err },
		func() error { _, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key}); return err },
		func() error {
			_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: key})
			return err
		},
		func() error {
			_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: key})
			return err
		},
		func() error { _, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: table}); return err },
		func() error {
			_, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: table})
			return err
		},
		func() error { _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}); return err }, // not counted
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := putAttempts.Load(); got != 2 {
		t.Fatalf("PutItem reached the server %d times, want 2 (one retried attempt)", got)
	}
	want := map[string]int{"PutItem": 1, "UpdateItem": 1, "DeleteItem": 1, "GetItem": 2, "Scan": 1, "DescribeTable": 1}
	if diff := cmp.Diff(want, d.counts()); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
}

// window returns a concurrent-round result of phase ph: n records, one
// every per, CPU time cpu.
func window(ph string, per time.Duration, n int, cpu time.Duration) workerResult {
	step := n / marksPerRun
	w := workerResult{Phase: ph, Distinct: n, MarkStep: step, Elapsed: time.Duration(n) * per, UserCPU: cpu}
	for k := step; k <= n; k += step {
		w.Marks = append(w.Marks, time.Duration(k)*per)
	}
	return w
}

func TestSummarizePeers(t *testing.T) {
	// Sequential: the consumer's in-memory phase reads 1.25 times as fast
	// as harlow's with half its CPU time per record; its DynamoDB phase
	// 0.8 times as fast with 1.2 times its CPU time.
	seq := func(ph string, r int, elapsed, cpu time.Duration) workerResult {
		w := result(ph, r, 1000, elapsed, 0, 10)
		w.UserCPU = cpu
		if ph == phaseHarlowDynamo {
			w.DynamoDB = map[string]int{"PutItem": 4, "GetItem": 4}
		}
		return w
	}
	var results []workerResult
	for r := 1; r <= 2; r++ {
		results = append(results,
			seq(phasePlain, r, time.Second, 8*time.Millisecond),
			seq(phaseMemory, r, time.Second, 10*time.Millisecond),
			seq(phaseDynamo, r, time.Second, 12*time.Millisecond),
			seq(phaseHarlowMemory, r, 1250*time.Millisecond, 20*time.Millisecond),
			seq(phaseHarlowDynamo, r, 800*time.Millisecond, 10*time.Millisecond),
		)
	}
	// Concurrent: over the common window (80–300 ms) the consumer reads
	// 1,000/s, harlow in-memory 500/s, harlow DynamoDB 1,333/s.
	round := []workerResult{
		window(phasePlain, time.Millisecond, 400, 4*time.Millisecond),
		window(phaseMemory, time.Millisecond, 400, 4*time.Millisecond),
		window(phaseDynamo, time.Millisecond, 400, 6*time.Millisecond),
		window(phaseHarlowMemory, 2*time.Millisecond, 400, 8*time.Millisecond),
		window(phaseHarlowDynamo, 750*time.Microsecond, 400, 4*time.Millisecond),
	}
	kill := &killResult{FirstHandled: 500, Redelivered: 123, KilledAfter: time.Second}
	r := &report{opts: options{records: 1000, rounds: 2, peers: true}, results: results,
		concurrent: [][]workerResult{round, round}, harlowKill: kill,
		started: time.Unix(0, 0), finished: time.Unix(10, 0)}
	s := r.summarize()
	p := s.Harlow
	if p == nil {
		t.Fatal("no peer summary with -peers")
	}
	approx(t, "VsMemory", p.VsMemory, 1.25)
	approx(t, "VsDynamo", p.VsDynamo, 0.8)
	approx(t, "CPUVsMemory", p.CPUVsMemory, 0.5)
	approx(t, "CPUVsDynamo", p.CPUVsDynamo, 1.2)
	approx(t, "ConcVsMemory", p.ConcVsMemory, 2)
	approx(t, "ConcVsDynamo", p.ConcVsDynamo, 0.75)
	approx(t, "ConcCPUVsMemory", p.ConcCPUVsMemory, 0.5)
	approx(t, "ConcCPUVsDynamo", p.ConcCPUVsDynamo, 1.5)
	approx(t, "MemoryRecordsPerSec", p.MemoryRecordsPerSec, 800)
	approx(t, "DynamoRecordsPerSec", p.DynamoRecordsPerSec, 1250)
	approx(t, "ConcMemoryRecordsPerSec", p.ConcMemoryRecordsPerSec, 500)
	approx(t, "ConcDynamoRecordsPerSec", p.ConcDynamoRecordsPerSec, 4000.0/3)
	approx(t, "WritesPerRecord", p.WritesPerRecord, 0.004)
	approx(t, "concurrent CPU/record of harlow in-memory", p.ConcCPUPerRec[phaseHarlowMemory], 20)
	// The consumer's own concurrent figures still come from its phases.
	approx(t, "ConcDynamoVsMemory", s.ConcDynamoVsMemory, 1)
	approx(t, "ConcDynamoVsPlain", s.ConcDynamoVsPlain, 1)
	if p.Redelivered != 123 || p.KilledAt != 500 {
		t.Errorf("Redelivered, KilledAt = %d, %d; want 123, 500", p.Redelivered, p.KilledAt)
	}
	want := targets{
		VsHarlowMemory: "PASS", VsHarlowDynamo: "MISS",
		ConcVsHarlowMemory: "PASS", ConcVsHarlowDynamo: "MISS",
		CPUVsHarlowMemory: "PASS", CPUVsHarlowDynamo: "MISS",
		ConcCPUVsHarlowMemory: "PASS", ConcCPUVsHarlowDynamo: "MISS",
	}
	got := s.Targets
	got.DynamoVsMemory, got.ConsumerVsPlain, got.WritesPerRecord = "", "", ""
	got.CPUVsPlainDynamo, got.CPUVsPlainMemory = "", ""
	got.ConcDynamoVsMemory, got.ConcConsumerVsPlain, got.EstDynamoVsMemory, got.EstConsumerVsPlain = "", "", "", ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("targets against harlow (-want +got):\n%s", diff)
	}

	var out bytes.Buffer
	r.print(&out)
	text := out.String()
	for _, line := range []string{
		"side by side with " + harlowModule,
		"consumer ÷ harlow records/s, in-memory",
		"concurrent: consumer ÷ harlow records/s, DynamoDB",
		"consumer ÷ harlow CPU µs/record, DynamoDB",
		"harlow (DynamoDB store) re-delivered after kill -9",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("the report has no line %q", line)
		}
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	var j struct {
		Targets map[string]string `json:"targets"`
		Harlow  *peerSummary      `json:"harlow"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &j); err != nil {
		t.Fatalf("last line is not JSON: %v", err)
	}
	if j.Harlow == nil || j.Harlow.Module != harlowModule {
		t.Errorf("JSON harlow = %+v, want the peer's summary", j.Harlow)
	}
	if j.Targets["consumer_vs_harlow_memory_ge_1.0"] != "PASS" || j.Targets["cpu_consumer_vs_harlow_dynamodb_lt_1.0"] != "MISS" {
		t.Errorf("JSON targets = %v", j.Targets)
	}

	// Without -peers there is no peer summary and no peer target.
	r.opts.peers = false
	if s := r.summarize(); s.Harlow != nil || s.Targets.VsHarlowMemory != "" {
		t.Errorf("without -peers: Harlow = %v, VsHarlowMemory = %q; want none", s.Harlow, s.Targets.VsHarlowMemory)
	}
}

// TestShortWindow checks that a concurrent round whose common window holds
// too few marks of a worker is left out of the concurrent figures and
// counted, and that without any round left the targets are not judged.
func TestShortWindow(t *testing.T) {
	good := []workerResult{
		window(phasePlain, time.Millisecond, 400, 0),
		window(phaseMemory, time.Millisecond, 400, 0),
		window(phaseDynamo, time.Millisecond, 400, 0),
	}
	// The DynamoDB worker's last shard starts reading at 350 ms: the
	// window, 350–400 ms, holds 6 of each worker's marks.
	late := []workerResult{good[0], good[1], good[2]}
	late[2].Kinesis.FirstCall = 350 * time.Millisecond
	if !windowOK(good) || windowOK(late) || windowOK(nil) {
		t.Fatalf("windowOK: good %v, late %v, none %v; want true, false, false", windowOK(good), windowOK(late), windowOK(nil))
	}
	if n := marksIn(good[0], 350*time.Millisecond, 400*time.Millisecond); n != 6 {
		t.Errorf("marksIn = %d, want 6", n)
	}
	r := &report{opts: options{records: 400, rounds: 1}, concurrent: [][]workerResult{late, good},
		started: time.Unix(0, 0), finished: time.Unix(1, 0)}
	s := r.summarize()
	if s.ConcurrentRounds != 2 || s.ConcurrentNoWindow != 1 {
		t.Errorf("ConcurrentRounds, ConcurrentNoWindow = %d, %d; want 2, 1", s.ConcurrentRounds, s.ConcurrentNoWindow)
	}
	if math.Abs(s.ConcDynamoVsMemory-1) > 1e-9 || len(s.RoundConcDynamoVsMemory) != 1 || s.Targets.ConcDynamoVsMemory != "PASS" {
		t.Errorf("concurrent DynamoDB ÷ memory = %v (rounds %v, %s); want 1 from the good round only, PASS",
			s.ConcDynamoVsMemory, s.RoundConcDynamoVsMemory, s.Targets.ConcDynamoVsMemory)
	}
	var out bytes.Buffer
	r.print(&out)
	if !strings.Contains(out.String(), "concurrent rounds left out") {
		t.Error("the report does not say that a round was left out")
	}

	r.concurrent = [][]workerResult{late}
	if s := r.summarize(); s.Targets.ConcDynamoVsMemory != "" || s.Targets.ConcConsumerVsPlain != "" {
		t.Errorf("with no round left the concurrent targets are %q, %q; want none", s.Targets.ConcDynamoVsMemory, s.Targets.ConcConsumerVsPlain)
	}
}
