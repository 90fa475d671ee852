package otel_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/observe/otel"
)

// BenchmarkOnRecord is the cost of one record's metrics once its
// attribute set is known.
func BenchmarkOnRecord(b *testing.B) {
	m, _ := newMetrics(b)
	r := observe.Record{Mode: observe.ModeLambda, Stream: "arn:aws:kinesis:us-east-1:123456789012:stream/orders",
		ShardID: "shardId-000000000000", SequenceNumber: "4959", Outcome: "ack", Action: observe.ActionSettled,
		Attempt: 1, Handled: time.Millisecond, Age: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		m.OnRecord(r)
	}
}

// BenchmarkStartRecord is the cost of one record's span (sampled, with a
// producer link) through an SDK provider that drops what it exports.
func BenchmarkStartRecord(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	tr := otel.NewTracer(tp)
	h, _ := traceparent(1)
	m := &lambdaadapter.Message{StreamARN: "arn:aws:kinesis:us-east-1:123456789012:stream/orders",
		ShardID: "shardId-000000000000", SequenceNumber: "4959", PartitionKey: "k", Attempt: 1,
		Headers: envelope.Headers{{Name: "traceparent", Value: h}}}
	r := observe.Record{Outcome: "ack", Action: observe.ActionSettled}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, end := tr.StartRecord(ctx, m)
		end(r)
	}
}
