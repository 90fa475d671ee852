package lambdaadapter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter/internal/consumer"
	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/lease"
)

// Mode selects how the Adapter receives records.
type Mode uint8

const (
	// ModeLambda (the default): Lambda invokes the function with batches
	// from its event source mapping.
	ModeLambda Mode = iota
	// ModeECS: a long-running service (ECS, or any host) reads the stream
	// itself, sharing shards with other instances through leases.
	ModeECS
)

// String returns "lambda" or "ecs".
func (m Mode) String() string {
	if m == ModeECS {
		return "ecs"
	}
	return "lambda"
}

// ParseMode parses "lambda" or "ecs".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "lambda":
		return ModeLambda, nil
	case "ecs":
		return ModeECS, nil
	}
	return 0, fmt.Errorf("lambdaadapter: unknown mode %q (want lambda or ecs)", s)
}

// Position is where a long-running consumer starts reading a shard that has
// no checkpoint yet.
type Position = consumer.Position

// Latest starts at the tip: records written from now on (the default).
func Latest() Position { return consumer.Latest() }

// TrimHorizon starts at the oldest record each shard still retains.
func TrimHorizon() Position { return consumer.TrimHorizon() }

// AtTimestamp starts at the first record that arrived at or after t.
func AtTimestamp(t time.Time) Position { return consumer.AtTimestamp(t) }

type ecsConfig struct {
	stream, streamARN  string
	table              string
	dynamo             lease.DynamoDBAPI
	store              lease.Store
	owner              string
	start              Position
	limit              int
	leaseDuration      time.Duration
	checkpointInterval time.Duration
	metricsInterval    time.Duration
	shutdownTimeout    time.Duration
	listInterval       time.Duration
	batchSize          int
	retryBackoff       time.Duration
	maxRetryBackoff    time.Duration
	fanOut             string // enhanced fan-out consumer name
}

// WithMode selects Lambda mode (default) or long-running mode (ModeECS).
func WithMode(m Mode) Option { return func(c *config) { c.mode = m } }

// WithStream (long-running mode only) names the stream to read (required
// in ModeECS). Lease keys use the name.
func WithStream(name string) Option {
	return func(c *config) { c.only(ModeECS, "WithStream"); c.ecs.stream = name }
}

// WithStreamARN (long-running mode only) sets the stream's ARN: API calls
// and copies then use it.
func WithStreamARN(arn string) Option {
	return func(c *config) { c.only(ModeECS, "WithStreamARN"); c.ecs.streamARN = arn }
}

// WithLeaseTable (long-running mode only) stores leases in the DynamoDB
// table (see package lease for its schema; create it with `bootstrap leases
// init -table NAME`), so many instances share the stream. Without it,
// leases live in memory and one instance reads every shard.
func WithLeaseTable(table string) Option {
	return func(c *config) { c.only(ModeECS, "WithLeaseTable"); c.ecs.table = table }
}

// WithDynamoDBClient (long-running mode only) sets the DynamoDB client of
// the lease table, typically a *dynamodb.Client; without it one is built
// from the default AWS configuration.
func WithDynamoDBClient(d lease.DynamoDBAPI) Option {
	return func(c *config) { c.only(ModeECS, "WithDynamoDBClient"); c.ecs.dynamo = d }
}

// WithLeaseStore (long-running mode only) sets the lease store directly
// (tests, custom stores).
func WithLeaseStore(s lease.Store) Option {
	return func(c *config) { c.only(ModeECS, "WithLeaseStore"); c.ecs.store = s }
}

// WithOwnerID (long-running mode only) sets this instance's lease owner
// id; it must be unique per process (default: the host name, the ECS task's
// container id when it runs on ECS, and random digits).
func WithOwnerID(id string) Option {
	return func(c *config) { c.only(ModeECS, "WithOwnerID"); c.ecs.owner = id }
}

// WithStartPosition (long-running mode only) sets where a shard without a
// checkpoint starts (default Latest).
func WithStartPosition(p Position) Option {
	return func(c *config) { c.only(ModeECS, "WithStartPosition"); c.ecs.start = p }
}

// WithGetRecordsLimit (long-running mode only) sets the GetRecords limit
// (default 1,000, at most 10,000).
func WithGetRecordsLimit(n int) Option {
	return func(c *config) { c.only(ModeECS, "WithGetRecordsLimit"); c.ecs.limit = n }
}

// WithLeaseDuration (long-running mode only) sets how long a lease whose
// counter does not change is taken to be alive (default 10s); leases renew
// every third of it.
func WithLeaseDuration(d time.Duration) Option {
	return func(c *config) { c.only(ModeECS, "WithLeaseDuration"); c.ecs.leaseDuration = d }
}

// WithMetricsInterval (long-running mode only) sets how often the hooks
// (WithHooks) get an in-flight snapshot and are flushed (default 60s, and
// once more before Run returns). In Lambda mode they are flushed once per
// invocation.
func WithMetricsInterval(d time.Duration) Option {
	return func(c *config) { c.only(ModeECS, "WithMetricsInterval"); c.ecs.metricsInterval = d }
}

// WithCheckpointInterval (long-running mode only) bounds checkpoint writes
// to one per shard per interval (default 1s), the lease's take counting as
// the first.
func WithCheckpointInterval(d time.Duration) Option {
	return func(c *config) { c.only(ModeECS, "WithCheckpointInterval"); c.ecs.checkpointInterval = d }
}

// WithShutdownTimeout (long-running mode only) bounds how long a graceful
// stop waits for records in flight before it cancels their handlers
// (default 10s). A planned hand-over of one lease to another instance waits
// that long and then up to 5 minutes more, with the lease renewed, before
// it does the same (README, "Planned hand-over").
func WithShutdownTimeout(d time.Duration) Option {
	return func(c *config) { c.only(ModeECS, "WithShutdownTimeout"); c.ecs.shutdownTimeout = d }
}

// WithListInterval (long-running mode only) sets how often shards are
// listed again (default 30s).
func WithListInterval(d time.Duration) Option {
	return func(c *config) { c.only(ModeECS, "WithListInterval"); c.ecs.listInterval = d }
}

// WithBatchSize (long-running mode only) sets the largest batch a
// BatchHandler gets (default 100, at most 10,000); a batch closes at that
// size or 50 ms after its first record.
func WithBatchSize(n int) Option {
	return func(c *config) { c.only(ModeECS, "WithBatchSize"); c.ecs.batchSize = n }
}

// WithRetryBackoff (long-running mode only) spaces the in-process
// redeliveries of a record that stays unsettled: the n-th waits base ×
// 2^(n-1), at most max, drawn from the upper half of that (defaults 500ms
// and 30s). Both must be positive.
func WithRetryBackoff(base, max time.Duration) Option {
	return func(c *config) {
		c.only(ModeECS, "WithRetryBackoff")
		if base <= 0 || max <= 0 {
			c.errs = append(c.errs, errors.New("retry backoff must be positive"))
		}
		c.ecs.retryBackoff, c.ecs.maxRetryBackoff = base, max
	}
}

// WithEnhancedFanOut (long-running mode only) reads the stream with
// enhanced fan-out as the stream consumer consumerName: each shard's records
// are pushed with SubscribeToShard as they arrive, with 2 MB/s per shard for
// this consumer alone, instead of polled with GetRecords (5 calls/s and
// 2 MB/s per shard shared by every polling consumer of the stream). Run
// registers the stream consumer if it does not exist (the instances of one
// service share it; it is never deregistered) and waits until it is ACTIVE.
// Kinesis bills every registered consumer per consumer-shard hour and per
// GB retrieved; see the README. It needs the stream's ARN (WithStreamARN, or
// looked up with DescribeStreamSummary) and a Kinesis client with
// SubscribeToShard (a *kinesis.Client has it). Leases, checkpoints,
// balancing, resharding and shutdown work as with polling.
func WithEnhancedFanOut(consumerName string) Option {
	return func(c *config) { c.only(ModeECS, "WithEnhancedFanOut"); c.ecs.fanOut = consumerName }
}

// BatchHandler handles several records at once in long-running mode and
// returns one Outcome per record, in order; every element settles on its
// own, exactly as the Outcome of a Handler would, and an element left
// unsettled is delivered again in a later batch after a backoff. Batches are
// handed over one at a time; records of one partition key appear in stream
// order.
type BatchHandler = message.BatchHandler

// BatchHandlerFunc adapts a function to BatchHandler.
type BatchHandlerFunc = message.BatchHandlerFunc

// NewBatch returns a long-running Adapter (WithMode(ModeECS) is implied)
// that hands records to bh in batches. It panics if bh is nil.
func NewBatch(bh BatchHandler, opts ...Option) (*Adapter, error) {
	if bh == nil {
		panic("lambdaadapter: nil batch handler")
	}
	return newAdapter(nil, bh, append([]Option{WithMode(ModeECS)}, opts...)...)
}

// consumerConfig builds the long-running consumer's configuration.
func (c *config) consumerConfig(e *engine.Engine) (consumer.Config, error) {
	x := &c.ecs
	if x.stream == "" {
		return consumer.Config{}, errors.New("lambdaadapter: long-running mode needs the stream: WithStream, or LAMBDAADAPTER_STREAM in the environment")
	}
	k, ok := c.kinesis.(consumer.KinesisAPI)
	if !ok {
		return consumer.Config{}, errors.New("lambdaadapter: long-running mode needs a Kinesis client with ListShards, GetShardIterator and GetRecords")
	}
	store := x.store
	if store == nil && x.table != "" {
		if x.dynamo == nil {
			awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
			if err != nil {
				return consumer.Config{}, fmt.Errorf("lambdaadapter: load the default AWS configuration: %w", err)
			}
			x.dynamo = dynamodb.NewFromConfig(awsCfg)
		}
		store = lease.NewDynamoDB(x.dynamo, x.table)
	}
	// The SQS client forwards the delay queue too when it can receive.
	receiver, _ := c.sqs.(consumer.DelayQueueAPI)
	return consumer.Config{
		Stream: x.stream, StreamARN: x.streamARN, Kinesis: k, Store: store, Owner: x.owner, Engine: e,
		BatchSize: x.batchSize, Concurrency: c.concurrency, Start: x.start, Limit: x.limit,
		LeaseDuration: x.leaseDuration, ListInterval: x.listInterval, CheckpointInterval: x.checkpointInterval,
		MetricsInterval: x.metricsInterval,
		ShutdownTimeout: x.shutdownTimeout, RetryBackoff: x.retryBackoff, MaxRetryBackoff: x.maxRetryBackoff,
		DelayReceiver: receiver, EnhancedFanOut: x.fanOut,
	}, nil
}

// Mode returns the mode the Adapter was built for.
func (a *Adapter) Mode() Mode { return a.mode }

// Consumer returns the long-running consumer (ModeECS), or nil in Lambda
// mode. Use it to Seek or to see which shards this instance owns.
func (a *Adapter) Consumer() *consumer.Consumer { return a.consumer }

// Run runs a long-running (ModeECS) adapter until ctx is cancelled, then
// stops gracefully: it stops reading, lets records in flight settle, writes
// the checkpoints and releases the leases. It returns nil after a graceful
// stop and an error when it cannot start (for example a missing lease
// table). In Lambda mode it returns an error: use Handle or Invoke.
func (a *Adapter) Run(ctx context.Context) error {
	if a.consumer == nil {
		return errors.New("lambdaadapter: Run is for long-running mode (WithMode(ModeECS)); Lambda mode uses Handle")
	}
	// The table is checked first, so that any reason it cannot be used (a
	// missing table, another key schema, no permission, an unreachable
	// endpoint) stops Run at once with a clear error; the consumer's own
	// first call would take some of them for passing faults and retry.
	if d, ok := a.store.(*lease.DynamoDB); ok {
		if err := d.Check(ctx); err != nil {
			return err
		}
	}
	return a.consumer.Run(ctx)
}

// Handle runs h and blocks: the whole main of a consumer program. In Lambda
// mode (the default) it starts the Lambda runtime loop and never returns. In
// long-running mode it reads the stream until SIGTERM or SIGINT, stops
// gracefully and returns.
//
// The mode and settings come from, in increasing precedence: the
// LAMBDAADAPTER_* environment (Environment), a -mode=ecs (or -mode ecs)
// argument on the command line (read without claiming the program's flag
// set), and opts. Without WithLogger or WithLogLevel it logs warnings and
// errors with NewLogger (in Lambda through aws-lambda-go's lambdacontext
// handler: text, or JSON with AWS_LAMBDA_LOG_FORMAT=JSON; in long-running
// mode JSON lines on stdout). A configuration or start-up error (a bad
// variable, an invalid option, a missing stream or lease table) is printed
// as one line on stderr and the program exits with status 1. Programs that
// want to handle those errors themselves call New and Adapter.Run.
func Handle(h Handler, opts ...Option) {
	if err := handle(h, os.Args[1:], os.Getenv, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// handle is Handle without the process: it returns the error Handle
// prints.
func handle(h Handler, args []string, getenv func(string) string, opts []Option) error {
	a, err := newFromProcess(h, args, getenv, opts)
	if err != nil {
		return err
	}
	if a.mode == ModeECS {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		return a.Run(ctx)
	}
	awslambda.Start(a)
	return nil
}

// newFromProcess builds the Adapter Handle runs: environment, then the
// -mode argument, then opts.
func newFromProcess(h Handler, args []string, getenv func(string) string, opts []Option) (*Adapter, error) {
	all, err := Environment(getenv)
	if err != nil {
		return nil, err
	}
	if v, ok := modeFlag(args); ok {
		m, err := ParseMode(v)
		if err != nil {
			return nil, fmt.Errorf("lambdaadapter: -mode=%s: want lambda or ecs", v)
		}
		all = append(all, WithMode(m))
	}
	all = append([]Option{WithLogLevel(slog.LevelWarn)}, all...)
	return New(h, append(all, opts...)...)
}

var (
	_ consumer.KinesisAPI = (*kinesis.Client)(nil)
	_ consumer.FanOutAPI  = (*kinesis.Client)(nil)
)
