package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/lease"
)

// KinesisAPI is the part of *kinesis.Client the consumer reads with.
type KinesisAPI interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// BatchHandler handles several records at once. See message.BatchHandler;
// the module root exports it as lambdaadapter.BatchHandler.
type BatchHandler = message.BatchHandler

// BatchHandlerFunc adapts a function to BatchHandler.
type BatchHandlerFunc = message.BatchHandlerFunc

// Defaults of Config.
const (
	DefaultConcurrency        = 16
	DefaultLimit              = 1000
	MaxLimit                  = 10000
	DefaultLeaseDuration      = 10 * time.Second
	DefaultListInterval       = 30 * time.Second
	DefaultCheckpointInterval = time.Second
	DefaultMetricsInterval    = 60 * time.Second
	DefaultShutdownTimeout    = 10 * time.Second
	DefaultBatchWindow        = 50 * time.Millisecond
	DefaultRetryBackoff       = engine.DefaultBackoffBase
	DefaultMaxRetryBackoff    = engine.DefaultBackoffMax
	// DefaultMaxWaiting is how many records may wait for a lane (behind a
	// busy or retrying partition key) before the readers pause.
	DefaultMaxWaiting = 10000
	// ChannelSize is the capacity of the one channel all readers feed: a
	// reader waits while it is full, so the handlers set the pace.
	ChannelSize = 64
	// minCallInterval keeps a reader at 5 GetRecords calls per second, the
	// per-shard limit of Kinesis.
	minCallInterval = 200 * time.Millisecond
	// idleWait is how long a reader waits after a read that returned
	// nothing.
	idleWait = time.Second
)

// Config configures a Consumer. Stream, Kinesis and Engine are required;
// every other zero field takes its default.
type Config struct {
	// Stream is the stream's name. Lease keys use it ("stream:shardId").
	Stream string
	// StreamARN is the stream's ARN, if known: API calls then use it, and
	// it becomes Message.StreamARN (copies are written to it). When empty,
	// Run looks it up with DescribeStreamSummary if the Kinesis client has
	// it (see StreamDescriber); failing that, Message.StreamARN holds the
	// stream's name, which copies and delay messages accept as well.
	StreamARN string
	// Kinesis reads the stream.
	Kinesis KinesisAPI
	// Store holds the leases; nil means an in-memory store (one instance).
	Store lease.Store
	// Owner is this worker's owner id; "" means lease.NewOwnerID("", ""):
	// "worker-" and random digits (lambdaadapter.Handle passes one built
	// from the host name or the ECS task).
	Owner string
	// Engine runs the handler (or batch handler) and settles the records:
	// the same engine, with the same semantics, as Lambda mode.
	Engine *engine.Engine
	// BatchSize is the largest batch of a batch handler (default 100, at
	// most MaxLimit).
	BatchSize int
	// BatchWindow closes a batch this long after its first record (default
	// 50ms).
	BatchWindow time.Duration
	// Concurrency is the number of lanes (default 16).
	Concurrency int
	// Start is where a shard without a checkpoint starts (default Latest).
	Start Position
	// Limit is the GetRecords limit (default 1000, or the batch size when
	// that is larger, at most 10000).
	Limit int
	// LeaseDuration is how long a lease whose counter did not change is
	// held to be alive (default 10s). Leases are renewed every third of it.
	LeaseDuration time.Duration
	// ListInterval is how often the shards are listed again (default 30s).
	ListInterval time.Duration
	// MetricsInterval is how often the engine's hooks (observe) get an
	// in-flight snapshot and are flushed (default 60s); they are flushed
	// once more before Run returns.
	MetricsInterval time.Duration
	// CheckpointInterval bounds checkpoint writes to one per shard per
	// interval (default 1s), the lease's take counting as the first; a
	// kill -9 re-delivers about that much.
	CheckpointInterval time.Duration
	// ShutdownTimeout bounds how long a graceful stop waits for records in
	// flight to settle before it cancels their handlers (default 10s). The
	// hand-over of one lease to another worker waits that long and then up
	// to handOverPatience more, the lease renewed (see drain).
	ShutdownTimeout time.Duration
	// RetryBackoff and MaxRetryBackoff space the in-process redeliveries of
	// a record that stays unsettled: the n-th waits RetryBackoff × 2^(n-1),
	// at most MaxRetryBackoff, drawn from the upper half of that (defaults
	// 500ms and 30s).
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// MaxWaiting is how many read records may wait for a lane before the
	// readers pause (default DefaultMaxWaiting). Records of a key whose
	// record is being retried wait behind it.
	MaxWaiting int
	// DelayReceiver receives from the engine's delay queue: Run forwards
	// each durable delay message to its stream once it is due, and deletes
	// it after the write (a *sqs.Client does). Without it another process
	// must forward the delay queue (a Lambda function running this adapter
	// subscribed to it).
	DelayReceiver DelayQueueAPI
	// Logger receives the consumer's logs (leases, shards, reading); nil
	// means the engine's logger.
	Logger *slog.Logger
	// EnhancedFanOut, when set, is the name of the stream consumer to read
	// as with enhanced fan-out: each held shard is read with SubscribeToShard
	// (records pushed as they arrive, 2 MB/s per shard for this consumer
	// alone) instead of GetRecords, and Limit does not apply. Run registers
	// the stream consumer if it does not exist yet (workers sharing the
	// stream share it; it is never deregistered) and waits until it is
	// ACTIVE before reading. Kinesis must implement FanOutAPI too, and the
	// stream's ARN must be known: StreamARN, or a client with
	// DescribeStreamSummary. Empty (the default): GetRecords.
	EnhancedFanOut string
	// Assignment is what balancing evens out between the workers when one
	// of them plans for all (see lead.go): their load (AssignByLoad, the
	// default) or their lease counts (AssignByCount).
	Assignment Assignment
	// MaxMoves bounds the planned hand-overs of live leases per balancing
	// round (default DefaultMaxMoves); taking free and expired leases is
	// not bounded.
	MaxMoves int
	// CPUTime returns the CPU time this worker used so far, for the load
	// it publishes; nil: the process's (getrusage; unknown where that does
	// not exist). CPUs is the capacity it is measured against (default
	// GOMAXPROCS, or the container's cgroup CPU limit when that is lower:
	// Go rounds the limit up to at least 2, so half a vCPU runs with
	// GOMAXPROCS 2). The scale
	// simulation sets both, one simulated worker per goroutine.
	CPUTime func() time.Duration
	CPUs    float64
}

// Assignment is what the leader's plan evens out between the workers.
type Assignment uint8

const (
	// AssignByLoad evens out CPU utilization, from the load each worker
	// publishes: its CPU and each held shard's records and bytes per
	// second.
	AssignByLoad Assignment = iota
	// AssignByCount evens out lease counts: every lease costs the same,
	// each worker holds ceil(leases / workers) at most.
	AssignByCount
)

// DefaultMaxMoves is the default of Config.MaxMoves.
const DefaultMaxMoves = 8

func (c *Config) defaults() error {
	switch {
	case c.Stream == "":
		return errors.New("consumer: no stream")
	case c.Kinesis == nil:
		return errors.New("consumer: no Kinesis client")
	case c.Engine == nil:
		return errors.New("consumer: no engine (handler)")
	case c.Limit < 0 || c.Limit > MaxLimit:
		return fmt.Errorf("consumer: limit %d out of range 1..%d", c.Limit, MaxLimit)
	case c.BatchSize < 0 || c.BatchSize > MaxLimit:
		return fmt.Errorf("consumer: batch size %d out of range 1..%d", c.BatchSize, MaxLimit)
	case c.Concurrency < 0 || c.LeaseDuration < 0 || c.ListInterval < 0 || c.CheckpointInterval < 0 || c.ShutdownTimeout < 0 ||
		c.BatchWindow < 0 || c.RetryBackoff < 0 || c.MaxRetryBackoff < 0 || c.MaxWaiting < 0:
		return errors.New("consumer: negative setting")
	}
	if err := c.checkFanOut(); err != nil {
		return err
	}
	if c.Store == nil {
		c.Store = lease.NewMemory()
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.BatchSize == 0 {
		c.BatchSize = 100
	}
	if c.Limit == 0 {
		c.Limit = DefaultLimit
		if c.Engine.Batch() {
			// A batch can be filled by one read.
			c.Limit = min(max(DefaultLimit, c.BatchSize), MaxLimit)
		}
	}
	if c.BatchWindow == 0 {
		c.BatchWindow = DefaultBatchWindow
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.MaxMoves <= 0 {
		c.MaxMoves = DefaultMaxMoves
	}
	if c.ListInterval == 0 {
		c.ListInterval = DefaultListInterval
	}
	if c.MetricsInterval <= 0 {
		c.MetricsInterval = DefaultMetricsInterval
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxRetryBackoff == 0 {
		c.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	c.MaxRetryBackoff = max(c.MaxRetryBackoff, c.RetryBackoff)
	if c.MaxWaiting == 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	if c.Logger == nil {
		c.Logger = c.Engine.Logger()
	}
	return nil
}

// Position is where reading starts: a shard without a checkpoint starts at
// Config.Start; Consumer.Seek moves running readers.
type Position struct {
	kind  posKind
	at    time.Time
	shard string
	seq   string
	skip  int // posAtSequence: user records of the KPL aggregate at seq that settled before

	inherited bool // a child's start, from its parents' lineage
}

// sentinel is the lease checkpoint that records an inherited start.
func (p Position) sentinel() string {
	if p.kind == posTimestamp {
		return lease.AtTimestamp
	}
	return lease.TrimHorizon
}

type posKind uint8

const (
	posLatest posKind = iota
	posHorizon
	posTimestamp
	posSequence
)

// Latest is the tip of each shard: only records written from now on.
func Latest() Position { return Position{kind: posLatest} }

// TrimHorizon is the oldest record each shard still retains.
func TrimHorizon() Position { return Position{kind: posHorizon} }

// AtTimestamp is the first record of each shard that arrived at or after t.
func AtTimestamp(t time.Time) Position { return Position{kind: posTimestamp, at: t} }

// AtSequence is exactly the record seq of shard shardID (for Seek only).
func AtSequence(shardID, seq string) Position {
	return Position{kind: posSequence, shard: shardID, seq: seq}
}

// String describes the position for logs.
func (p Position) String() string {
	switch p.kind {
	case posHorizon:
		return "TRIM_HORIZON"
	case posTimestamp:
		return "AT_TIMESTAMP " + p.at.UTC().Format(time.RFC3339Nano)
	case posSequence:
		return "AT_SEQUENCE_NUMBER " + p.shard + " " + p.seq
	default:
		return "LATEST"
	}
}
