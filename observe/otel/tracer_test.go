package otel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/observe/otel"
)

// split returns the invocation spans of spans and its record spans by
// messaging.message.id.
func split(t *testing.T, spans tracetest.SpanStubs) (inv []tracetest.SpanStub, recs map[string]tracetest.SpanStub) {
	t.Helper()
	recs = map[string]tracetest.SpanStub{}
	for _, s := range spans {
		if _, ok := attrs(s)[semconv.MessagingBatchMessageCountKey]; ok {
			inv = append(inv, s)
			continue
		}
		id := attrs(s)[semconv.MessagingMessageIDKey].AsString()
		if _, dup := recs[id]; dup {
			t.Errorf("two record spans for message %s", id)
		}
		recs[id] = s
	}
	return inv, recs
}

// TestTracerLambda: one invocation of five records, four of them carrying
// a producer's traceparent. The invocation span links to each producer;
// each record has a CONSUMER process span, child of the invocation span,
// linked to its producer, with the messaging attributes; the handler runs
// in its record's span (a reply carries that span's traceparent); a
// counted copy keeps the producer's traceparent.
func TestTracerLambda(t *testing.T) {
	tr, exp := newTracer(t)
	b := lambdaadaptertest.NewBatch("orders")
	payloads := []string{"a", "b", "reply", "retry", "plain"}
	seqs := map[string]string{}
	producers := map[string]trace.SpanContext{}
	for i, p := range payloads {
		if p == "plain" {
			seqs[p] = b.Add("k-"+p, []byte(p))
			continue
		}
		h, sc := traceparent(i + 1)
		producers[p] = sc
		seqs[p] = b.Add("k-"+p, []byte(p), "traceparent", h, "x-tenant", "acme")
	}
	var handlerSpans = map[string]trace.SpanContext{}
	h := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		handlerSpans[string(m.Payload)] = trace.SpanContextFromContext(ctx) // WithConcurrency(1): no race
		return byPayload(ctx, m)
	})
	res := lambdaadaptertest.Run(t, h, b, lambdaadapter.WithHooks(tr), lambdaadapter.WithReplyStream("replies"),
		lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithConcurrency(1))
	if !res.AllSettled() {
		t.Fatalf("failures %v", res.Failures)
	}

	inv, recs := split(t, exp.GetSpans())
	if len(inv) != 1 {
		t.Fatalf("%d invocation spans, want 1", len(inv))
	}
	is := inv[0]
	if is.Name != "process orders" || is.SpanKind != trace.SpanKindConsumer || is.Parent.IsValid() {
		t.Errorf("invocation span %q kind %v parent %v, want a root CONSUMER span \"process orders\"", is.Name, is.SpanKind, is.Parent)
	}
	wantAttrs(t, is, semconv.MessagingSystemKey.String("aws.kinesis"), semconv.MessagingOperationName("process"),
		semconv.MessagingOperationTypeProcess, semconv.MessagingBatchMessageCount(5), semconv.MessagingDestinationName("orders"),
		semconv.AWSKinesisStreamName("orders"), semconv.FaaSTriggerPubSub, otel.AttrBatchItemFailures.Int(0))
	if len(is.Links) != len(producers) {
		t.Errorf("invocation span has %d links, want one per record with a producer context (%d)", len(is.Links), len(producers))
	}
	for p, sc := range producers {
		if !linked(is, sc) {
			t.Errorf("invocation span has no link to %s's producer", p)
		}
	}

	if len(recs) != len(payloads) {
		t.Fatalf("%d record spans, want %d", len(recs), len(payloads))
	}
	for _, p := range payloads {
		s, ok := recs[seqs[p]]
		if !ok {
			t.Errorf("%s: no span with messaging.message.id %s", p, seqs[p])
			continue
		}
		if s.Name != "process orders" || s.SpanKind != trace.SpanKindConsumer {
			t.Errorf("%s: span %q kind %v, want CONSUMER \"process orders\"", p, s.Name, s.SpanKind)
		}
		if s.Parent.SpanID() != is.SpanContext.SpanID() || s.SpanContext.TraceID() != is.SpanContext.TraceID() {
			t.Errorf("%s: parent %v, want the invocation span %v", p, s.Parent.SpanID(), is.SpanContext.SpanID())
		}
		if sc, ok := producers[p]; ok {
			if len(s.Links) != 1 || !linked(s, sc) {
				t.Errorf("%s: links %v, want its producer %v", p, s.Links, sc)
			}
		} else if len(s.Links) != 0 {
			t.Errorf("%s: links %v, want none (no traceparent)", p, s.Links)
		}
		if got := handlerSpans[p]; got.SpanID() != s.SpanContext.SpanID() {
			t.Errorf("%s: the handler ran in span %v, want its record's %v", p, got.SpanID(), s.SpanContext.SpanID())
		}
		action := observe.ActionSettled
		outcome := "ack"
		if p == "retry" {
			action, outcome = observe.ActionCopy, "retry"
		}
		wantAttrs(t, s, semconv.MessagingSystemKey.String("aws.kinesis"), semconv.MessagingOperationName("process"),
			semconv.MessagingOperationTypeProcess, semconv.MessagingDestinationName("orders"), semconv.AWSKinesisStreamName("orders"),
			semconv.MessagingDestinationPartitionID(lambdaadaptertest.DefaultShardID), otel.AttrPartitionKey.String("k-"+p),
			otel.AttrAttempt.Int(1), otel.AttrOutcome.String(outcome), otel.AttrAction.String(string(action)))
		if _, ok := attrs(s)[semconv.MessagingBatchMessageCountKey]; ok {
			t.Errorf("%s: a single-record span has messaging.batch.message_count", p)
		}
		if s.Status.Code != codes.Unset {
			t.Errorf("%s: status %v, want unset", p, s.Status)
		}
	}

	var reply, copied []string
	for _, w := range res.Kinesis.Written() {
		switch {
		case strings.HasSuffix(w.Stream, "replies"):
			reply = append(reply, w.Headers.Get("traceparent"))
		case string(w.Payload) == "retry":
			copied = append(copied, w.Headers.Get("traceparent"))
		}
	}
	if want := w3c(recs[seqs["reply"]].SpanContext); len(reply) != 1 || reply[0] != want {
		t.Errorf("reply traceparent %q, want its record's span %q", reply, want)
	}
	if want := w3c(producers["retry"]); len(copied) != 1 || copied[0] != want {
		t.Errorf("copy traceparent %q, want the producer's %q", copied, want)
	}
}

// TestTracerUnsettled: a record left unsettled (uncounted Retry) ends its
// span with an error status, error.type and the handler's error as an
// exception event; the invocation span counts the item failure.
func TestTracerUnsettled(t *testing.T) {
	tr, exp := newTracer(t)
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("k", []byte("retry"))
	res := lambdaadaptertest.Run(t, byPayload, b, lambdaadapter.WithHooks(tr))
	if len(res.Failures) != 1 {
		t.Fatalf("failures %v, want the record", res.Failures)
	}
	inv, recs := split(t, exp.GetSpans())
	if len(inv) != 1 || len(recs) != 1 {
		t.Fatalf("%d invocation and %d record spans, want 1 and 1", len(inv), len(recs))
	}
	wantAttrs(t, inv[0], otel.AttrBatchItemFailures.Int(1))
	for _, s := range recs {
		if s.Status.Code != codes.Error || s.Status.Description != "later" {
			t.Errorf("status %+v, want error \"later\"", s.Status)
		}
		wantAttrs(t, s, otel.AttrAction.String("unsettled"), otel.AttrOutcome.String("retry"), semconv.ErrorTypeKey.String("unsettled"))
		if len(s.Events) != 1 || s.Events[0].Name != "exception" {
			t.Errorf("events %+v, want one exception", s.Events)
		}
	}
}

const xrayHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"

// xrayContext is what aws-lambda-go's lambda.Start gives a handler: the
// invocation's trace header under the key "x-amzn-trace-id", and the
// Lambda context.
func xrayContext(t *testing.T) context.Context {
	ctx := context.WithValue(t.Context(), "x-amzn-trace-id", xrayHeader) //nolint:staticcheck // aws-lambda-go's own key
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-1",
		InvokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:consumer"})
}

// TestTracerXRay: the invocation's X-Ray trace, read from the context
// aws-lambda-go provides, is a link of the invocation span (converted to a
// W3C trace id); with WithXRayParent it is its parent. The Lambda
// request id is faas.invocation_id.
func TestTracerXRay(t *testing.T) {
	xtid, _ := trace.TraceIDFromHex("5759e988bd862e3fe1be46a994272793")
	xsid, _ := trace.SpanIDFromHex("53995c3f42cd8ad8")
	for _, parent := range []bool{false, true} {
		name := "link"
		var opts []otel.TracerOption
		if parent {
			name = "parent"
			opts = append(opts, otel.WithXRayParent())
		}
		t.Run(name, func(t *testing.T) {
			t.Setenv("_X_AMZN_TRACE_ID", "Root=1-00000000-000000000000000000000001;Parent=0000000000000001;Sampled=1")
			tr, exp := newTracer(t, opts...)
			b := lambdaadaptertest.NewBatch("orders")
			h, producer := traceparent(7)
			b.Add("k", []byte("a"), "traceparent", h)
			lambdaadaptertest.RunContext(xrayContext(t), t, byPayload, b, lambdaadapter.WithHooks(tr))
			inv, recs := split(t, exp.GetSpans())
			if len(inv) != 1 || len(recs) != 1 {
				t.Fatalf("%d invocation and %d record spans", len(inv), len(recs))
			}
			is := inv[0]
			wantAttrs(t, is, semconv.FaaSInvocationID("req-1"),
				semconv.AWSLambdaInvokedARN("arn:aws:lambda:us-east-1:123456789012:function:consumer"))
			var xray []trace.Link
			for _, l := range is.Links {
				if l.SpanContext.TraceID() == xtid {
					xray = append(xray, trace.Link{SpanContext: l.SpanContext, Attributes: l.Attributes})
				}
			}
			if !linked(is, producer) {
				t.Errorf("no link to the producer")
			}
			if parent {
				if is.Parent.TraceID() != xtid || is.Parent.SpanID() != xsid || !is.Parent.IsRemote() || !is.Parent.IsSampled() {
					t.Errorf("parent %+v, want the X-Ray trace", is.Parent)
				}
				if len(xray) != 0 {
					t.Errorf("X-Ray links %v besides the parent", xray)
				}
				return
			}
			if is.Parent.IsValid() {
				t.Errorf("parent %v, want none", is.Parent)
			}
			if len(xray) != 1 || xray[0].SpanContext.SpanID() != xsid || !xray[0].SpanContext.IsSampled() ||
				len(xray[0].Attributes) != 1 || xray[0].Attributes[0] != otel.AttrLinkSource.String("aws.xray") {
				t.Errorf("X-Ray links %+v, want one to %s/%s marked aws.xray", xray, xtid, xsid)
			}
		})
	}
}

// TestTracerAmbientParent: a span already in the invocation context (an
// otellambda SERVER span) is the invocation span's parent, and the X-Ray
// trace stays a link even with WithXRayParent.
func TestTracerAmbientParent(t *testing.T) {
	tr, exp := newTracer(t, otel.WithXRayParent())
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	server := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(xrayContext(t), server)
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("k", []byte("a"))
	lambdaadaptertest.RunContext(ctx, t, byPayload, b, lambdaadapter.WithHooks(tr))
	inv, _ := split(t, exp.GetSpans())
	if len(inv) != 1 {
		t.Fatalf("%d invocation spans", len(inv))
	}
	if inv[0].Parent.SpanID() != sid {
		t.Errorf("parent %v, want the ambient span %v", inv[0].Parent.SpanID(), sid)
	}
	if len(inv[0].Links) != 1 {
		t.Errorf("links %v, want the X-Ray link", inv[0].Links)
	}
}

// TestTracerKPL: the user records of a KPL aggregate have one span each,
// their message id the aggregate's sequence number and their index.
func TestTracerKPL(t *testing.T) {
	tr, exp := newTracer(t)
	b := lambdaadaptertest.NewBatch("orders")
	h, producer := traceparent(9)
	seq := b.AddAggregate(
		lambdaadaptertest.UserRecord{PartitionKey: "u0", Payload: []byte("a")},
		lambdaadaptertest.UserRecord{PartitionKey: "u1", Payload: []byte("b"), Headers: []string{"traceparent", h}})
	res := lambdaadaptertest.Run(t, byPayload, b, lambdaadapter.WithHooks(tr))
	if !res.AllSettled() {
		t.Fatalf("failures %v", res.Failures)
	}
	_, recs := split(t, exp.GetSpans())
	s0, ok0 := recs[seq+"/0"]
	s1, ok1 := recs[seq+"/1"]
	if !ok0 || !ok1 {
		t.Fatalf("record spans %v, want %s/0 and %s/1", recs, seq, seq)
	}
	wantAttrs(t, s0, otel.AttrSubSequenceNumber.Int(0), otel.AttrPartitionKey.String("u0"))
	wantAttrs(t, s1, otel.AttrSubSequenceNumber.Int(1), otel.AttrPartitionKey.String("u1"))
	if len(s0.Links) != 0 || !linked(s1, producer) {
		t.Errorf("links %v and %v, want only the second user record linked", s0.Links, s1.Links)
	}
}

// TestTracerSystem: WithSystem changes messaging.system.
func TestTracerSystem(t *testing.T) {
	tr, exp := newTracer(t, otel.WithSystem("aws_kinesis"))
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("k", []byte("a"))
	lambdaadaptertest.Run(t, byPayload, b, lambdaadapter.WithHooks(tr))
	for _, s := range exp.GetSpans() {
		wantAttrs(t, s, attribute.String("messaging.system", "aws_kinesis"))
	}
}

// TestTracerDeadLetter: a record that reaches the attempt cap goes to the
// dead-letter stream with its producer's traceparent; its span ends with
// an error status and error.type dead_letter.
func TestTracerDeadLetter(t *testing.T) {
	tr, exp := newTracer(t)
	b := lambdaadaptertest.NewBatch("orders")
	h, producer := traceparent(5)
	b.Add("k", []byte("retry"), "traceparent", h)
	res := lambdaadaptertest.Run(t, byPayload, b, lambdaadapter.WithHooks(tr), lambdaadapter.WithMaxAttempts(1),
		lambdaadapter.WithDeadLetterStream("dlq"))
	if !res.AllSettled() {
		t.Fatalf("failures %v", res.Failures)
	}
	var dead []string
	for _, w := range res.Kinesis.Written() {
		if strings.HasSuffix(w.Stream, "dlq") {
			dead = append(dead, w.Headers.Get("traceparent"))
		}
	}
	if want := w3c(producer); len(dead) != 1 || dead[0] != want {
		t.Errorf("dead letter traceparent %q, want the producer's %q", dead, want)
	}
	_, recs := split(t, exp.GetSpans())
	for _, s := range recs {
		if s.Status.Code != codes.Error {
			t.Errorf("status %+v, want error", s.Status)
		}
		wantAttrs(t, s, otel.AttrAction.String("dead_letter"), semconv.ErrorTypeKey.String("dead_letter"))
		if !linked(s, producer) {
			t.Errorf("links %v, want the producer", s.Links)
		}
	}
}
