package otel

import "go.opentelemetry.io/otel/propagation"

// MetricsOption configures NewMetrics.
type MetricsOption interface {
	applyMetrics(*metricsConfig)
}

// TracerOption configures NewTracer.
type TracerOption interface {
	applyTracer(*tracerConfig)
}

// Option configures both NewMetrics and NewTracer.
type Option interface {
	MetricsOption
	TracerOption
}

type metricsConfig struct {
	system    string
	shardAttr bool
}

type tracerConfig struct {
	system     string
	propagator propagation.TextMapPropagator
	xrayParent bool
}

type systemOption string

func (o systemOption) applyMetrics(c *metricsConfig) { c.system = string(o) }
func (o systemOption) applyTracer(c *tracerConfig)   { c.system = string(o) }

// WithSystem sets the messaging.system attribute of every span and metric
// (default DefaultSystem, "aws.kinesis"), for a backend or dashboard that
// expects another value, such as "aws_kinesis". An empty name keeps the
// default.
func WithSystem(name string) Option { return systemOption(name) }

type metricsFunc func(*metricsConfig)

func (f metricsFunc) applyMetrics(c *metricsConfig) { f(c) }

// WithShardAttribute adds messaging.destination.partition.id (the shard
// id) to the metrics of records, writes, reads and checkpoints. It
// multiplies their time series by the number of shards; without it they
// are per stream. lambdaadapter.shard.behind_latest is always per shard.
func WithShardAttribute() MetricsOption {
	return metricsFunc(func(c *metricsConfig) { c.shardAttr = true })
}

type tracerFunc func(*tracerConfig)

func (f tracerFunc) applyTracer(c *tracerConfig) { f(c) }

// WithPropagator sets the propagator that reads a record's producer
// context from its RSK1 headers and writes the handler's context into a
// reply's (default propagation.TraceContext: the W3C traceparent and
// tracestate headers). A composite propagator adds others, e.g. baggage.
// A nil p keeps the default.
func WithPropagator(p propagation.TextMapPropagator) TracerOption {
	return tracerFunc(func(c *tracerConfig) {
		if p != nil {
			c.propagator = p
		}
	})
}

// WithXRayParent makes the Lambda invocation's X-Ray trace the parent of
// the invocation span, instead of a link, when the invocation context
// holds no span of its own. Use it when the spans are exported to AWS
// X-Ray (through the ADOT collector), so that they nest under the
// function's segment. Exported anywhere else, a parent the backend never
// receives breaks the trace, and an X-Ray header with Sampled=0 makes a
// parent-based sampler drop every span of the invocation: hence the
// default, a link.
func WithXRayParent() TracerOption {
	return tracerFunc(func(c *tracerConfig) { c.xrayParent = true })
}
