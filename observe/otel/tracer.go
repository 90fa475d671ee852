package otel

import (
	"context"
	"strconv"

	"github.com/aws/aws-lambda-go/lambdacontext"
	otelglobal "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/observe"
)

// Tracer puts the adapter's handling of records in OpenTelemetry traces:
// it implements observe.TraceHook (and observe.Flusher). Pass it to
// lambdaadapter.WithHooks. All its methods are safe for concurrent use.
type Tracer struct {
	tp         trace.TracerProvider
	tracer     trace.Tracer
	prop       propagation.TextMapPropagator
	w3c        bool // prop is the default TraceContext: a record without traceparent has no producer context
	system     attribute.KeyValue
	xrayParent bool
}

// NewTracer returns a Tracer whose spans come from tp (nil: the global
// provider, otel.GetTracerProvider()).
func NewTracer(tp trace.TracerProvider, opts ...TracerOption) *Tracer {
	if tp == nil {
		tp = otelglobal.GetTracerProvider()
	}
	c := tracerConfig{system: DefaultSystem}
	for _, o := range opts {
		o.applyTracer(&c)
	}
	if c.system == "" {
		c.system = DefaultSystem
	}
	t := &Tracer{
		tp:         tp,
		tracer:     tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		prop:       c.propagator,
		system:     semconv.MessagingSystemKey.String(c.system),
		xrayParent: c.xrayParent,
	}
	if t.prop == nil {
		t.prop, t.w3c = propagation.TraceContext{}, true
	}
	return t
}

// StartInvocation starts the span of a Lambda invocation: a CONSUMER span
// "process STREAM" (just "process" when the records come from several
// streams), the batch span of the messaging conventions. Its parent is the
// span of ctx, if any (an otellambda SERVER span, say); it links to each
// record's producer context and to the invocation's X-Ray trace (see
// WithXRayParent). end ends it with the number of item failures and an
// error status when the deadline margin cut the invocation.
func (t *Tracer) StartInvocation(ctx context.Context, msgs []*lambdaadapter.Message) (context.Context, func(observe.Invocation)) {
	links := make([]trace.Link, 0, len(msgs)+1)
	if xsc, ok := xrayFromContext(ctx); ok {
		if t.xrayParent && !trace.SpanContextFromContext(ctx).IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, xsc)
		} else {
			links = append(links, trace.Link{SpanContext: xsc, Attributes: []attribute.KeyValue{AttrLinkSource.String(linkSourceXRay)}})
		}
	}
	stream, single := "", true
	for i, m := range msgs {
		if i == 0 {
			stream = m.StreamARN
		} else if m.StreamARN != stream {
			single = false
		}
		if sc := t.producer(m); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, t.system,
		semconv.MessagingOperationName(operationProcess), semconv.MessagingOperationTypeProcess,
		semconv.MessagingBatchMessageCount(len(msgs)), semconv.FaaSTriggerPubSub)
	name := operationProcess
	if n := streamName(stream); single && n != "" {
		name += " " + n
		attrs = append(attrs, semconv.MessagingDestinationName(n), semconv.AWSKinesisStreamName(n))
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc != nil {
		if lc.AwsRequestID != "" {
			attrs = append(attrs, semconv.FaaSInvocationID(lc.AwsRequestID))
		}
		if lc.InvokedFunctionArn != "" {
			attrs = append(attrs, semconv.AWSLambdaInvokedARN(lc.InvokedFunctionArn))
		}
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...), trace.WithAttributes(attrs...))
	return ctx, func(inv observe.Invocation) {
		span.SetAttributes(AttrBatchItemFailures.Int(inv.Failures))
		if inv.Cut {
			span.SetAttributes(AttrCut.Bool(true))
			span.SetStatus(codes.Error, "deadline margin reached with records still running")
		}
		span.End()
	}
}

// StartRecord starts the span of one record's handling: a CONSUMER span
// "process STREAM" whose parent is the span of ctx (the invocation span in
// Lambda mode; none in long-running mode), linked to the record's
// producer context. end sets the outcome and action; an action that leaves
// the record unprocessed (unsettled, dead_letter, retired) sets an error
// status and error.type, and any error of the outcome is recorded as an
// exception event.
func (t *Tracer) StartRecord(ctx context.Context, m *lambdaadapter.Message) (context.Context, func(observe.Record)) {
	stream := streamName(m.StreamARN)
	id := m.SequenceNumber
	if m.Aggregated {
		id += "/" + strconv.Itoa(m.SubSequenceNumber)
	}
	attrs := make([]attribute.KeyValue, 0, 11)
	attrs = append(attrs, t.system,
		semconv.MessagingOperationName(operationProcess), semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationPartitionID(m.ShardID), semconv.MessagingMessageID(id),
		AttrPartitionKey.String(m.PartitionKey), AttrAttempt.Int(m.Attempt))
	if m.Aggregated {
		attrs = append(attrs, AttrSubSequenceNumber.Int(m.SubSequenceNumber))
	}
	name := operationProcess
	if stream != "" {
		name += " " + stream
		attrs = append(attrs, semconv.MessagingDestinationName(stream), semconv.AWSKinesisStreamName(stream))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if sc := t.producer(m); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := t.tracer.Start(ctx, name, opts...)
	return ctx, func(r observe.Record) {
		if span.IsRecording() {
			span.SetAttributes(AttrOutcome.String(r.Outcome), AttrAction.String(string(r.Action)))
			if r.Reason != "" {
				span.SetAttributes(AttrReason.String(r.Reason))
			}
			if r.Err != nil {
				span.RecordError(r.Err)
			}
			if failed(r.Action) {
				desc := string(r.Action)
				if r.Err != nil {
					desc = r.Err.Error()
				}
				span.SetAttributes(semconv.ErrorTypeKey.String(string(r.Action)))
				span.SetStatus(codes.Error, desc)
			}
		}
		span.End()
	}
}

// Inject writes the trace context of ctx (a handler's: its record's span)
// into h with the propagator (the W3C traceparent and tracestate headers by
// default), replacing headers of the same names. It writes nothing when
// ctx holds no valid span context.
func (t *Tracer) Inject(ctx context.Context, h *envelope.Headers) {
	t.prop.Inject(ctx, headerCarrier{h})
}

// Flush calls the tracer provider's ForceFlush, when it has one (the SDK's
// TracerProvider does), so that a Lambda invocation's spans are exported
// before its response, inside the deadline margin; errors go to the
// global OpenTelemetry error handler. In long-running mode it exports the
// spans ended since the last flush.
func (t *Tracer) Flush(ctx context.Context) {
	if f, ok := t.tp.(interface{ ForceFlush(context.Context) error }); ok {
		if err := f.ForceFlush(ctx); err != nil {
			otelglobal.Handle(err)
		}
	}
}

// producer returns the producer's span context read from m's headers
// (invalid when there is none).
func (t *Tracer) producer(m *lambdaadapter.Message) trace.SpanContext {
	if t.w3c {
		if _, ok := m.Headers.Lookup(traceparentHeader); !ok {
			return trace.SpanContext{}
		}
	}
	return trace.SpanContextFromContext(t.prop.Extract(context.Background(), headerCarrier{&m.Headers}))
}

const traceparentHeader = "traceparent"

// headerCarrier is a propagation.TextMapCarrier over RSK1 headers (names
// are case-insensitive there, lower-case when set).
type headerCarrier struct{ h *envelope.Headers }

func (c headerCarrier) Get(key string) string { return c.h.Get(key) }
func (c headerCarrier) Set(key, value string) { c.h.Set(key, value) }
func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, c.h.Len())
	for k := range c.h.All() {
		keys = append(keys, k)
	}
	return keys
}

var (
	_ observe.TraceHook = (*Tracer)(nil)
	_ observe.Flusher   = (*Tracer)(nil)
)
