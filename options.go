package lambdaadapter

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/shardsettle/lambdaadapter/observe"
)

// Option is any option: what Handle takes, which picks the mode at start.
// NewFunction takes FunctionOptions and NewService ServiceOptions; an option
// of one mode only cannot be given to the other door (it does not compile).
// The options for both (SharedOption) go to either.
type Option interface {
	apply(*config)
}

// FunctionOption configures a Function (Lambda mode): a SharedOption or
// WithDeadlineMargin.
type FunctionOption interface {
	Option
	functionOption()
}

// ServiceOption configures a Service (long-running mode): a SharedOption or
// one of the service's own (WithStream, WithLeaseTable, ...).
type ServiceOption interface {
	Option
	serviceOption()
}

// SharedOption configures either door: both a FunctionOption and a
// ServiceOption.
type SharedOption interface {
	FunctionOption
	ServiceOption
}

// The concrete option types: a function on the config, marked with the
// doors it fits.
type (
	sharedOpt   func(*config)
	functionOpt func(*config)
	serviceOpt  func(*config)
)

func (o sharedOpt) apply(c *config)   { o(c) }
func (sharedOpt) functionOption()     {}
func (sharedOpt) serviceOption()      {}
func (o functionOpt) apply(c *config) { o(c) }
func (functionOpt) functionOption()   {}
func (o serviceOpt) apply(c *config)  { o(c) }
func (serviceOpt) serviceOption()     {}

// KinesisClient is what the adapter calls on Kinesis to write copies, dead
// letters and replies; a *kinesis.Client has it. A Service reads the stream
// through the same client and needs its reading calls too (ListShards,
// GetShardIterator, GetRecords, DescribeStreamSummary, and for enhanced
// fan-out the consumer calls and SubscribeToShard): a *kinesis.Client has
// them all; NewService names what a client lacks.
type KinesisClient interface {
	PutRecord(ctx context.Context, in *kinesis.PutRecordInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error)
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

// SQSClient is what the adapter calls on SQS for the dead-letter and delay
// queues; a *sqs.Client has it. A Service also forwards due delayed records
// from the delay queue, which needs ReceiveMessage and DeleteMessage too (a
// *sqs.Client has them).
type SQSClient interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// config is what the options set; NewFunction and NewService turn it into
// a Function or a Service.
type config struct {
	mode            Mode
	aws             *aws.Config
	concurrency     int
	concurrencySet  bool
	margin          time.Duration
	logger          *slog.Logger
	logLevel        slog.Level
	logLevelSet     bool
	maxAttempts     int
	maxAttemptsSet  bool
	inProcessDelay  time.Duration
	delaySet        bool
	deadLetterDrops bool
	deadLetterQueue string
	deadLetterStrm  string
	delayQueue      string
	replyStream     string
	replyKey        string
	kinesis         KinesisClient
	sqs             SQSClient
	maxMessageBytes int
	hooks           []observe.Hook
	maxRecordAge    time.Duration
	recycle         bool
	ecs             ecsConfig
	errs            []error
}

// options returns a door's typed options as Options.
func options[O Option](opts []O) []Option {
	all := make([]Option, len(opts))
	for i, o := range opts {
		all[i] = o
	}
	return all
}

// apply applies opts in order.
func (c *config) apply(opts []Option) {
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
}

// WithAWSConfig sets the AWS configuration the adapter builds the clients it
// needs from (Kinesis; SQS when a queue is set; DynamoDB for a lease table),
// typically from config.LoadDefaultConfig. A client given with
// WithKinesisClient, WithSQSClient or WithDynamoDBClient wins over it.
// Handle loads the default configuration itself; NewFunction and NewService
// never do.
func WithAWSConfig(cfg aws.Config) SharedOption {
	return sharedOpt(func(c *config) { c.aws = &cfg })
}

// WithKinesisClient sets the Kinesis client used for copies, dead letters
// and replies (and, by a Service, for reading the stream), typically a
// *kinesis.Client, or a fake in tests (lambdaadaptertest/awsfake).
func WithKinesisClient(k KinesisClient) SharedOption {
	return sharedOpt(func(c *config) { c.kinesis = k })
}

// WithSQSClient sets the SQS client used for the dead-letter and delay
// queues, typically a *sqs.Client.
func WithSQSClient(s SQSClient) SharedOption {
	return sharedOpt(func(c *config) { c.sqs = s })
}

// WithConcurrency sets how many partition keys are handled at once
// (default 16). Records with the same partition key are always handled one
// after another, in stream order. n must be at least 1. In Lambda mode an
// invocation's records run one at a time, in order, while the handlers are
// fast, and on n lanes once they are not (docs/lambda.md).
func WithConcurrency(n int) SharedOption {
	return sharedOpt(func(c *config) { c.concurrency, c.concurrencySet = n, true })
}

// WithLogger sets the logger for drops, retries, copies, dead letters,
// panics and deadline warnings, and in long-running mode for leases and
// shards (default: discard). Attribute keys are stable and the same in
// both modes: mode, shard_id, sequence_number, partition_key, outcome,
// attempt, error, stack, retry_in.
func WithLogger(l *slog.Logger) SharedOption {
	return sharedOpt(func(c *config) { c.logger = l })
}

// WithLogLevel sets the level of the adapter's own logger (NewLogger), used
// when no WithLogger is given: in long-running mode JSON lines on stdout; in
// Lambda mode aws-lambda-go's lambdacontext log handler, which adds each
// invocation's requestId and whose format and level follow the function's
// logging configuration (AWS_LAMBDA_LOG_FORMAT, AWS_LAMBDA_LOG_LEVEL) as well.
// Handle uses it at slog.LevelWarn by default; NewFunction and NewService
// log nothing unless one of the two is given.
func WithLogLevel(l slog.Level) SharedOption {
	return sharedOpt(func(c *config) { c.logLevel, c.logLevelSet = l, true })
}

// WithMaxAttempts caps how many times a record is handled, counting the
// first delivery (n ≥ 1). It turns Retry into counted copies: the record is
// written again to its stream with x-ruststream-retry-count set to the
// attempts made and settles; when the n-th attempt fails, the record goes to
// the dead-letter target, or is retired (logged, like Drop) without one.
func WithMaxAttempts(n int) SharedOption {
	return sharedOpt(func(c *config) { c.maxAttempts, c.maxAttemptsSet = n, true })
}

// WithDeadLetterStream sends records that reached the cap to the Kinesis
// stream nameOrARN: payload and user headers in the RSK1 envelope, plus the
// diagnostic headers x-dead-letter-reason, -source-stream, -shard-id,
// -sequence-number, -attempts and -first-arrival. Without WithMaxAttempts the
// cap is 3 attempts.
func WithDeadLetterStream(nameOrARN string) SharedOption {
	return sharedOpt(func(c *config) { c.deadLetterStrm = nameOrARN })
}

// WithDeadLetterQueue sends records that reached the cap to the SQS queue
// url, one JSON message per record (docs/faults.md has the body). Without
// WithMaxAttempts the cap is 3 attempts.
func WithDeadLetterQueue(url string) SharedOption {
	return sharedOpt(func(c *config) { c.deadLetterQueue = url })
}

// WithDeadLetterDrops sends Drop outcomes to the dead-letter target too, so
// poison records are kept, not only logged.
func WithDeadLetterDrops() SharedOption {
	return sharedOpt(func(c *config) { c.deadLetterDrops = true })
}

// WithDelayQueue makes RetryAfter delays longer than can be waited in
// process durable: the record goes to the SQS queue url with DelaySeconds
// (chained past 15 minutes) and settles; the message is forwarded to the
// stream as the counted copy once due — in Lambda mode when Lambda delivers
// it from that queue to this same function (map the queue to the function
// with ReportBatchItemFailures), in long-running mode by the service itself.
func WithDelayQueue(url string) SharedOption {
	return sharedOpt(func(c *config) { c.delayQueue = url })
}

// WithMaxInProcessDelay sets the longest RetryAfter delay waited out in
// process before the copy is written (default 5s); longer delays use the
// delay queue. d must be positive.
func WithMaxInProcessDelay(d time.Duration) SharedOption {
	return sharedOpt(func(c *config) { c.inProcessDelay, c.delaySet = d, true })
}

// WithReplyStream sets the stream (name or ARN) Message.Reply writes to
// when the reply names none.
func WithReplyStream(nameOrARN string) SharedOption {
	return sharedOpt(func(c *config) { c.replyStream = nameOrARN })
}

// WithReplyPartitionKey sets the partition key of replies that carry none
// (neither in the call nor as a partition-key header). Without it such
// replies get a generated key that spreads them over the shards.
func WithReplyPartitionKey(key string) SharedOption {
	return sharedOpt(func(c *config) { c.replyKey = key })
}

// WithMaxMessageSize sets the largest SQS message body the adapter sends
// (default 1 MiB, the SQS limit). A dead letter larger than that is not
// sent: the record stays unsettled and an error is logged.
func WithMaxMessageSize(n int) SharedOption {
	return sharedOpt(func(c *config) { c.maxMessageBytes = n })
}

// WithHooks adds hooks that observe what the adapter does (package
// observe): metrics exporters such as observe/emf, or your own. Each hook
// receives the events of the observe interfaces it implements; an adapter
// without hooks pays nothing for them.
func WithHooks(hooks ...observe.Hook) SharedOption {
	return sharedOpt(func(c *config) { c.hooks = append(c.hooks, hooks...) })
}

// WithRecycledMessages makes the adapter reuse the memory of a Message, its
// Payload and its Headers once it finished with the record (handled,
// written where its outcome says, or given up on): in Lambda mode for the
// next invocation, in long-running mode for a later GetRecords answer. It
// allocates less and is faster for large batches (BENCHMARKS.md), at a
// price: a handler must not keep the Message, its Payload or its Headers
// after it returned — copy what it needs (strings, such as PartitionKey
// and header values, stay valid). In a test binary (testing.Testing) the
// adapter overwrites a recycled payload's bytes with 0xDB, so a test that
// kept one reads garbage instead of another record's data. Without this
// option (the default) every Message is yours to keep.
func WithRecycledMessages() SharedOption {
	return sharedOpt(func(c *config) { c.recycle = true })
}

// WithMaxRecordAge makes the adapter skip records older than d by their
// arrival time: such a record is not handled but dead-lettered (reason
// "max record age", payload and headers kept) when a dead-letter target is
// set, else dropped with a warning — in both modes — so a consumer that fell
// far behind catches up instead of working through stale data. d must be
// positive.
func WithMaxRecordAge(d time.Duration) SharedOption {
	return sharedOpt(func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, errors.New("max record age must be positive"))
		}
		c.maxRecordAge = d
	})
}
