package otel_test

import (
	"context"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/observe/otel"
)

var (
	orders  = semconv.MessagingDestinationName("orders")
	system  = semconv.MessagingSystemKey.String("aws.kinesis")
	process = semconv.MessagingOperationName("process")
)

func outcome(o string, a observe.Action) []attribute.KeyValue {
	return []attribute.KeyValue{otel.AttrOutcome.String(o), otel.AttrAction.String(string(a))}
}

// TestMetricsLambda: the counts of two invocations equal their records'
// outcomes: ack ×3 (one with a reply), drop, a counted retry (a copy),
// then an uncounted retry (unsettled, reported); plus the writes, the
// invocations and the oldest record's age.
func TestMetricsLambda(t *testing.T) {
	m, r := newMetrics(t)
	b := lambdaadaptertest.NewBatch("orders")
	for _, p := range []string{"a", "b", "reply", "drop", "retry"} {
		b.Add("k-"+p, []byte(p))
	}
	res := lambdaadaptertest.Run(t, byPayload, b, lambdaadapter.WithHooks(m), lambdaadapter.WithReplyStream("replies"),
		lambdaadapter.WithMaxAttempts(3))
	if !res.AllSettled() {
		t.Fatalf("failures %v", res.Failures)
	}
	b2 := lambdaadaptertest.NewBatch("orders")
	b2.Add("k", []byte("retry"))
	if res := lambdaadaptertest.Run(t, byPayload, b2, lambdaadapter.WithHooks(m)); len(res.Failures) != 1 {
		t.Fatalf("failures %v, want the uncounted retry", res.Failures)
	}

	got := collect(t, r)
	consumed := got[otel.MetricConsumedMessages]
	if consumed.Unit != "{message}" {
		t.Errorf("%s unit %q", consumed.Name, consumed.Unit)
	}
	for _, c := range []struct {
		want  int64
		attrs []attribute.KeyValue
	}{
		{6, []attribute.KeyValue{system, orders, process}},
		{3, outcome("ack", observe.ActionSettled)},
		{1, outcome("drop", observe.ActionSettled)},
		{1, outcome("retry", observe.ActionCopy)},
		{1, append(outcome("retry", observe.ActionUnsettled), semconv.ErrorTypeKey.String("unsettled"))},
		{0, []attribute.KeyValue{semconv.MessagingDestinationPartitionID(lambdaadaptertest.DefaultShardID)}},
	} {
		if n := sum(t, consumed, c.attrs...); n != c.want {
			t.Errorf("%s %v: %d, want %d", consumed.Name, c.attrs, n, c.want)
		}
	}
	if n := count(t, got[otel.MetricProcessDuration], system, orders, process); n != 6 {
		t.Errorf("%s: %d values, want 6", otel.MetricProcessDuration, n)
	}
	if u := got[otel.MetricProcessDuration].Unit; u != "s" {
		t.Errorf("%s unit %q, want s", otel.MetricProcessDuration, u)
	}
	if n := count(t, got[otel.MetricRecordAge], system, orders); n != 6 {
		t.Errorf("%s: %d values, want 6", otel.MetricRecordAge, n)
	}
	writes := got[otel.MetricWrites]
	if n := sum(t, writes, otel.AttrWriteKind.String("copy")); n != 1 {
		t.Errorf("copies written: %d, want 1", n)
	}
	if n := sum(t, writes, otel.AttrWriteKind.String("reply"), orders); n != 1 {
		t.Errorf("replies written: %d, want 1", n)
	}
	if n := count(t, got[otel.MetricInvocationDuration], orders); n != 2 {
		t.Errorf("%s: %d values, want 2", otel.MetricInvocationDuration, n)
	}
	if n := sum(t, got[otel.MetricBatchItemFailures], orders); n != 1 {
		t.Errorf("%s: %d, want 1", otel.MetricBatchItemFailures, n)
	}
	if n := sum(t, got[otel.MetricInvocationCuts], orders); n != 0 {
		t.Errorf("%s: %d, want 0", otel.MetricInvocationCuts, n)
	}
	if v, ok := gauge[float64](t, got[otel.MetricOldestRecordAge], orders); !ok || v <= 0 {
		t.Errorf("%s: %v (present %v), want the oldest record's age", otel.MetricOldestRecordAge, v, ok)
	}
}

// TestMetricsWriteFailure: a write the service refuses is counted with its
// error code as error.type, and its record is counted unsettled.
func TestMetricsWriteFailure(t *testing.T) {
	m, r := newMetrics(t, otel.WithShardAttribute())
	k := lambdaadaptertest.NewKinesis()
	k.Fail = func(stream, _ string, _ []byte) string {
		if stream == "replies" {
			return "AccessDeniedException"
		}
		return ""
	}
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("k", []byte("reply"))
	res := lambdaadaptertest.Run(t, byPayload, b, lambdaadapter.WithHooks(m), lambdaadapter.WithReplyStream("replies"),
		lambdaadapter.WithKinesisClient(k))
	if len(res.Failures) != 1 {
		t.Fatalf("failures %v, want the record whose reply failed", res.Failures)
	}
	got := collect(t, r)
	shard := semconv.MessagingDestinationPartitionID(lambdaadaptertest.DefaultShardID)
	if n := sum(t, got[otel.MetricWrites], otel.AttrWriteKind.String("reply"), shard,
		semconv.ErrorTypeKey.String("AccessDeniedException")); n != 1 {
		t.Errorf("failed replies: %d, want 1", n)
	}
	if n := sum(t, got[otel.MetricConsumedMessages], shard, semconv.ErrorTypeKey.String("unsettled")); n != 1 {
		t.Errorf("unsettled records: %d, want 1", n)
	}
}

// flushCounter is a provider with ForceFlush, as the SDK's have.
type flushCounter struct{ n atomic.Int32 }

func (f *flushCounter) ForceFlush(context.Context) error { f.n.Add(1); return nil }

type flushingMeterProvider struct {
	metric.MeterProvider
	flushCounter
}

type flushingTracerProvider struct {
	trace.TracerProvider
	flushCounter
}

// TestFlush: in Lambda mode the adapter flushes its hooks once per
// invocation, and the Metrics and the Tracer force their providers to
// export then.
func TestFlush(t *testing.T) {
	mp := &flushingMeterProvider{MeterProvider: noop.NewMeterProvider()}
	tp := &flushingTracerProvider{TracerProvider: tracenoop.NewTracerProvider()}
	m, err := otel.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("k", []byte("a"))
	lambdaadaptertest.Run(t, byPayload, b, lambdaadapter.WithHooks(otel.NewTracer(tp), m))
	lambdaadaptertest.Run(t, byPayload, b, lambdaadapter.WithHooks(otel.NewTracer(tp), m))
	if mp.n.Load() != 2 || tp.n.Load() != 2 {
		t.Errorf("%d meter and %d tracer provider flushes, want 2 and 2", mp.n.Load(), tp.n.Load())
	}
	// A provider without ForceFlush: Flush does nothing.
	m2, err := otel.NewMetrics(noop.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	m2.Flush(t.Context())
	otel.NewTracer(tracenoop.NewTracerProvider()).Flush(t.Context())
}
