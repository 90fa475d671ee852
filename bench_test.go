package lambdaadapter_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardsettle/lambdaadapter"
	fastb64 "github.com/shardsettle/lambdaadapter/internal/base64"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

// benchSizes are the invocation shapes of the issues: 1 record (the fixed
// cost of an invocation), 100 and 1,000 records of 512 B, and 10,000
// records of 100 B (about Lambda's 6 MB payload limit). Half the records
// carry RSK1 headers.
var benchSizes = []struct {
	name       string
	n, size    int
	keys       int
	hasHeaders bool
}{
	{"1x512B", 1, 512, 1, true},
	{"100x512B", 100, 512, 10, true},
	{"1000x512B", 1000, 512, 100, true},
	{"10000x100B", 10000, 100, 1000, true},
}

func noop(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome { return lambdaadapter.Ack() }

// handRolled is what users write today: reflection-based decoding into
// events.KinesisEvent, a loop, and a marshalled response.
func handRolled(ctx context.Context, payload []byte, handle func(context.Context, *events.KinesisEventRecord) error) ([]byte, error) {
	var ev events.KinesisEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, err
	}
	resp := events.KinesisEventResponse{BatchItemFailures: []events.KinesisBatchItemFailure{}}
	for i := range ev.Records {
		if err := handle(ctx, &ev.Records[i]); err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.KinesisBatchItemFailure{ItemIdentifier: ev.Records[i].Kinesis.SequenceNumber})
			break
		}
	}
	return json.Marshal(resp)
}

// BenchmarkInvoke compares raw invocation bytes → response bytes through
// the adapter (no-op handler) with the hand-rolled aws-lambda-go loop, in
// the same run: "adapter" is the default (messages yours to keep),
// "recycled" the adapter with WithRecycledMessages.
func BenchmarkInvoke(b *testing.B) {
	for _, sz := range benchSizes {
		payload := lambdaadaptertest.NewBatch("bench").Generate(sz.n, sz.keys, sz.size, sz.hasHeaders).JSON()
		for _, v := range []struct {
			name string
			opts []lambdaadapter.FunctionOption
		}{{"adapter", nil}, {"recycled", []lambdaadapter.FunctionOption{lambdaadapter.WithRecycledMessages()}}} {
			b.Run(v.name+"/"+sz.name, func(b *testing.B) {
				a, err := lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(noop), v.opts...)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(payload)))
				b.ReportAllocs()
				ctx := context.Background()
				for b.Loop() {
					out, err := a.Invoke(ctx, payload)
					if err != nil || string(out) != `{"batchItemFailures":[]}` {
						b.Fatalf("%s %v", out, err)
					}
				}
			})
		}
		b.Run("handrolled/"+sz.name, func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			ctx := context.Background()
			h := func(context.Context, *events.KinesisEventRecord) error { return nil }
			for b.Loop() {
				out, err := handRolled(ctx, payload, h)
				if err != nil || string(out) != `{"batchItemFailures":[]}` {
					b.Fatalf("%s %v", out, err)
				}
			}
		})
	}
}

// BenchmarkInvokeFloor is what any decoder of the 10,000-record invocation
// must at least do on this machine: one pass over its bytes (counting the
// quotes, which a JSON scanner must find, with the vectorised
// bytes.Count) plus base64 decoding of every record's data into one buffer,
// with the decoder the adapter uses (internal/base64, vectorised).
// BENCHMARKS.md compares BenchmarkInvoke with it.
func BenchmarkInvokeFloor(b *testing.B) {
	sz := benchSizes[len(benchSizes)-1]
	batch := lambdaadaptertest.NewBatch("bench").Generate(sz.n, sz.keys, sz.size, sz.hasHeaders)
	payload := batch.JSON()
	var data [][]byte // each record's data as the invocation carries it (base64)
	total := 0
	for _, r := range batch.Event().Records {
		enc := base64.StdEncoding.EncodeToString(r.Kinesis.Data)
		data = append(data, []byte(enc))
		total += len(r.Kinesis.Data)
	}
	out := make([]byte, total+8)
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if bytes.Count(payload, []byte{'"'}) == 0 {
			b.Fatal("no quotes")
		}
		off := 0
		for _, d := range data {
			n, err := fastb64.Decode(out[off:], d)
			if err != nil {
				b.Fatal(err)
			}
			off += n
		}
	}
}

// BenchmarkCoreToCore is what the machine charges for passing a cache line
// from one OS thread to another and back: two goroutines, each locked to
// its thread, take turns writing one atomic counter (ns/op is a round
// trip). The adapter passes records from the invoking goroutine to its lanes
// and their settlements back, so its figures on two vCPUs move with this
// one, which changes with where the hypervisor places the vCPUs (110 and
// 450 ns on the same machine within an hour; see BENCHMARKS.md). It needs
// GOMAXPROCS ≥ 2.
func BenchmarkCoreToCore(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs two threads running at once (GOMAXPROCS ≥ 2)")
	}
	var turn atomic.Int64
	n := int64(b.N)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for i := int64(1); i <= n; i++ {
			for turn.Load() != 2*i-1 {
			}
			turn.Store(2 * i)
		}
		close(done)
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for i := int64(1); i <= n; i++ {
		turn.Store(2*i - 1)
		for turn.Load() != 2*i {
		}
	}
	<-done
}

// BenchmarkLanes runs 10,000 records over 1,000 partition keys through a
// handler that sleeps 1 ms, with 1 and with 64 lanes. Run it with
// -benchtime=1x: one iteration with one lane takes over 10 s.
func BenchmarkLanes(b *testing.B) {
	payload := lambdaadaptertest.NewBatch("lanes").Generate(10_000, 1_000, 100, false).JSON()
	sleepy := lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
		time.Sleep(time.Millisecond)
		return lambdaadapter.Ack()
	})
	for _, lanes := range []int{1, 64} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			a, err := lambdaadapter.NewFunction(sleepy, lambdaadapter.WithConcurrency(lanes))
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				out, err := a.Invoke(context.Background(), payload)
				if err != nil || string(out) != `{"batchItemFailures":[]}` {
					b.Fatalf("%s %v", out, err)
				}
			}
		})
	}
}

// BenchmarkCopies hands 1,000 retries from one invocation (one shard, as
// Lambda sends) to the adapter with WithMaxAttempts: every record becomes a
// counted copy, written in shard order, one after another. It reports the
// Kinesis API calls per invocation.
func BenchmarkCopies(b *testing.B) {
	batch := lambdaadaptertest.NewBatch("copies")
	for i := range 1000 {
		batch.Add(fmt.Sprintf("k%d", i%100), make([]byte, 512))
	}
	payload := batch.JSON()
	fake := lambdaadaptertest.NewKinesis()
	retry := lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
		return lambdaadapter.Retry(nil)
	})
	a, err := lambdaadapter.NewFunction(retry, lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithKinesisClient(fake))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		out, err := a.Invoke(context.Background(), payload)
		if err != nil || string(out) != `{"batchItemFailures":[]}` {
			b.Fatalf("%s %v", out, err)
		}
		n++
	}
	calls := fake.Calls("PutRecords") + fake.Calls("PutRecord")
	b.ReportMetric(float64(calls)/float64(n), "calls/op")
	b.ReportMetric(float64(len(fake.Written()))/float64(n), "copies/op")
}
