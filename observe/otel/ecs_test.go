package otel_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/observe/otel"
)

// TestLongRunning: in long-running mode each record gets a CONSUMER
// process span without a parent (no invocation), linked to its producer;
// a reply carries the record span's traceparent; the metrics count the
// records, reads, lease changes and checkpoints, and report the in-flight
// records, the leases held and MillisBehindLatest per shard while the
// shard is held.
func TestLongRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, exp := newTracer(t)
		m, r := newMetrics(t)
		k := awsfake.NewKinesis()
		k.CreateStream("orders", 1)
		k.CreateStream("replies", 1)
		shard := "shardId-000000000000"
		h, producer := traceparent(3)
		data, err := envelope.Encode(envelope.Headers{{Name: "traceparent", Value: h}}, []byte("reply"))
		if err != nil {
			t.Fatal(err)
		}
		seqLinked := k.PutTo("orders", shard, "k1", data)
		seqPlain := k.PutTo("orders", shard, "k2", []byte("a"))

		a, err := lambdaadapter.NewService(byPayload, lambdaadapter.WithStream("orders"),
			lambdaadapter.WithKinesisClient(k), lambdaadapter.WithLeaseStore(lease.NewMemory()), lambdaadapter.WithOwnerID("w1"),
			lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()), lambdaadapter.WithReplyStream("replies"),
			lambdaadapter.WithHooks(tr, m))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		time.Sleep(90 * time.Second) // past the first flush interval
		synctest.Wait()

		running := collect(t, r)
		behind := semconv.MessagingDestinationPartitionID(shard)
		if _, ok := gauge[float64](t, running[otel.MetricBehindLatest], orders, behind); !ok {
			t.Errorf("%s: no value for %s while it is held", otel.MetricBehindLatest, shard)
		}
		if v, ok := gauge[int64](t, running[otel.MetricLeasesHeld], orders); !ok || v != 1 {
			t.Errorf("%s: %d (present %v), want 1", otel.MetricLeasesHeld, v, ok)
		}
		if v, ok := gauge[int64](t, running[otel.MetricRecordsInFlight], orders); !ok || v != 0 {
			t.Errorf("%s: %d (present %v), want 0", otel.MetricRecordsInFlight, v, ok)
		}
		if _, ok := gauge[float64](t, running[otel.MetricOldestRecordAge], orders); !ok {
			t.Errorf("%s: no value", otel.MetricOldestRecordAge)
		}

		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}

		spans := exp.GetSpans()
		recs := map[string]int{}
		for _, s := range spans {
			id := attrs(s)[semconv.MessagingMessageIDKey].AsString()
			recs[id]++
			if s.Name != "process orders" || s.SpanKind != trace.SpanKindConsumer || s.Parent.IsValid() {
				t.Errorf("span %q kind %v parent %v, want a CONSUMER \"process orders\" without a parent", s.Name, s.SpanKind, s.Parent)
			}
			wantAttrs(t, s, system, orders, semconv.AWSKinesisStreamName("orders"), semconv.MessagingOperationTypeProcess,
				semconv.MessagingDestinationPartitionID(shard), otel.AttrAction.String("settled"), otel.AttrAttempt.Int(1))
			switch id {
			case seqLinked:
				if len(s.Links) != 1 || !linked(s, producer) {
					t.Errorf("links %v, want the producer", s.Links)
				}
				var reply []string
				for _, w := range k.Written() {
					reply = append(reply, w.Headers.Get("traceparent"))
				}
				if want := w3c(s.SpanContext); len(reply) != 1 || reply[0] != want {
					t.Errorf("reply traceparent %q, want the record span's %q", reply, want)
				}
			case seqPlain:
				if len(s.Links) != 0 {
					t.Errorf("links %v, want none", s.Links)
				}
			default:
				t.Errorf("span of message %q", id)
			}
		}
		if len(spans) != 2 || recs[seqLinked] != 1 || recs[seqPlain] != 1 {
			t.Errorf("spans %v, want one per record", recs)
		}

		got := collect(t, r)
		for _, c := range []struct {
			name  string
			want  int64
			attrs []attribute.KeyValue
		}{
			{otel.MetricConsumedMessages, 2, append(outcome("ack", observe.ActionSettled), system, orders)},
			{otel.MetricRecordsRead, 2, []attribute.KeyValue{orders}},
			{otel.MetricLeaseChanges, 1, []attribute.KeyValue{orders, otel.AttrLeaseChange.String("taken")}},
			{otel.MetricLeaseChanges, 1, []attribute.KeyValue{orders, otel.AttrLeaseChange.String("released")}},
			{otel.MetricWrites, 1, []attribute.KeyValue{orders, otel.AttrWriteKind.String("reply")}},
		} {
			if n := sum(t, got[c.name], c.attrs...); n != c.want {
				t.Errorf("%s %v: %d, want %d", c.name, c.attrs, n, c.want)
			}
		}
		if n := sum(t, got[otel.MetricCheckpointWrites], orders); n < 1 {
			t.Errorf("%s: %d, want at least 1", otel.MetricCheckpointWrites, n)
		}
		if n := sum(t, got[otel.MetricCheckpointWrites], semconv.ErrorTypeKey.String("_OTHER")); n != 0 {
			t.Errorf("%d failed checkpoints", n)
		}
		if n := count(t, got[otel.MetricProcessDuration], orders); n != 2 {
			t.Errorf("%s: %d values, want 2", otel.MetricProcessDuration, n)
		}
		if _, ok := gauge[float64](t, got[otel.MetricBehindLatest], behind); ok {
			t.Errorf("%s: %s still reported after its lease was released", otel.MetricBehindLatest, shard)
		}
		if v, ok := gauge[int64](t, got[otel.MetricLeasesHeld], orders); !ok || v != 0 {
			t.Errorf("%s after shutdown: %d (present %v), want 0", otel.MetricLeasesHeld, v, ok)
		}
	})
}
