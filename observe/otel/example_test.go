package otel_test

import (
	"context"
	"fmt"
	"log"
	"slices"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/observe/otel"
)

// One Lambda invocation of two records, the first sent with a producer's
// traceparent, traced and measured. In production the providers come from
// the SDK with an OTLP exporter (or the ADOT collector); here they keep
// what they get in memory.
func Example() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	metrics, err := otel.NewMetrics(mp)
	if err != nil {
		log.Fatal(err)
	}
	handler := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		return lambdaadapter.Ack()
	})
	a, err := lambdaadapter.NewFunction(handler, lambdaadapter.WithHooks(otel.NewTracer(tp), metrics),
		lambdaadapter.WithKinesisClient(lambdaadaptertest.NewKinesis()))
	if err != nil {
		log.Fatal(err)
	}

	b := lambdaadaptertest.NewBatch("orders")
	b.Add("user-1", []byte(`{"id":1}`), "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	b.Add("user-2", []byte(`{"id":2}`))
	if _, err := a.Invoke(context.Background(), b.JSON()); err != nil {
		log.Fatal(err)
	}

	var lines []string
	for _, s := range spans.GetSpans() {
		role := "invocation"
		if s.Parent.IsValid() {
			role = "record"
		}
		lines = append(lines, fmt.Sprintf("%s %s %s, %d link(s)", role, s.SpanKind, s.Name, len(s.Links)))
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == otel.MetricConsumedMessages {
			fmt.Println(m.Name, m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
		}
	}
	// Output:
	// invocation consumer process orders, 1 link(s)
	// record consumer process orders, 0 link(s)
	// record consumer process orders, 1 link(s)
	// messaging.client.consumed.messages 2
}
