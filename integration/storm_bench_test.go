//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
)

// BenchmarkRetryStorm measures a downstream outage: every record's handler
// returns Retry, so every record becomes a counted copy (WithMaxAttempts(3))
// or, with a cap of 1 and a dead-letter queue, a dead letter, written to
// kinesis-local or fauxqs. It reports records per second on one shard. Run
// it alone, with the stand-ins started:
//
//	cd integration && go test -tags integration -run '^$' -bench RetryStorm -benchtime 1x -v .
//
// Lambda mode: 2,000 records of 512 B on one shard (100 partition keys) are
// handed to an adapter in process with Invoke, in invocations of 100 (the
// event source mapping's default batch size) or 1,000 records, one after
// another, each with a 60 s deadline; the clock runs over all invocations,
// and every invocation must answer with no failure (everything written).
//
// Long-running mode: the same 2,000 records are read from TRIM_HORIZON by
// Run with in-memory leases; the clock runs from Run until every record's
// copy (or dead letter) was written (observe.WriteHook), or, for "ack",
// until every record was handled: the same mode in normal operation.
//
// The "model" variants write to a fake Kinesis that answers every
// PutRecords call after 20 ms (modelLatency), however many entries it
// carries, as AWS roughly does; kinesis-local's cost grows with every entry
// (floor-putrecords: the stand-in's own rate for the same records in calls
// of 500), which caps every variant that writes to it.
//
// Each figure is the median of three rounds. LAMBDAADAPTER_STORM_RECORDS
// sets the records (default 2,000), LAMBDAADAPTER_STORM_ROUNDS the rounds and
// LAMBDAADAPTER_STORM_VARIANTS (a regular expression) the variants.
func BenchmarkRetryStorm(b *testing.B) {
	env := standin.Require(b)
	const size = 512
	n := 2000   // LAMBDAADAPTER_STORM_RECORDS changes it
	rounds := 3 // LAMBDAADAPTER_STORM_ROUNDS changes it
	if v, err := strconv.Atoi(os.Getenv("LAMBDAADAPTER_STORM_RECORDS")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.Atoi(os.Getenv("LAMBDAADAPTER_STORM_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	stream, arn := env.NewStream(b, 1)
	entries := make([]kinesistypes.PutRecordsRequestEntry, n)
	for i := range entries {
		data := make([]byte, size)
		copy(data, fmt.Sprintf("%d|0|", i))
		entries[i] = kinesistypes.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("k-%03d", i%100)), Data: data}
	}
	putRecords(b, env, stream, entries)
	origs := awaitRecords(b, env, stream, n)
	if len(origs) != n {
		b.Fatalf("read %d records back, want %d", len(origs), n)
	}
	dlq := env.NewQueue(b, nil)

	retry := lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
		return lambdaadapter.Retry(nil)
	})
	lambdaRun := func(batch int, opts ...lambdaadapter.FunctionOption) float64 {
		a, err := lambdaadapter.NewFunction(retry, append([]lambdaadapter.FunctionOption{
			lambdaadapter.WithKinesisClient(env.Kinesis), lambdaadapter.WithSQSClient(env.SQS)}, opts...)...) // a later WithKinesisClient wins
		if err != nil {
			b.Fatal(err)
		}
		events := make([][]byte, 0, n/batch)
		for i := 0; i < n; i += batch {
			events = append(events, kinesisEvent(b, arn, origs[i:min(i+batch, n)]))
		}
		start := time.Now()
		for _, ev := range events {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			out, err := a.Invoke(ctx, ev)
			cancel()
			if err != nil || string(out) != `{"batchItemFailures":[]}` {
				b.Fatalf("Invoke: %s %v", out, err)
			}
		}
		return float64(n) / time.Since(start).Seconds()
	}
	ecsRun := func(h lambdaadapter.HandlerFunc, model bool, opts ...lambdaadapter.ServiceOption) float64 {
		stream, _ := env.NewStream(b, 1) // a fresh one: the copies of a run land on its stream
		putRecords(b, env, stream, entries)
		var handled, written atomic.Int64
		done := make(chan struct{})
		var once atomic.Bool
		finish := func(c *atomic.Int64) {
			if c.Add(1) == int64(n) && once.CompareAndSwap(false, true) {
				close(done)
			}
		}
		wrap := func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
			out := h(ctx, m)
			if m.Attempt == 1 && opts == nil {
				finish(&handled)
			}
			return out
		}
		hook := writeCounter(func(w observe.Write) {
			if w.Err == nil {
				finish(&written)
			}
		})
		a, err := lambdaadapter.NewService(lambdaadapter.HandlerFunc(wrap), append([]lambdaadapter.ServiceOption{
			lambdaadapter.WithStream(stream),
			lambdaadapter.WithLeaseStore(lease.NewMemory()), lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()),
			lambdaadapter.WithKinesisClient(env.Kinesis), lambdaadapter.WithSQSClient(env.SQS),
			lambdaadapter.WithHooks(hook),
		}, opts...)...)
		if model {
			fake := lambdaadaptertest.NewKinesis()
			fake.Delay = modelLatency
			a, err = lambdaadapter.NewService(lambdaadapter.HandlerFunc(wrap), append([]lambdaadapter.ServiceOption{
				lambdaadapter.WithStream(stream),
				lambdaadapter.WithLeaseStore(lease.NewMemory()), lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()),
				lambdaadapter.WithKinesisClient(modelKinesis{env.Kinesis, fake}), lambdaadapter.WithSQSClient(env.SQS),
				lambdaadapter.WithHooks(hook),
			}, opts...)...)
		}
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		start := time.Now()
		go func() { ran <- a.Run(ctx) }()
		select {
		case <-done:
		case err := <-ran:
			b.Fatalf("Run returned early: %v", err)
		case <-time.After(5 * time.Minute):
			b.Fatalf("after 5 minutes: %d handled, %d written of %d", handled.Load(), written.Load(), n)
		}
		rate := float64(n) / time.Since(start).Seconds()
		cancel()
		if err := <-ran; err != nil {
			b.Fatalf("Run: %v", err)
		}
		return rate
	}
	ack := func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome { return lambdaadapter.Ack() }
	retryFirst := func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		if m.Attempt == 1 {
			return lambdaadapter.Retry(nil)
		}
		return lambdaadapter.Ack() // the copies
	}

	type variant struct {
		name string
		run  func() float64
	}
	variants := []variant{
		{"lambda-copies-batch100", func() float64 { return lambdaRun(100, lambdaadapter.WithMaxAttempts(3)) }},
		{"lambda-copies-batch1000", func() float64 { return lambdaRun(1000, lambdaadapter.WithMaxAttempts(3)) }},
		{"lambda-deadletters-batch100", func() float64 {
			return lambdaRun(100, lambdaadapter.WithMaxAttempts(1), lambdaadapter.WithDeadLetterQueue(dlq))
		}},
		{"lambda-copies-batch100-model", func() float64 {
			fake := lambdaadaptertest.NewKinesis()
			fake.Delay = modelLatency
			return lambdaRun(100, lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithKinesisClient(fake))
		}},
		{"lambda-copies-batch1000-model", func() float64 {
			fake := lambdaadaptertest.NewKinesis()
			fake.Delay = modelLatency
			return lambdaRun(1000, lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithKinesisClient(fake))
		}},
		{"ecs-ack", func() float64 { return ecsRun(ack, false) }},
		{"ecs-copies", func() float64 { return ecsRun(retryFirst, false, lambdaadapter.WithMaxAttempts(3)) }},
		{"ecs-copies-model", func() float64 { return ecsRun(retryFirst, true, lambdaadapter.WithMaxAttempts(3)) }},
		{"ecs-deadletters", func() float64 {
			return ecsRun(retryFirst, false, lambdaadapter.WithMaxAttempts(1), lambdaadapter.WithDeadLetterQueue(dlq))
		}},
		{"floor-putrecords", func() float64 {
			// The stand-in's own PutRecords rate: the copies' worth of
			// records (payload and headers) in calls of 500, one after
			// another, as the adapter would write them at best.
			stream, _ := env.NewStream(b, 1)
			big := make([]kinesistypes.PutRecordsRequestEntry, n)
			for i := range big {
				big[i] = kinesistypes.PutRecordsRequestEntry{PartitionKey: entries[i].PartitionKey, Data: make([]byte, size+200)}
			}
			start := time.Now()
			putRecords(b, env, stream, big)
			return float64(n) / time.Since(start).Seconds()
		}},
	}
	// LAMBDAADAPTER_STORM_VARIANTS (a regular expression) picks variants by
	// name, e.g. "^ecs-(ack|copies-model)$".
	if re := os.Getenv("LAMBDAADAPTER_STORM_VARIANTS"); re != "" {
		pick := regexp.MustCompile(re)
		variants = slices.DeleteFunc(variants, func(v variant) bool { return !pick.MatchString(v.name) })
	}
	rates := map[string][]float64{}
	for b.Loop() {
		for range rounds {
			for _, v := range variants {
				rates[v.name] = append(rates[v.name], v.run())
			}
		}
	}
	for _, v := range variants {
		r := rates[v.name]
		slices.Sort(r)
		b.ReportMetric(r[len(r)/2], v.name+"-records/s")
		b.Logf("%-28s %8.0f records/s (rounds: %.0f)", v.name, r[len(r)/2], r)
	}
}

// modelLatency is the time every PutRecords call takes in the "model"
// variants: a fake Kinesis that answers after it, whatever the number of
// entries, as AWS roughly does for calls of up to 500 entries, instead of
// the stand-in, whose cost grows with every entry.
const modelLatency = 20 * time.Millisecond

// modelKinesis reads from the stand-in and writes to a fake.
type modelKinesis struct {
	*kinesis.Client
	fake *lambdaadaptertest.Kinesis
}

func (m modelKinesis) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	return m.fake.PutRecords(ctx, in, opts...)
}

func (m modelKinesis) PutRecord(ctx context.Context, in *kinesis.PutRecordInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	return m.fake.PutRecord(ctx, in, opts...)
}

// writeCounter is an observe.WriteHook calling f.
type writeCounter func(observe.Write)

func (f writeCounter) OnWrite(w observe.Write) { f(w) }
