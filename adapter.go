package lambdaadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/lambda"
	"github.com/shardsettle/lambdaadapter/message"
)

// Message is one delivered Kinesis record. See message.Message.
type Message = message.Message

// Headers is the ordered header list of a Message. See envelope.Headers.
type Headers = envelope.Headers

// Outcome is what a handler decided about one record. Build it with Ack,
// Drop, Retry or RetryAfter; see the package documentation for what each
// does in each mode.
type Outcome = message.Outcome

// Handler handles one record at a time. HandleRecord is called from many
// goroutines at once for records with different partition keys, and one
// after another, in stream order, for records with the same key.
type Handler = message.Handler

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc = message.HandlerFunc

// Ack reports the record handled: the checkpoint may pass it.
func Ack() Outcome { return message.Ack() }

// Drop reports the record handled by giving up on it (a poison record), with
// err as the logged reason: the checkpoint passes it exactly as for Ack.
func Drop(err error) Outcome { return message.Drop(err) }

// Retry reports that the record must come again, with err as the logged
// reason. In Lambda mode the record stays unsettled: it and every later
// record of its shard are reported back to Lambda, which delivers them again
// starting from it.
func Retry(err error) Outcome { return message.Retry(err) }

// RetryAfter reports that the record must come again after d, with err as
// the logged reason. Until counted copies land (see the package
// documentation), it behaves exactly as Retry and d is not waited out:
// Lambda's own retry timing applies.
func RetryAfter(d time.Duration, err error) Outcome { return message.RetryAfter(d, err) }

// Option configures an Adapter.
type Option func(*config)

type config struct {
	runner lambda.Config
}

// WithConcurrency sets how many partition keys are handled at once
// (default 16). Records with the same partition key are always handled one
// after another, in stream order. n must be at least 1.
func WithConcurrency(n int) Option {
	return func(c *config) {
		if n == 0 {
			n = -1 // zero is not "default" when given explicitly
		}
		c.runner.Concurrency = n
	}
}

// WithDeadlineMargin sets how long before the invocation deadline the
// adapter stops starting records, cancels the context of running handlers
// and answers with what settled (default 500ms). d must be positive.
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) {
		if d == 0 {
			d = -1
		}
		c.runner.DeadlineMargin = d
	}
}

// WithLogger sets the logger for drops, retries, panics and deadline
// warnings (default: discard). Attribute keys are stable: shard_id,
// sequence_number, partition_key, outcome, attempt, error, stack.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.runner.Logger = l }
}

// Adapter runs a Handler over Kinesis invocations. It is safe for concurrent
// use and holds no per-invocation state between calls.
type Adapter struct {
	runner *lambda.Runner
}

// New returns an Adapter for h, validating the options once. It panics if h
// is nil (a programmer error) and returns an error for contradictory or
// out-of-range options.
func New(h Handler, opts ...Option) (*Adapter, error) {
	if h == nil {
		panic("lambdaadapter: nil handler")
	}
	var c config
	for _, o := range opts {
		if o == nil {
			continue
		}
		o(&c)
	}
	if c.runner.Concurrency < 0 {
		return nil, fmt.Errorf("lambdaadapter: concurrency must be at least 1")
	}
	if c.runner.DeadlineMargin < 0 {
		return nil, fmt.Errorf("lambdaadapter: deadline margin must be positive")
	}
	r, err := lambda.NewRunner(h, c.runner)
	if err != nil {
		return nil, err
	}
	return &Adapter{runner: r}, nil
}

// HandleEvent handles one decoded Kinesis event and returns the partial
// batch response: no item when every record settled, otherwise the sequence
// number of the first unsettled record (one per shard in a multi-shard test
// event). It returns an error only when the event itself cannot be trusted
// (a sequence number that is not a number or does not grow within its shard);
// Lambda then retries the whole batch.
//
// HandleEvent returns when every record settled or was given up on, or at
// ctx's deadline minus the deadline margin, whichever comes first.
func (a *Adapter) HandleEvent(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	return a.runner.HandleEvent(ctx, ev)
}

// Invoke handles one raw invocation payload and returns the JSON partial
// batch response. It implements aws-lambda-go's lambda.Handler, decoding the
// event without reflection. A malformed payload is answered with an error
// that says what and where (Lambda then retries the whole batch).
func (a *Adapter) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return a.runner.Invoke(ctx, payload)
}

var _ awslambda.Handler = (*Adapter)(nil)

// Handle starts the Lambda runtime loop with an Adapter for h and blocks
// forever. It panics if h is nil or the options are invalid: both are
// programmer errors found on the first cold start.
func Handle(h Handler, opts ...Option) {
	a, err := New(h, opts...)
	if err != nil {
		panic(err)
	}
	awslambda.Start(a)
}

// JSON returns a Handler that decodes each payload as JSON into a T and
// calls fn. A payload that does not decode is a poison record: it is dropped
// (Drop) with the decode error as the reason, and fn is not called. It panics
// if fn is nil.
func JSON[T any](fn func(ctx context.Context, v T, m *Message) Outcome) Handler {
	if fn == nil {
		panic("lambdaadapter: nil JSON handler function")
	}
	return HandlerFunc(func(ctx context.Context, m *Message) Outcome {
		var v T
		if err := json.Unmarshal(m.Payload, &v); err != nil {
			return Drop(fmt.Errorf("lambdaadapter: payload is not a JSON %T: %w", v, err))
		}
		return fn(ctx, v, m)
	})
}
