package lambdaadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/consumer"
	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/hooks"
	"github.com/shardsettle/lambdaadapter/internal/lambda"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/internal/retry"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
)

// Message is one delivered Kinesis record, decoded; the handler gets a
// pointer to it. Its fields:
//
//	Payload         []byte    the record's data with any RSK1 envelope removed
//	Headers         Headers   the RSK1 user headers, in order, then the delivery
//	                          headers partition-key, kinesis-sequence-number and
//	                          kinesis-shard-id, always set from the record itself,
//	                          and kinesis-sub-sequence-number on a KPL user record
//	PartitionKey    string    the record's Kinesis partition key (a KPL user
//	                          record's own key)
//	ExplicitHashKey string    a KPL user record's explicit hash key, if it has one
//	SequenceNumber  string    the record's sequence number (decimal digits; a KPL
//	                          user record has its aggregate's)
//	Aggregated      bool      a user record of a KPL aggregated record
//	SubSequenceNumber int     its index in the aggregate (0 for a plain record)
//	ShardID         string    the shard it was read from ("shardId-000000000000")
//	StreamARN       string    the stream's ARN (the stream's, also for an enhanced
//	                          fan-out consumer event source; in long-running mode
//	                          the stream's name when its ARN could not be learnt)
//	EventSourceARN  string    the event source as Lambda reported it (a stream or
//	                          enhanced fan-out consumer ARN); "" in long-running mode
//	ArrivalTime     time.Time when Kinesis accepted the record, to the millisecond
//	Attempt         int       1 on a first delivery; on a counted copy its
//	                          x-ruststream-retry-count + 1; in long-running mode
//	                          one more for every in-process redelivery
//
// and its methods Header(name) (a header's value, "" when absent) and
// Reply(ctx, Reply) (publish a record in answer; see Reply).
//
// A Message is the handler's to keep: it, its Payload and its Headers stay
// valid and unchanged after the handler returned, in both modes and in
// BatchHandlers, as aws-lambda-go's events do (collect them in a test, keep
// a payload for a later bulk write). A record handled again in process gets
// a new Message, so a kept one keeps its Attempt. The adapter allocates an
// invocation's (or a GetRecords answer's) messages, headers and payloads in
// a few blocks, not one allocation per record.
type Message = message.Message

// Headers is the ordered header list of a Message: Get(name), Lookup(name),
// Set, Del, All and Clone, names compared without regard to ASCII case. See
// envelope.Headers.
type Headers = envelope.Headers

// Outcome is what a handler decided about one record: Ack, Drop, Retry or
// RetryAfter. Outcome.Kind, Err and Delay read it back. The zero Outcome is
// invalid: the adapter treats it as Retry and logs it as a handler bug. See
// the package documentation for what each does in each mode.
type Outcome = message.Outcome

// Handler handles one record at a time. HandleRecord is called from many
// goroutines at once for records with different partition keys, and one
// after another, in stream order, for records with the same key. ctx is
// cancelled when the adapter stops waiting for the record (the invocation's
// deadline minus the margin, or a long-running shutdown past its timeout);
// a handler should return promptly then, and what it returns after that
// changes nothing.
type Handler = message.Handler

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc = message.HandlerFunc

// Reply is a record a handler publishes with Message.Reply: Stream (name or
// ARN; "" means WithReplyStream), PartitionKey ("" means its partition-key
// header, then WithReplyPartitionKey, then a generated key that spreads
// replies over the shards), Headers and Payload. The record being handled
// settles only if every reply written while handling it succeeded; Reply
// must be called before HandleRecord returns.
type Reply = message.Reply

// Errors users match with errors.Is.
var (
	// ErrPanic is wrapped by the error of the Retry a recovered handler
	// panic stands for (both modes).
	ErrPanic = engine.ErrPanic
	// ErrZeroOutcome is the error of the Retry the zero Outcome stands for.
	ErrZeroOutcome = engine.ErrZeroOutcome
	// ErrBatchShort is the error of the Retry that stands for an element a
	// BatchHandler returned no Outcome for.
	ErrBatchShort = engine.ErrBatchShort
	// ErrNoReplier is returned by Message.Reply on a message no adapter
	// handed over (one built by hand in a test).
	ErrNoReplier = message.ErrNoReplier
	// ErrReplyAfterReturn is returned by Message.Reply after the handler
	// returned.
	ErrReplyAfterReturn = message.ErrReplyAfterReturn
	// ErrNoReplyStream is returned by Message.Reply when neither the reply
	// nor the adapter names a stream (WithReplyStream).
	ErrNoReplyStream = message.ErrNoReplyStream
	// ErrStreamNotFound is matched by the error Adapter.Run returns when the
	// stream does not exist (long-running mode).
	ErrStreamNotFound = consumer.ErrStreamNotFound
	// ErrTableNotFound is matched by the error Adapter.Run returns when the
	// lease table does not exist (long-running mode); the message names the
	// command that creates it.
	ErrTableNotFound = lease.ErrTableNotFound
	// ErrNotLeaseTable is matched by the error Adapter.Run returns when the
	// lease table exists but has another key schema (long-running mode).
	ErrNotLeaseTable = lease.ErrNotLeaseTable
)

// Ack reports the record handled: the checkpoint may pass it.
func Ack() Outcome { return message.Ack() }

// Drop reports the record handled by giving up on it (a poison record), with
// err as the logged reason: the checkpoint passes it exactly as for Ack.
func Drop(err error) Outcome { return message.Drop(err) }

// Retry reports that the record must come again, with err as the logged
// reason. Without WithMaxAttempts or a dead-letter target the record stays
// unsettled: in Lambda mode it and every later record of its shard are
// reported back to Lambda, which delivers them again starting from it; in
// long-running mode it is delivered again in process after a backoff,
// while later records of its partition key wait for it. With either, it
// becomes a counted copy written to its stream (the original settles once
// the copy is written) until the cap sends it to the dead-letter target.
func Retry(err error) Outcome { return message.Retry(err) }

// RetryAfter reports that the record must come again after d, with err as
// the logged reason: a counted copy is written to its stream after d. A d up
// to WithMaxInProcessDelay (default 5s) — that ends before the invocation's
// deadline minus the margin, in Lambda mode — is waited out in process; a
// longer one goes through the delay queue (WithDelayQueue), or without one
// behaves as Retry and logs a warning. The cap applies as for Retry.
func RetryAfter(d time.Duration, err error) Outcome { return message.RetryAfter(d, err) }

// Option configures an Adapter. Options are applied in order; New
// validates the result once. An option that belongs to one mode only (see
// each one's documentation) is an error in the other; wrap such options in
// OnlyIn to share one option list between modes.
type Option func(*config)

// config is what the options set; New turns it into an Adapter.
type config struct {
	mode            Mode
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
	kinesis         publish.KinesisAPI
	sqs             publish.SQSAPI
	maxMessageBytes int
	hooks           []observe.Hook
	maxRecordAge    time.Duration
	recycle         bool
	ecs             ecsConfig
	used            []modeUse     // mode-specific options given
	onlyIn          []modeOptions // options for one mode (OnlyIn)
	errs            []error
}

// modeUse records a mode-specific option given to New.
type modeUse struct {
	name string
	mode Mode
}

// only records that the option name belongs to mode m.
func (c *config) only(m Mode, name string) { c.used = append(c.used, modeUse{name, m}) }

// OnlyIn applies opts only when the adapter runs in mode m, and ignores
// them otherwise: one program can then carry the options of both modes and
// choose its mode at start (WithMode).
func OnlyIn(m Mode, opts ...Option) Option {
	return func(c *config) {
		c.onlyIn = append(c.onlyIn, modeOptions{m, opts})
	}
}

// modeOptions are options OnlyIn applies in one mode.
type modeOptions struct {
	mode Mode
	opts []Option
}

// WithConcurrency sets how many partition keys are handled at once
// (default 16), in either mode. Records with the same partition key are
// always handled one after another, in stream order. n must be at least 1.
func WithConcurrency(n int) Option {
	return func(c *config) { c.concurrency, c.concurrencySet = n, true }
}

// WithDeadlineMargin (Lambda mode only) sets how long before the invocation
// deadline the adapter stops starting records, cancels the context of
// running handlers and writes what must be written (copies, dead letters)
// before answering (default 500ms). d must be positive.
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) {
		c.only(ModeLambda, "WithDeadlineMargin")
		if d <= 0 {
			c.errs = append(c.errs, errors.New("deadline margin must be positive"))
		}
		c.margin = d
	}
}

// WithLogger sets the logger for drops, retries, copies, dead letters,
// panics and deadline warnings, and in long-running mode for leases and
// shards (default: discard). Attribute keys are stable and the same in
// both modes: mode, shard_id, sequence_number, partition_key, outcome,
// attempt, error, stack, retry_in.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithMaxAttempts caps how many times a record is handled, counting the
// first delivery (n ≥ 1). It turns Retry into counted copies: the record is
// written again to its stream with x-ruststream-retry-count set to the
// attempts made and settles; when the n-th attempt fails, the record goes to
// the dead-letter target, or is retired (logged, like Drop) without one.
func WithMaxAttempts(n int) Option {
	return func(c *config) { c.maxAttempts, c.maxAttemptsSet = n, true }
}

// WithDeadLetterStream sends records that reached the cap to the Kinesis
// stream nameOrARN: payload and user headers in the RSK1 envelope, plus the
// diagnostic headers x-dead-letter-reason, -source-stream, -shard-id,
// -sequence-number, -attempts and -first-arrival. Without WithMaxAttempts the
// cap is 3 attempts.
func WithDeadLetterStream(nameOrARN string) Option {
	return func(c *config) { c.deadLetterStrm = nameOrARN }
}

// WithDeadLetterQueue sends records that reached the cap to the SQS queue
// url, one JSON message per record (see the publish package for the body).
// Without WithMaxAttempts the cap is 3 attempts.
func WithDeadLetterQueue(url string) Option {
	return func(c *config) { c.deadLetterQueue = url }
}

// WithDeadLetterDrops sends Drop outcomes to the dead-letter target too, so
// poison records are kept, not only logged.
func WithDeadLetterDrops() Option {
	return func(c *config) { c.deadLetterDrops = true }
}

// WithDelayQueue makes RetryAfter delays longer than can be waited in
// process durable: the record goes to the SQS queue url with DelaySeconds
// (chained past 15 minutes) and settles; the message is forwarded to the
// stream as the counted copy once due — in Lambda mode when Lambda delivers
// it from that queue to this same function (map the queue to the function
// with ReportBatchItemFailures), in long-running mode by the service itself.
func WithDelayQueue(url string) Option {
	return func(c *config) { c.delayQueue = url }
}

// WithMaxInProcessDelay sets the longest RetryAfter delay waited out in
// process before the copy is written (default 5s); longer delays use the
// delay queue. d must be positive.
func WithMaxInProcessDelay(d time.Duration) Option {
	return func(c *config) { c.inProcessDelay, c.delaySet = d, true }
}

// WithReplyStream sets the stream (name or ARN) Message.Reply writes to
// when the reply names none.
func WithReplyStream(nameOrARN string) Option {
	return func(c *config) { c.replyStream = nameOrARN }
}

// WithReplyPartitionKey sets the partition key of replies that carry none
// (neither in the call nor as a partition-key header). Without it such
// replies get a generated key that spreads them over the shards.
func WithReplyPartitionKey(key string) Option {
	return func(c *config) { c.replyKey = key }
}

// WithKinesisClient sets the Kinesis client used for copies, dead letters
// and replies (and, in long-running mode, for reading the stream),
// typically a *kinesis.Client. Without it the adapter builds one from the
// default AWS configuration (the function's or task's role).
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

// WithHooks adds hooks that observe what the adapter does (package
// observe): metrics exporters such as observe/emf, or your own. Each hook
// receives the events of the observe interfaces it implements; an adapter
// without hooks pays nothing for them.
func WithHooks(hooks ...observe.Hook) Option {
	return func(c *config) { c.hooks = append(c.hooks, hooks...) }
}

// WithRecycledMessages makes the adapter reuse the memory of a Message, its
// Payload and its Headers once it finished with the record (handled,
// written where its outcome says, or given up on): in Lambda mode for the
// next invocation, in long-running mode for a later GetRecords answer. It
// allocates less and is faster for large batches (BENCHMARKS.md, "Messages
// that are yours to keep"), at a price: a handler must not keep the
// Message, its Payload or its Headers after it returned — copy what it
// needs (strings, such as PartitionKey and header values, stay valid). In
// a test binary (testing.Testing) the adapter overwrites a recycled
// payload's bytes with 0xDB, so a test that kept one reads garbage instead
// of another record's data. Without this option (the default) every
// Message is yours to keep.
func WithRecycledMessages() Option {
	return func(c *config) { c.recycle = true }
}

// WithMaxRecordAge makes the adapter skip records older than d by their
// arrival time: such a record is not handled but dead-lettered (reason
// "max record age", payload and headers kept) when a dead-letter target is
// set, else dropped with a warning — in both modes — so a consumer that fell
// far behind catches up instead of working through stale data. d must be
// positive.
func WithMaxRecordAge(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, errors.New("max record age must be positive"))
		}
		c.maxRecordAge = d
	}
}

// Adapter runs a Handler over Kinesis records, in Lambda mode (Invoke,
// HandleEvent, Handle) or long-running mode (Run). It is safe for
// concurrent use and holds no per-invocation state between calls.
type Adapter struct {
	mode     Mode
	engine   *engine.Engine
	runner   *lambda.Runner
	consumer *consumer.Consumer
	store    lease.Store
}

// New returns an Adapter for h, validating the options once. It panics if h
// is nil (a programmer error) and returns an error for contradictory or
// out-of-range options, and for an option of the other mode.
func New(h Handler, opts ...Option) (*Adapter, error) {
	if h == nil {
		panic("lambdaadapter: nil handler")
	}
	return newAdapter(h, nil, opts...)
}

// apply applies opts, then those OnlyIn gave for the resulting mode.
func (c *config) apply(opts []Option) {
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	scoped := c.onlyIn
	c.onlyIn = nil
	for _, s := range scoped {
		if s.mode == c.mode {
			c.apply(s.opts)
		}
	}
}

func newAdapter(h Handler, bh BatchHandler, opts ...Option) (*Adapter, error) {
	var c config
	c.apply(opts)
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("lambdaadapter: %w", err)
	}
	if bh != nil && c.mode != ModeECS {
		return nil, errors.New("lambdaadapter: batch handlers run in long-running mode only")
	}
	logger := c.logger
	switch {
	case logger != nil:
	case c.logLevelSet:
		logger = NewLogger(c.mode, c.logLevel)
	default:
		logger = slog.New(slog.DiscardHandler)
	}
	needSQS := c.deadLetterQueue != "" || c.delayQueue != ""
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
	var queue *publish.Queue
	if c.sqs != nil {
		qopts := []publish.QueueOption{publish.WithQueueLogger(logger)}
		if c.maxMessageBytes != 0 {
			qopts = append(qopts, publish.WithMaxMessageSize(c.maxMessageBytes))
		}
		if queue, err = publish.NewQueue(c.sqs, qopts...); err != nil {
			return nil, fmt.Errorf("lambdaadapter: %w", err)
		}
	}
	e, err := engine.New(engine.Config{
		Handler:      h,
		BatchHandler: bh,
		Policy: retry.Policy{
			MaxAttempts: c.maxAttempts, DeadLetterDrops: c.deadLetterDrops, MaxInProcessDelay: c.inProcessDelay,
		},
		Publisher: pub, Queue: queue,
		DeadLetterStream: c.deadLetterStrm, DeadLetterQueue: c.deadLetterQueue, DelayQueue: c.delayQueue,
		ReplyStream:  c.replyStream,
		Logger:       logger,
		Hooks:        hooks.New(c.hooks...),
		MaxRecordAge: c.maxRecordAge,

		RecycleMessages: c.recycle,
	})
	if err != nil {
		return nil, err
	}
	if c.mode == ModeECS {
		cc, err := c.consumerConfig(e)
		if err != nil {
			return nil, err
		}
		cons, err := consumer.New(cc)
		if err != nil {
			return nil, fmt.Errorf("lambdaadapter: %w", err)
		}
		return &Adapter{mode: ModeECS, engine: e, consumer: cons, store: cc.Store}, nil
	}
	r, err := lambda.NewRunner(lambda.Config{Engine: e, Concurrency: c.concurrency, DeadlineMargin: c.margin})
	if err != nil {
		return nil, fmt.Errorf("lambdaadapter: %w", err)
	}
	return &Adapter{mode: ModeLambda, engine: e, runner: r}, nil
}

// validate checks the options once.
func (c *config) validate() error {
	var wrong []string
	for _, u := range c.used {
		if u.mode != c.mode && !slices.Contains(wrong, u.name) {
			wrong = append(wrong, u.name)
		}
	}
	if len(wrong) > 0 {
		other := "long-running mode (WithMode(ModeECS))"
		if c.mode == ModeECS {
			other = "Lambda mode"
		}
		return wrongModeError(fmt.Sprintf("%s belongs to %s, but this adapter runs in %s mode (wrap options of the other mode in OnlyIn)",
			strings.Join(wrong, ", "), other, c.mode))
	}
	if len(c.errs) > 0 {
		return c.errs[0]
	}
	if c.ecs.store != nil && c.ecs.table != "" {
		return errors.New("set WithLeaseStore or WithLeaseTable, not both")
	}
	switch {
	case c.concurrencySet && c.concurrency < 1:
		return errors.New("concurrency must be at least 1")
	case c.maxAttemptsSet && c.maxAttempts < 1:
		return fmt.Errorf("max attempts must be at least 1, got %d", c.maxAttempts)
	case c.delaySet && c.inProcessDelay <= 0:
		return errors.New("max in-process delay must be positive")
	case c.deadLetterStrm != "" && c.deadLetterQueue != "":
		return errors.New("set WithDeadLetterStream or WithDeadLetterQueue, not both")
	case c.deadLetterDrops && c.deadLetterStrm == "" && c.deadLetterQueue == "":
		return errors.New("WithDeadLetterDrops needs a dead-letter target (WithDeadLetterStream or WithDeadLetterQueue)")
	}
	return nil
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
