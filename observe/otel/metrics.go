package otel

import (
	"context"
	"errors"
	"sync"

	otelglobal "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/shardsettle/lambdaadapter/observe"
)

// Metric names. The first two are the messaging semantic conventions'
// consumer metrics; the others, which the conventions do not cover, are
// the adapter's own.
const (
	MetricConsumedMessages   = "messaging.client.consumed.messages"
	MetricProcessDuration    = "messaging.process.duration"
	MetricRecordAge          = "lambdaadapter.record.age"
	MetricOldestRecordAge    = "lambdaadapter.records.oldest_age"
	MetricRecordsInFlight    = "lambdaadapter.records.in_flight"
	MetricRecordsRead        = "lambdaadapter.records.read"
	MetricWrites             = "lambdaadapter.writes"
	MetricInvocationDuration = "lambdaadapter.invocation.duration"
	MetricBatchItemFailures  = "lambdaadapter.invocation.batch_item_failures"
	MetricInvocationCuts     = "lambdaadapter.invocation.cuts"
	MetricBehindLatest       = "lambdaadapter.shard.behind_latest"
	MetricLeasesHeld         = "lambdaadapter.leases.held"
	MetricLeaseChanges       = "lambdaadapter.lease.changes"
	MetricCheckpointWrites   = "lambdaadapter.checkpoint.writes"
)

// Histogram bucket boundaries, in seconds.
var (
	// processBuckets are the conventions' advice for messaging durations.
	processBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	// invocationBuckets reach Lambda's 15-minute limit.
	invocationBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900}
	// ageBuckets reach a day: a consumer that far behind is past alarming.
	ageBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600, 21600, 86400}
)

// Metrics records the adapter's events as OpenTelemetry metrics: it
// implements observe.RecordHook, WriteHook, InvocationHook, ReadHook,
// LeaseHook, CheckpointHook, InFlightHook and Flusher. Pass it to
// lambdaadapter.WithHooks. All its methods are safe for concurrent use; an
// event costs an instrument update on an attribute set that is built once
// per distinct set and then reused.
type Metrics struct {
	mp        metric.MeterProvider
	system    attribute.KeyValue
	shardAttr bool

	consumed     metric.Int64Counter
	processDur   metric.Float64Histogram
	recordAge    metric.Float64Histogram
	oldest       metric.Float64Gauge
	inFlight     metric.Int64Gauge
	read         metric.Int64Counter
	writes       metric.Int64Counter
	invDur       metric.Float64Histogram
	itemFailures metric.Int64Counter
	cuts         metric.Int64Counter
	leasesHeld   metric.Int64Gauge
	leaseChanges metric.Int64Counter
	checkpoints  metric.Int64Counter
	behindGauge  metric.Float64ObservableGauge

	setsMu sync.RWMutex
	sets   map[setKey]metric.MeasurementOption

	mu     sync.Mutex
	behind map[shardKey]float64 // MillisBehindLatest of each shard read, in seconds
}

type shardKey struct{ stream, shard string }

// NewMetrics returns Metrics whose instruments come from mp (nil: the
// global provider, otel.GetMeterProvider()). It returns an error when an
// instrument cannot be created.
func NewMetrics(mp metric.MeterProvider, opts ...MetricsOption) (*Metrics, error) {
	if mp == nil {
		mp = otelglobal.GetMeterProvider()
	}
	c := metricsConfig{system: DefaultSystem}
	for _, o := range opts {
		o.applyMetrics(&c)
	}
	if c.system == "" {
		c.system = DefaultSystem
	}
	m := &Metrics{mp: mp, system: semconv.MessagingSystemKey.String(c.system), shardAttr: c.shardAttr,
		sets: map[setKey]metric.MeasurementOption{}, behind: map[shardKey]float64{}}
	meter := mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string, buckets []float64) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	intGauge := func(name, unit, desc string) metric.Int64Gauge {
		g, err := meter.Int64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	m.consumed = counter(MetricConsumedMessages, "{message}", "Records delivered to the handler (or concluded without it), by outcome and action.")
	m.processDur = histogram(MetricProcessDuration, "How long the handler ran for a record (a batch handler: its batch).", processBuckets)
	m.recordAge = histogram(MetricRecordAge, "Age of each record (now minus its arrival time) when its handler returned.", ageBuckets)
	oldest, err := meter.Float64Gauge(MetricOldestRecordAge, metric.WithUnit("s"),
		metric.WithDescription("Now minus the arrival time of the oldest record: of each Lambda invocation at its end, of the records in flight in long-running mode."))
	errs = append(errs, err)
	m.oldest = oldest
	m.inFlight = intGauge(MetricRecordsInFlight, "{record}", "Long-running mode: records read and not yet settled.")
	m.read = counter(MetricRecordsRead, "{record}", "Long-running mode: records returned by GetRecords (or a fan-out subscription).")
	m.writes = counter(MetricWrites, "{record}", "Copies, delay messages, dead letters and replies written or failed (error.type).")
	m.invDur = histogram(MetricInvocationDuration, "Lambda mode: each invocation, from its start to its response.", invocationBuckets)
	m.itemFailures = counter(MetricBatchItemFailures, "{record}", "Lambda mode: item identifiers reported in the partial batch response.")
	m.cuts = counter(MetricInvocationCuts, "{invocation}", "Lambda mode: invocations that reached the deadline margin with records still running.")
	m.leasesHeld = intGauge(MetricLeasesHeld, "{lease}", "Long-running mode: leases this worker holds.")
	m.leaseChanges = counter(MetricLeaseChanges, "{change}", "Long-running mode: leases taken, stolen, received, lost, handed on or released.")
	m.checkpoints = counter(MetricCheckpointWrites, "{checkpoint}", "Long-running mode: checkpoint writes, failed ones with error.type.")
	behind, err := meter.Float64ObservableGauge(MetricBehindLatest, metric.WithUnit("s"),
		metric.WithDescription("Long-running mode: MillisBehindLatest of the last read of each shard this worker holds."))
	errs = append(errs, err)
	m.behindGauge = behind
	if err == nil {
		_, err = meter.RegisterCallback(m.observeBehind, behind)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// setKey identifies an attribute set: its kind and up to five values.
type setKey struct {
	kind                      uint8
	stream, shard, a, b, errT string
}

const (
	setStream     uint8 = iota // stream (and shard)
	setRecord                  // + outcome, action, error.type
	setWrite                   // + write kind, error.type
	setLease                   // + lease change
	setCheckpoint              // + error.type
	setBehind                  // stream and shard always
)

// set returns the measurement option of k's attributes, built once.
func (m *Metrics) set(k setKey) metric.MeasurementOption {
	m.setsMu.RLock()
	o, ok := m.sets[k]
	m.setsMu.RUnlock()
	if ok {
		return o
	}
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, m.system)
	if k.stream != "" {
		attrs = append(attrs, semconv.MessagingDestinationName(k.stream))
	}
	if k.shard != "" {
		attrs = append(attrs, semconv.MessagingDestinationPartitionID(k.shard))
	}
	switch k.kind {
	case setRecord:
		attrs = append(attrs, semconv.MessagingOperationName(operationProcess), AttrOutcome.String(k.a), AttrAction.String(k.b))
	case setWrite:
		attrs = append(attrs, AttrWriteKind.String(k.a))
	case setLease:
		attrs = append(attrs, AttrLeaseChange.String(k.a))
	}
	if k.errT != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(k.errT))
	}
	o = metric.WithAttributeSet(attribute.NewSet(attrs...))
	m.setsMu.Lock()
	defer m.setsMu.Unlock()
	if prev, ok := m.sets[k]; ok {
		return prev
	}
	m.sets[k] = o
	return o
}

// key returns the base key of kind for stream (a name or an ARN) and
// shard, which is dropped without WithShardAttribute.
func (m *Metrics) key(kind uint8, stream, shard string) setKey {
	k := setKey{kind: kind, stream: streamName(stream)}
	if m.shardAttr {
		k.shard = shard
	}
	return k
}

// OnRecord counts the record by outcome and action, and records its
// handler's duration (when the handler ran) and its age.
func (m *Metrics) OnRecord(r observe.Record) {
	ctx := context.Background()
	k := m.key(setRecord, r.Stream, r.ShardID)
	k.a, k.b = r.Outcome, string(r.Action)
	if failed(r.Action) {
		k.errT = string(r.Action)
	}
	o := m.set(k)
	m.consumed.Add(ctx, 1, o)
	if r.Reason == "" { // the handler ran
		m.processDur.Record(ctx, seconds(r.Handled), o)
	}
	if r.Age > 0 {
		m.recordAge.Record(ctx, seconds(r.Age), m.set(m.key(setStream, r.Stream, r.ShardID)))
	}
}

// OnWrite counts the write by kind, with error.type when it failed.
func (m *Metrics) OnWrite(w observe.Write) {
	k := m.key(setWrite, w.Stream, w.ShardID)
	k.a = string(w.Kind)
	if w.Err != nil {
		k.errT = errorType(w.Err)
	}
	m.writes.Add(context.Background(), 1, m.set(k))
}

// OnInvocation records the invocation's duration, item failures, cut and
// oldest record age.
func (m *Metrics) OnInvocation(i observe.Invocation) {
	ctx := context.Background()
	o := m.set(setKey{kind: setStream, stream: streamName(i.Stream)})
	m.invDur.Record(ctx, seconds(i.Duration), o)
	m.itemFailures.Add(ctx, int64(i.Failures), o)
	var cut int64
	if i.Cut {
		cut = 1
	}
	m.cuts.Add(ctx, cut, o)
	if i.Records > 0 {
		m.oldest.Record(ctx, seconds(i.OldestAge), o)
	}
}

// OnRead counts the records read and keeps the shard's MillisBehindLatest
// for lambdaadapter.shard.behind_latest.
func (m *Metrics) OnRead(r observe.Read) {
	m.read.Add(context.Background(), int64(r.Records), m.set(m.key(setStream, r.Stream, r.ShardID)))
	m.mu.Lock()
	m.behind[shardKey{streamName(r.Stream), r.ShardID}] = float64(max(r.MillisBehindLatest, 0)) / 1000
	m.mu.Unlock()
}

// OnLease counts the lease change and records the leases held. A shard
// whose lease is lost, handed on or released stops being reported by
// lambdaadapter.shard.behind_latest.
func (m *Metrics) OnLease(l observe.Lease) {
	ctx := context.Background()
	stream := streamName(l.Stream)
	m.leaseChanges.Add(ctx, 1, m.set(setKey{kind: setLease, stream: stream, a: string(l.Kind)}))
	m.leasesHeld.Record(ctx, int64(l.Held), m.set(setKey{kind: setStream, stream: stream}))
	switch l.Kind {
	case observe.LeaseLost, observe.LeaseHandedOn, observe.LeaseReleased:
		m.mu.Lock()
		delete(m.behind, shardKey{stream, l.ShardID})
		m.mu.Unlock()
	}
}

// OnCheckpoint counts the checkpoint write, with error.type when it
// failed.
func (m *Metrics) OnCheckpoint(c observe.Checkpoint) {
	k := m.key(setCheckpoint, c.Stream, c.ShardID)
	if c.Err != nil {
		k.errT = errorType(c.Err)
	}
	m.checkpoints.Add(context.Background(), 1, m.set(k))
}

// OnInFlight records the records in flight, the oldest one's age and the
// leases held.
func (m *Metrics) OnInFlight(f observe.InFlight) {
	ctx := context.Background()
	o := m.set(setKey{kind: setStream, stream: streamName(f.Stream)})
	m.inFlight.Record(ctx, int64(f.Records), o)
	m.oldest.Record(ctx, seconds(f.OldestAge), o)
	m.leasesHeld.Record(ctx, int64(f.LeasesHeld), o)
}

// observeBehind reports lambdaadapter.shard.behind_latest.
func (m *Metrics) observeBehind(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.behind {
		o.ObserveFloat64(m.behindGauge, v, m.set(setKey{kind: setBehind, stream: k.stream, shard: k.shard}))
	}
	return nil
}

// Flush calls the meter provider's ForceFlush, when it has one (the SDK's
// MeterProvider does), so that a Lambda invocation's metrics are exported
// before its response, inside the deadline margin; errors go to the
// global OpenTelemetry error handler. Without ForceFlush, Flush does
// nothing: the provider's reader exports on its own schedule.
func (m *Metrics) Flush(ctx context.Context) {
	if f, ok := m.mp.(interface{ ForceFlush(context.Context) error }); ok {
		if err := f.ForceFlush(ctx); err != nil {
			otelglobal.Handle(err)
		}
	}
}

var (
	_ observe.RecordHook     = (*Metrics)(nil)
	_ observe.WriteHook      = (*Metrics)(nil)
	_ observe.InvocationHook = (*Metrics)(nil)
	_ observe.ReadHook       = (*Metrics)(nil)
	_ observe.LeaseHook      = (*Metrics)(nil)
	_ observe.CheckpointHook = (*Metrics)(nil)
	_ observe.InFlightHook   = (*Metrics)(nil)
	_ observe.Flusher        = (*Metrics)(nil)
)
