package otel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/observe/otel"
)

// newTracer returns a Tracer over an SDK provider that exports each span
// synchronously to an in-memory exporter.
func newTracer(t testing.TB, opts ...otel.TracerOption) (*otel.Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return otel.NewTracer(tp, opts...), exp
}

// newMetrics returns Metrics over an SDK provider read by hand.
func newMetrics(t testing.TB, opts ...otel.MetricsOption) (*otel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otel.NewMetrics(mp, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m, r
}

// traceparent is a W3C traceparent of a sampled producer span: trace id
// 32 hex digits ending in n, span id 16 ending in n.
func traceparent(n int) (header string, sc trace.SpanContext) {
	tid, _ := trace.TraceIDFromHex(fmt.Sprintf("4bf92f3577b34da6a3ce929d%08x", n))
	sid, _ := trace.SpanIDFromHex(fmt.Sprintf("00f067aa%08x", n))
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return fmt.Sprintf("00-%s-%s-01", tid, sid), sc
}

// w3c is the traceparent of a span context.
func w3c(sc trace.SpanContext) string { return fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID()) }

// attrs returns the span's attributes as a map.
func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// wantAttrs fails t for every key of want the span lacks or holds with
// another value.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want ...attribute.KeyValue) {
	t.Helper()
	got := attrs(s)
	for _, kv := range want {
		if v, ok := got[kv.Key]; !ok || v != kv.Value {
			t.Errorf("span %q: %s = %v (present %v), want %v", s.Name, kv.Key, v.Emit(), ok, kv.Value.Emit())
		}
	}
}

// linked reports whether s links to sc.
func linked(s tracetest.SpanStub, sc trace.SpanContext) bool {
	for _, l := range s.Links {
		if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() {
			return true
		}
	}
	return false
}

// byPayload answers by payload: "retry" → Retry, "drop" → Drop, "reply"
// writes a reply first; anything else → Ack.
var byPayload = lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
	switch string(m.Payload) {
	case "retry":
		return lambdaadapter.Retry(errors.New("later"))
	case "drop":
		return lambdaadapter.Drop(errors.New("poison"))
	case "reply":
		if err := m.Reply(ctx, lambdaadapter.Reply{Payload: []byte("answer")}); err != nil {
			return lambdaadapter.Retry(err)
		}
	}
	return lambdaadapter.Ack()
})

// collect reads every metric from r.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// match reports whether set holds every key-value of want.
func match(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum adds up the points of the int64 sum m whose attributes hold want.
func sum(t *testing.T, m metricdata.Metrics, want ...attribute.KeyValue) int64 {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T, not an int64 sum", m.Name, m.Data)
	}
	var n int64
	for _, p := range s.DataPoints {
		if match(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

// count adds up the counts of the histogram m's points whose attributes
// hold want.
func count(t *testing.T, m metricdata.Metrics, want ...attribute.KeyValue) uint64 {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is %T, not a float64 histogram", m.Name, m.Data)
	}
	var n uint64
	for _, p := range h.DataPoints {
		if match(p.Attributes, want) {
			n += p.Count
		}
	}
	return n
}

// gauge returns the value of the gauge m's point whose attributes hold
// want, and whether there is one (a metric without points is not
// collected at all).
func gauge[N int64 | float64](t *testing.T, m metricdata.Metrics, want ...attribute.KeyValue) (N, bool) {
	t.Helper()
	if m.Data == nil {
		return 0, false
	}
	g, ok := m.Data.(metricdata.Gauge[N])
	if !ok {
		t.Fatalf("%s is %T, not a gauge of %T", m.Name, m.Data, N(0))
	}
	for _, p := range g.DataPoints {
		if match(p.Attributes, want) {
			return p.Value, true
		}
	}
	return 0, false
}
