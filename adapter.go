package lambdaadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/shardsettle/lambdaadapter/consumer"
	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/lambda"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/message"
	"github.com/shardsettle/lambdaadapter/publish"
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

// Reply is a record a handler publishes with Message.Reply. See
// message.Reply.
type Reply = message.Reply

// Ack reports the record handled: the checkpoint may pass it.
func Ack() Outcome { return message.Ack() }

// Drop reports the record handled by giving up on it (a poison record), with
// err as the logged reason: the checkpoint passes it exactly as for Ack.
func Drop(err error) Outcome { return message.Drop(err) }

// Retry reports that the record must come again, with err as the logged
// reason. Without WithMaxAttempts or a dead-letter target the record stays
// unsettled: it and every later record of its shard are reported back to
// Lambda, which delivers them again starting from it. With either, it
// becomes a counted copy written to its stream (the original settles once
// the copy is written) until the cap sends it to the dead-letter target.
func Retry(err error) Outcome { return message.Retry(err) }

// RetryAfter reports that the record must come again after d, with err as
// the logged reason: a counted copy is written to its stream after d. A d up
// to WithMaxInProcessDelay (default 5s) that ends before the invocation's
// deadline minus the margin is waited out in the invocation; a longer one
// goes through the delay queue (WithDelayQueue), or without one behaves as
// Retry and logs a warning. The cap applies as for Retry.
func RetryAfter(d time.Duration, err error) Outcome { return message.RetryAfter(d, err) }

// Option configures an Adapter. Options are applied in order; New
// validates the result once.
type Option func(*config)

type config struct {
	runner          lambda.Config
	kinesis         publish.KinesisAPI
	sqs             publish.SQSAPI
	maxAttempts     int
	maxAttemptsSet  bool
	inProcessDelay  time.Duration
	delaySet        bool
	replyKey        string
	maxMessageBytes int
	ecs             ecsConfig
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
// and writes what must be written (copies, dead letters) before answering
// (default 500ms). d must be positive.
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) {
		if d == 0 {
			d = -1
		}
		c.runner.DeadlineMargin = d
	}
}

// WithLogger sets the logger for drops, retries, copies, dead letters,
// panics and deadline warnings (default: discard). Attribute keys are
// stable: shard_id, sequence_number, partition_key, outcome, attempt, error,
// stack.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.runner.Logger = l }
}

// WithMaxAttempts caps how many times a record is handled, counting the
// first delivery (n ≥ 1). It turns Retry into counted copies: the record is
// written again to its stream with x-ruststream-retry-count incremented and
// settles; when the n-th attempt fails, the record goes to the dead-letter
// target, or is retired (logged, like Drop) without one.
func WithMaxAttempts(n int) Option {
	return func(c *config) { c.maxAttempts, c.maxAttemptsSet = n, true }
}

// WithDeadLetterStream sends records that reached the cap to the Kinesis
// stream nameOrARN: payload and user headers in the RSK1 envelope, plus the
// diagnostic headers x-dead-letter-reason, -source-stream, -shard-id,
// -sequence-number, -attempts and -first-arrival. Without WithMaxAttempts the
// cap is 3 attempts.
func WithDeadLetterStream(nameOrARN string) Option {
	return func(c *config) { c.runner.DeadLetterStream = nameOrARN }
}

// WithDeadLetterQueue sends records that reached the cap to the SQS queue
// url, one JSON message per record (see the publish package for the body).
// Without WithMaxAttempts the cap is 3 attempts.
func WithDeadLetterQueue(url string) Option {
	return func(c *config) { c.runner.DeadLetterQueue = url }
}

// WithDeadLetterDrops sends Drop outcomes to the dead-letter target too, so
// poison records are kept, not only logged.
func WithDeadLetterDrops() Option {
	return func(c *config) { c.runner.Policy.DeadLetterDrops = true }
}

// WithDelayQueue makes RetryAfter delays longer than can be waited in the
// invocation durable: the record goes to the SQS queue url with
// DelaySeconds (chained past 15 minutes) and settles; when Lambda delivers
// the message from that queue to this same function, the adapter writes the
// copy to the stream. Map the queue to the function with
// ReportBatchItemFailures.
func WithDelayQueue(url string) Option {
	return func(c *config) { c.runner.DelayQueue = url }
}

// WithMaxInProcessDelay sets the longest RetryAfter delay waited out inside
// the invocation before the copy is written (default 5s); longer delays use
// the delay queue. d must be positive.
func WithMaxInProcessDelay(d time.Duration) Option {
	return func(c *config) { c.inProcessDelay, c.delaySet = d, true }
}

// WithReplyStream sets the stream (name or ARN) Message.Reply writes to
// when the reply names none.
func WithReplyStream(nameOrARN string) Option {
	return func(c *config) { c.runner.ReplyStream = nameOrARN }
}

// WithReplyPartitionKey sets the partition key of replies that carry none
// (neither in the call nor as a partition-key header). Without it such
// replies get a generated key that spreads them over the shards.
func WithReplyPartitionKey(key string) Option {
	return func(c *config) { c.replyKey = key }
}

// WithKinesisClient sets the Kinesis client used for copies, dead letters
// and replies, typically a *kinesis.Client. Without it the adapter builds
// one from the default AWS configuration (the function's role).
func WithKinesisClient(k publish.KinesisAPI) Option {
	return func(c *config) { c.kinesis = k }
}

// WithSQSClient sets the SQS client used for the dead-letter and delay
// queues, typically a *sqs.Client. Without it the adapter builds one from the
// default AWS configuration when a queue is set.
func WithSQSClient(s publish.SQSAPI) Option {
	return func(c *config) { c.sqs = s }
}

// WithMaxMessageSize sets the largest SQS message body the adapter sends
// (default 1 MiB, the SQS limit). A dead letter larger than that is not
// sent: the record stays unsettled and an error is logged.
func WithMaxMessageSize(n int) Option {
	return func(c *config) { c.maxMessageBytes = n }
}

// Adapter runs a Handler over Kinesis invocations. It is safe for concurrent
// use and holds no per-invocation state between calls.
type Adapter struct {
	mode     Mode
	runner   *lambda.Runner
	consumer *consumer.Consumer
	store    lease.Store
}

// New returns an Adapter for h, validating the options once. It panics if h
// is nil (a programmer error) and returns an error for contradictory or
// out-of-range options.
func New(h Handler, opts ...Option) (*Adapter, error) {
	if h == nil {
		panic("lambdaadapter: nil handler")
	}
	return newAdapter(h, nil, opts...)
}

func newAdapter(h Handler, bh BatchHandler, opts ...Option) (*Adapter, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			continue
		}
		o(&c)
	}
	switch {
	case c.runner.Concurrency < 0:
		return nil, errors.New("lambdaadapter: concurrency must be at least 1")
	case c.runner.DeadlineMargin < 0:
		return nil, errors.New("lambdaadapter: deadline margin must be positive")
	case c.maxAttemptsSet && c.maxAttempts < 1:
		return nil, fmt.Errorf("lambdaadapter: max attempts must be at least 1, got %d", c.maxAttempts)
	case c.delaySet && c.inProcessDelay <= 0:
		return nil, errors.New("lambdaadapter: max in-process delay must be positive")
	case c.runner.DeadLetterStream != "" && c.runner.DeadLetterQueue != "":
		return nil, errors.New("lambdaadapter: set WithDeadLetterStream or WithDeadLetterQueue, not both")
	case c.runner.Policy.DeadLetterDrops && c.runner.DeadLetterStream == "" && c.runner.DeadLetterQueue == "":
		return nil, errors.New("lambdaadapter: WithDeadLetterDrops needs a dead-letter target (WithDeadLetterStream or WithDeadLetterQueue)")
	}
	c.runner.Policy.MaxAttempts = c.maxAttempts
	c.runner.Policy.MaxInProcessDelay = c.inProcessDelay
	logger := c.runner.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	needSQS := c.runner.DeadLetterQueue != "" || c.runner.DelayQueue != ""
	if c.kinesis == nil || (needSQS && c.sqs == nil) {
		awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
		if err != nil {
			return nil, fmt.Errorf("lambdaadapter: load the default AWS configuration: %w", err)
		}
		if c.kinesis == nil {
			c.kinesis = kinesis.NewFromConfig(awsCfg)
		}
		if needSQS && c.sqs == nil {
			c.sqs = sqs.NewFromConfig(awsCfg)
		}
	}
	popts := []publish.Option{publish.WithLogger(logger)}
	if c.replyKey != "" {
		popts = append(popts, publish.WithPartitionKey(c.replyKey))
	}
	pub, err := publish.NewPublisher(c.kinesis, popts...)
	if err != nil {
		return nil, fmt.Errorf("lambdaadapter: %w", err)
	}
	c.runner.Publisher = pub
	if c.sqs != nil {
		qopts := []publish.QueueOption{publish.WithQueueLogger(logger)}
		if c.maxMessageBytes != 0 {
			qopts = append(qopts, publish.WithMaxMessageSize(c.maxMessageBytes))
		}
		q, err := publish.NewQueue(c.sqs, qopts...)
		if err != nil {
			return nil, fmt.Errorf("lambdaadapter: %w", err)
		}
		c.runner.Queue = q
	}
	if c.ecs.mode == ModeECS {
		cc, err := c.consumerConfig(h, bh)
		if err != nil {
			return nil, err
		}
		cons, err := consumer.New(cc)
		if err != nil {
			return nil, fmt.Errorf("lambdaadapter: %w", err)
		}
		return &Adapter{mode: ModeECS, consumer: cons, store: cc.Store}, nil
	}
	if h == nil {
		return nil, errors.New("lambdaadapter: batch handlers run in long-running mode only")
	}
	r, err := lambda.NewRunner(h, c.runner)
	if err != nil {
		return nil, err
	}
	return &Adapter{runner: r}, nil
}

// errLambdaOnly is returned by the Lambda entry points of a long-running
// adapter.
var errLambdaOnly = errors.New("lambdaadapter: this adapter was built for long-running mode (ModeECS)")

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
	if a.runner == nil {
		return events.KinesisEventResponse{}, errLambdaOnly
	}
	return a.runner.HandleEvent(ctx, ev)
}

// Invoke handles one raw invocation payload and returns the JSON partial
// batch response. It implements aws-lambda-go's lambda.Handler, decoding the
// event without reflection. A malformed payload is answered with an error
// that says what and where (Lambda then retries the whole batch).
func (a *Adapter) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	if a.runner == nil {
		return nil, errLambdaOnly
	}
	return a.runner.Invoke(ctx, payload)
}

var _ awslambda.Handler = (*Adapter)(nil)

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
