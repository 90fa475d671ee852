package lambdaadapter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter/consumer"
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
	mode               Mode
	stream, streamARN  string
	table              string
	dynamo             lease.DynamoDBAPI
	store              lease.Store
	owner              string
	start              Position
	limit              int
	leaseDuration      time.Duration
	checkpointInterval time.Duration
	shutdownTimeout    time.Duration
	listInterval       time.Duration
	batchSize          int
}

// WithMode selects Lambda mode (default) or long-running mode (ModeECS).
func WithMode(m Mode) Option { return func(c *config) { c.ecs.mode = m } }

// WithStream names the stream a long-running consumer reads (required in
// ModeECS). Lease keys use the name.
func WithStream(name string) Option { return func(c *config) { c.ecs.stream = name } }

// WithStreamARN sets the stream's ARN for a long-running consumer: API calls
// and copies then use it.
func WithStreamARN(arn string) Option { return func(c *config) { c.ecs.streamARN = arn } }

// WithLeaseTable stores leases in the DynamoDB table (see package lease for
// its schema; create it with `bootstrap leases init -table NAME`), so many
// instances share the stream. Without it, leases live in memory and one
// instance reads every shard.
func WithLeaseTable(table string) Option { return func(c *config) { c.ecs.table = table } }

// WithDynamoDBClient sets the DynamoDB client of the lease table, typically
// a *dynamodb.Client; without it one is built from the default AWS
// configuration.
func WithDynamoDBClient(d lease.DynamoDBAPI) Option { return func(c *config) { c.ecs.dynamo = d } }

// WithLeaseStore sets the lease store directly (tests, custom stores).
func WithLeaseStore(s lease.Store) Option { return func(c *config) { c.ecs.store = s } }

// WithOwnerID sets this instance's lease owner id; it must be unique per
// process (default: the ECS task id or host name plus random digits).
func WithOwnerID(id string) Option { return func(c *config) { c.ecs.owner = id } }

// WithStartPosition sets where a shard without a checkpoint starts
// (default Latest).
func WithStartPosition(p Position) Option { return func(c *config) { c.ecs.start = p } }

// WithGetRecordsLimit sets the GetRecords limit (default 1,000, at most
// 10,000).
func WithGetRecordsLimit(n int) Option { return func(c *config) { c.ecs.limit = n } }

// WithLeaseDuration sets how long a lease whose counter does not change is
// taken to be alive (default 10s); leases renew every third of it.
func WithLeaseDuration(d time.Duration) Option { return func(c *config) { c.ecs.leaseDuration = d } }

// WithCheckpointInterval bounds checkpoint writes to one per shard per
// interval (default 1s).
func WithCheckpointInterval(d time.Duration) Option {
	return func(c *config) { c.ecs.checkpointInterval = d }
}

// WithShutdownTimeout bounds how long a graceful stop waits for records in
// flight (default 10s).
func WithShutdownTimeout(d time.Duration) Option {
	return func(c *config) { c.ecs.shutdownTimeout = d }
}

// WithListInterval sets how often shards are listed again (default 30s).
func WithListInterval(d time.Duration) Option { return func(c *config) { c.ecs.listInterval = d } }

// WithBatchSize sets the largest batch a BatchHandler gets (default 100, at
// most 10,000); a batch closes at that size or 50 ms after its first
// record.
func WithBatchSize(n int) Option { return func(c *config) { c.ecs.batchSize = n } }

// BatchHandler handles up to WithBatchSize records at once in long-running
// mode and returns one Outcome per record, in order; every element settles
// on its own. See consumer.BatchHandler.
type BatchHandler = consumer.BatchHandler

// BatchHandlerFunc adapts a function to BatchHandler.
type BatchHandlerFunc = consumer.BatchHandlerFunc

// NewBatch returns a long-running Adapter (WithMode(ModeECS) is implied)
// that hands records to bh in batches. It panics if bh is nil.
func NewBatch(bh BatchHandler, opts ...Option) (*Adapter, error) {
	if bh == nil {
		panic("lambdaadapter: nil batch handler")
	}
	return newAdapter(nil, bh, append(opts, WithMode(ModeECS))...)
}

// consumerConfig builds the long-running consumer's configuration.
func (c *config) consumerConfig(h Handler, bh BatchHandler) (consumer.Config, error) {
	e := &c.ecs
	if e.stream == "" {
		return consumer.Config{}, errors.New("lambdaadapter: long-running mode needs WithStream")
	}
	k, ok := c.kinesis.(consumer.KinesisAPI)
	if !ok {
		return consumer.Config{}, errors.New("lambdaadapter: long-running mode needs a Kinesis client with ListShards, GetShardIterator and GetRecords")
	}
	store := e.store
	if store == nil && e.table != "" {
		if e.dynamo == nil {
			awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
			if err != nil {
				return consumer.Config{}, fmt.Errorf("lambdaadapter: load the default AWS configuration: %w", err)
			}
			e.dynamo = dynamodb.NewFromConfig(awsCfg)
		}
		store = lease.NewDynamoDB(e.dynamo, e.table)
	}
	// The SQS client forwards the delay queue too when it can receive.
	receiver, _ := c.sqs.(consumer.DelayQueueAPI)
	return consumer.Config{
		Stream: e.stream, StreamARN: e.streamARN, Kinesis: k, Store: store, Owner: e.owner, Handler: h,
		BatchHandler: bh, BatchSize: e.batchSize,
		Concurrency: c.runner.Concurrency, Start: e.start, Limit: e.limit, LeaseDuration: e.leaseDuration,
		ListInterval: e.listInterval, CheckpointInterval: e.checkpointInterval, ShutdownTimeout: e.shutdownTimeout,
		Settings: c.runner.Settings, ReplyStream: c.runner.ReplyStream, DelayReceiver: receiver, Logger: c.runner.Logger,
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
	if d, ok := a.store.(*lease.DynamoDB); ok {
		if err := d.Check(ctx); err != nil {
			return err
		}
	}
	return a.consumer.Run(ctx)
}

// Handle runs h and blocks. In Lambda mode (the default) it starts the Lambda
// runtime loop and never returns. In long-running mode (WithMode(ModeECS)) it
// reads the stream until SIGTERM or SIGINT, stops gracefully and returns. It
// panics if h is nil, the options are invalid or the consumer cannot start:
// all are found on the first start. Programs that want to handle those
// errors call New and Adapter.Run themselves.
func Handle(h Handler, opts ...Option) {
	a, err := New(h, opts...)
	if err != nil {
		panic(err)
	}
	if a.mode == ModeECS {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		if err := a.Run(ctx); err != nil {
			panic(err)
		}
		return
	}
	awslambda.Start(a)
}

var _ consumer.KinesisAPI = (*kinesis.Client)(nil)
