package lambdaadapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter/internal/ascii"
	"github.com/shardsettle/lambdaadapter/internal/consumer"
	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/lease"
)

// Service runs a Handler (or a BatchHandler) in long-running mode: it reads
// the stream itself, on ECS or any host, and shares its shards with the
// other instances of the service through leases (WithLeaseTable). Run
// blocks until its context ends and then stops gracefully.
type Service struct {
	// group is one consumer per stream (WithStream, WithStreams), in the
	// order given.
	group *consumer.Group
	store lease.Store
}

// NewService returns a Service for h, validating the options once. It
// panics if h is nil (a programmer error) and returns an error for
// contradictory or out-of-range options. It needs WithStream, and
// WithAWSConfig or the clients (WithKinesisClient; WithDynamoDBClient with
// WithLeaseTable; WithSQSClient with a queue); it builds no AWS
// configuration of its own and reads no environment.
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	...
//	s, err := lambdaadapter.NewService(h, lambdaadapter.WithAWSConfig(cfg),
//		lambdaadapter.WithStream("orders"), lambdaadapter.WithLeaseTable("orders-leases"))
//	...
//	err = s.Run(ctx) // until ctx ends, then a graceful stop
func NewService(h Handler, opts ...ServiceOption) (*Service, error) {
	if h == nil {
		panic("lambdaadapter: nil handler")
	}
	return newService(h, nil, options(opts))
}

// NewBatchService returns a Service that hands records to bh in batches
// (WithBatchSize). It panics if bh is nil.
func NewBatchService(bh BatchHandler, opts ...ServiceOption) (*Service, error) {
	if bh == nil {
		panic("lambdaadapter: nil batch handler")
	}
	return newService(nil, bh, options(opts))
}

// newService builds a Service from options of any kind (Handle passes what
// it filtered for long-running mode).
func newService(h Handler, bh BatchHandler, opts []Option) (*Service, error) {
	c := config{mode: ModeECS}
	c.apply(opts)
	e, _, err := c.buildEngine(h, bh)
	if err != nil {
		return nil, err
	}
	streams, err := c.ecs.streamList()
	if err != nil {
		return nil, err
	}
	cc, err := c.consumerConfig(e)
	if err != nil {
		return nil, err
	}
	if len(streams) > 1 {
		// One owner id and one store for the group's consumers.
		if cc.Owner == "" {
			cc.Owner = lease.NewOwnerID("", "")
		}
		if cc.Store == nil {
			cc.Store = lease.NewMemory()
		}
	}
	var cs []*consumer.Consumer
	for i, st := range streams {
		sc := cc
		sc.Stream, sc.StreamARN = st.name, st.arn
		if i > 0 {
			sc.DelayReceiver = nil // the first stream's consumer forwards the delay queue
		}
		if st.h != nil {
			ec := e.Config()
			ec.Handler, ec.BatchHandler = st.h, nil
			if sc.Engine, err = engine.New(ec); err != nil {
				return nil, err
			}
		}
		cons, err := consumer.New(sc)
		if err != nil {
			return nil, fmt.Errorf("lambdaadapter: %w", err)
		}
		cs = append(cs, cons)
	}
	g, err := consumer.NewGroup(cs...)
	if err != nil {
		return nil, fmt.Errorf("lambdaadapter: %w", err)
	}
	return &Service{group: g, store: cc.Store}, nil
}

// streamSpec is one stream a service reads: its name, its ARN if known,
// and its own handler if it has one.
type streamSpec struct {
	name, arn string
	h         Handler
	named     bool // by WithStream or WithStreams (not only by WithStreamHandler)
}

// streamList returns the streams to read, WithStream's first, then
// WithStreams' and WithStreamHandler's in order, each once. A stream named
// twice by WithStream and WithStreams (by name or by ARN) is an error: the
// second is a mistake (a stream meant and misspelt, a copied list), not a
// second reader. WithStreamHandler gives a listed stream its handler.
func (x *ecsConfig) streamList() ([]streamSpec, error) {
	var list []streamSpec
	if x.streamARN != "" {
		// WithStreamARN is the ARN of WithStream's stream.
		sp, err := parseStream(x.streamARN)
		switch {
		case err != nil || sp.arn == "":
			return nil, fmt.Errorf("lambdaadapter: WithStreamARN: stream %q is not a Kinesis stream ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME)", x.streamARN)
		case x.stream == "":
			return nil, errors.New("lambdaadapter: WithStreamARN needs WithStream, the stream's name (with WithStreams, give the stream by its ARN in the list)")
		case sp.name != x.stream:
			return nil, fmt.Errorf("lambdaadapter: WithStreamARN: %s is not stream %s's ARN (WithStream)", x.streamARN, x.stream)
		}
	}
	if x.stream != "" {
		list = append(list, streamSpec{name: x.stream, arn: x.streamARN, named: true})
	}
	for _, sp := range x.streams {
		i := slices.IndexFunc(list, func(o streamSpec) bool { return o.name == sp.name })
		switch {
		case i < 0:
			list = append(list, sp)
		case sp.h != nil && list[i].h != nil:
			return nil, fmt.Errorf("lambdaadapter: stream %s has two handlers (WithStreamHandler twice)", sp.name)
		case sp.arn != "" && list[i].arn != "" && sp.arn != list[i].arn:
			// Lease keys use the name: one service reads one stream of a name.
			return nil, fmt.Errorf("lambdaadapter: stream %s is given with two ARNs, %s and %s (a service reads one stream of a name)", sp.name, list[i].arn, sp.arn)
		case sp.named && list[i].named:
			return nil, fmt.Errorf("lambdaadapter: stream %s is named twice (WithStream, WithStreams or LAMBDAADAPTER_STREAM, by name or by ARN): name each stream once", sp.name)
		default:
			if sp.h != nil {
				list[i].h = sp.h
			}
			list[i].named = list[i].named || sp.named
			if list[i].arn == "" {
				list[i].arn = sp.arn
			}
		}
	}
	if len(list) == 0 {
		return nil, errors.New("lambdaadapter: a service needs the stream: WithStream (or WithStreams), or LAMBDAADAPTER_STREAM in the environment of Handle")
	}
	return list, nil
}

// parseStream parses a stream given as a name or as an ARN
// (arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME).
func parseStream(s string) (streamSpec, error) {
	if strings.HasPrefix(s, "arn:") {
		// The name after "stream/" is a stream's name: not, say, an
		// enhanced fan-out consumer's ARN (stream/NAME/consumer/...).
		i := strings.Index(s, ":stream/")
		if i < 0 || !strings.Contains(s[:i], ":kinesis:") || !ascii.StreamName(s[i+len(":stream/"):]) {
			return streamSpec{}, fmt.Errorf("stream %q is not a Kinesis stream ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME)", s)
		}
		return streamSpec{name: s[i+len(":stream/"):], arn: s}, nil
	}
	if !ascii.StreamName(s) {
		return streamSpec{}, fmt.Errorf("stream name %q is not valid (1 to 128 letters, digits, '_', '-' and '.')", s)
	}
	return streamSpec{name: s}, nil
}

// Position is where a Service starts reading a shard that has no
// checkpoint yet (WithStartPosition), or where Seek moves its readers.
type Position = consumer.Position

// Latest starts at the tip: records written from now on (the default). The
// start is written in the shard's lease (as the time of the first read, less
// a few seconds), so that whoever holds the lease next, before a record
// settled, reads from the same point: no record written since is skipped.
func Latest() Position { return consumer.Latest() }

// TrimHorizon starts at the oldest record each shard still retains.
func TrimHorizon() Position { return consumer.TrimHorizon() }

// AtTimestamp starts at the first record that arrived at or after t.
func AtTimestamp(t time.Time) Position { return consumer.AtTimestamp(t) }

// AtSequence is exactly the record seq of shard shardID (for Seek only).
func AtSequence(shardID, seq string) Position { return consumer.AtSequence(shardID, seq) }

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
	byCount            bool
	batchSize          int
	retryBackoff       time.Duration
	maxRetryBackoff    time.Duration
	fanOut             string       // enhanced fan-out consumer name
	streams            []streamSpec // WithStreams, WithStreamHandler
}

// WithStream names the stream to read (required, unless WithStreams names
// it): its name, or its ARN (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME,
// as WithStreamARN). Lease keys use the name.
func WithStream(name string) ServiceOption {
	return serviceOpt(func(c *config) {
		if name == "" {
			c.ecs.stream = ""
			return
		}
		sp, err := parseStream(name)
		if err != nil {
			c.errs = append(c.errs, err)
			return
		}
		c.ecs.stream = sp.name
		if sp.arn != "" {
			c.ecs.streamARN = sp.arn
		}
	})
}

// WithStreams adds streams to read, each by its name or its ARN
// (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME), with the service's handler
// (unless WithStreamHandler gives one of them its own). One service then
// reads several streams on one lease table, as the KCL's multi-stream mode
// does: each stream has its own readers, checkpoints and lease rows, and
// the leases of all of them are balanced together over the instances. The
// first stream (WithStream's, else the first listed) names the group in
// the lease table: keep it first when the list changes. Adding a stream
// to the list, or removing one, needs no migration (docs/long-running.md,
// "Several streams"). A stream named twice (in WithStreams, or by
// WithStream and WithStreams; by its name or its ARN) is an error naming
// it, and so is one name with two different ARNs (lease keys use the
// name); WithStreamHandler may name a listed stream again, to give it its
// handler. A Message's StreamARN says which stream it came from.
func WithStreams(streams ...string) ServiceOption {
	return serviceOpt(func(c *config) {
		for _, st := range streams {
			sp, err := parseStream(st)
			if err != nil {
				c.errs = append(c.errs, err)
				continue
			}
			sp.named = true
			c.ecs.streams = append(c.ecs.streams, sp)
		}
	})
}

// WithStreamHandler reads stream (a name or an ARN, as for WithStreams)
// with h instead of the service's handler, adding it to the streams read
// if it is not among them. In a batch service (NewBatchService) h handles
// that stream's records one at a time.
func WithStreamHandler(stream string, h Handler) ServiceOption {
	return serviceOpt(func(c *config) {
		sp, err := parseStream(stream)
		switch {
		case err != nil:
			c.errs = append(c.errs, err)
		case h == nil:
			c.errs = append(c.errs, fmt.Errorf("nil handler for stream %s", sp.name))
		default:
			sp.h = h
			c.ecs.streams = append(c.ecs.streams, sp)
		}
	})
}

// WithStreamARN sets the ARN of WithStream's stream: API calls and copies
// then use it. NewService returns an error when it is not a Kinesis stream
// ARN, names another stream than WithStream, or comes without WithStream
// (give the other streams' ARNs in WithStreams).
func WithStreamARN(arn string) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.streamARN = arn })
}

// WithLeaseTable stores leases in the DynamoDB table (see package lease for
// its schema; create it with `bootstrap leases init -table NAME`), so many
// instances share the stream. Without it, leases live in memory and one
// instance reads every shard.
func WithLeaseTable(table string) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.table = table })
}

// WithDynamoDBClient sets the DynamoDB client of the lease table, typically a
// *dynamodb.Client; without it one is built from WithAWSConfig's
// configuration.
func WithDynamoDBClient(d lease.DynamoDBAPI) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.dynamo = d })
}

// WithLeaseStore sets the lease store directly (tests, custom stores).
func WithLeaseStore(s lease.Store) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.store = s })
}

// WithOwnerID sets this instance's lease owner id; it must be unique per
// process (default: "worker-" and random digits; Handle uses the host name,
// or the ECS task's container id on ECS).
func WithOwnerID(id string) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.owner = id })
}

// WithStartPosition sets where a shard without a checkpoint starts (default
// Latest).
func WithStartPosition(p Position) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.start = p })
}

// WithGetRecordsLimit sets the GetRecords limit (default 1,000, at most
// 10,000).
func WithGetRecordsLimit(n int) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.limit = n })
}

// WithLeaseDuration sets how long a lease whose counter does not change is
// taken to be alive (default 10s); leases renew every third of it.
func WithLeaseDuration(d time.Duration) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.leaseDuration = d })
}

// WithMetricsInterval sets how often the hooks (WithHooks) get an in-flight
// snapshot and are flushed (default 60s, and once more before Run returns).
// In Lambda mode they are flushed once per invocation.
func WithMetricsInterval(d time.Duration) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.metricsInterval = d })
}

// WithCheckpointInterval bounds checkpoint writes to one per shard per
// interval (default 1s), the lease's take counting as the first.
func WithCheckpointInterval(d time.Duration) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.checkpointInterval = d })
}

// WithShutdownTimeout bounds how long a graceful stop waits for records in
// flight before it cancels their handlers (default 10s). A planned hand-over
// of one lease to another instance waits that long and then up to 5 minutes
// more, with the lease renewed, before it does the same (docs/long-running.md,
// "Balance and planned hand-over").
func WithShutdownTimeout(d time.Duration) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.shutdownTimeout = d })
}

// WithListInterval sets how often shards are listed again (default 30s).
func WithListInterval(d time.Duration) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.listInterval = d })
}

// WithBalanceByCount shares the leases so that every instance holds as many
// as the others (at most ceil(shards / instances)), whatever each shard
// carries. The default evens out the instances' CPU load instead, from the
// load each one publishes in the lease table: a hot shard counts for more
// than an idle one (docs/long-running.md, "Balance").
func WithBalanceByCount() ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.byCount = true })
}

// WithBatchSize sets the largest batch a BatchHandler gets (default 100, at
// most 10,000); a batch closes at that size or 50 ms after its first record.
func WithBatchSize(n int) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.batchSize = n })
}

// WithRetryBackoff spaces the in-process redeliveries of a record that stays
// unsettled: the n-th waits base × 2^(n-1), at most max, drawn from the upper
// half of that (defaults 500ms and 30s). Both must be positive.
func WithRetryBackoff(base, max time.Duration) ServiceOption {
	return serviceOpt(func(c *config) {
		if base <= 0 || max <= 0 {
			c.errs = append(c.errs, errors.New("retry backoff must be positive"))
		}
		c.ecs.retryBackoff, c.ecs.maxRetryBackoff = base, max
	})
}

// WithEnhancedFanOut reads the stream with enhanced fan-out as the stream
// consumer consumerName: each shard's records are pushed with
// SubscribeToShard as they arrive, with 2 MB/s per shard for this consumer
// alone, instead of polled with GetRecords (5 calls/s and 2 MB/s per shard
// shared by every polling consumer of the stream). Run registers the stream
// consumer if it does not exist (the instances of one service share it; it is
// never deregistered) and waits until it is ACTIVE. Kinesis bills every
// registered consumer per consumer-shard hour and per GB retrieved; see
// docs/long-running.md. It needs the stream's ARN (WithStreamARN, or looked up with
// DescribeStreamSummary) and a Kinesis client with SubscribeToShard (a
// *kinesis.Client has it). Leases, checkpoints, balancing, resharding and
// shutdown work as with polling.
func WithEnhancedFanOut(consumerName string) ServiceOption {
	return serviceOpt(func(c *config) { c.ecs.fanOut = consumerName })
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

// consumerConfig builds the long-running consumer's configuration.
func (c *config) consumerConfig(e *engine.Engine) (consumer.Config, error) {
	x := &c.ecs
	k, ok := c.kinesis.(consumer.KinesisAPI)
	if !ok {
		return consumer.Config{}, errors.New("lambdaadapter: a service needs a Kinesis client with ListShards, GetShardIterator and GetRecords (a *kinesis.Client has them)")
	}
	store := x.store
	if store == nil && x.table != "" {
		if x.dynamo == nil {
			if c.aws == nil {
				return consumer.Config{}, errors.New("lambdaadapter: WithLeaseTable needs a DynamoDB client: pass WithAWSConfig(cfg) or WithDynamoDBClient")
			}
			x.dynamo = dynamodb.NewFromConfig(*c.aws)
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
		DelayReceiver: receiver, EnhancedFanOut: x.fanOut, Assignment: assignment(x.byCount),
	}, nil
}

// assignment is the consumer's assignment for WithBalanceByCount.
func assignment(byCount bool) consumer.Assignment {
	if byCount {
		return consumer.AssignByCount
	}
	return consumer.AssignByLoad
}

// Run reads the stream until ctx is cancelled, then stops gracefully: it
// stops reading, lets records in flight settle, writes the checkpoints and
// releases the leases. It returns nil after a graceful stop and an error
// when it cannot start (for example a missing lease table: ErrTableNotFound;
// a missing stream: ErrStreamNotFound). Run once per Service.
func (s *Service) Run(ctx context.Context) error {
	// The table is checked first, so that any reason it cannot be used (a
	// missing table, another key schema, no permission, an unreachable
	// endpoint) stops Run at once with a clear error; the consumer's own
	// first call would take some of them for passing faults and retry.
	if d, ok := s.store.(*lease.DynamoDB); ok {
		if err := d.Check(ctx); err != nil {
			return err
		}
	}
	return s.group.Run(ctx)
}

// Seek moves the running readers: every shard this instance holds to pos,
// or, for AtSequence, that one shard. Records read before the seek are
// dropped on their way to the handler; their late outcomes change nothing.
// The checkpoint follows the new position as records settle. A sequence
// number that is not one (decimal digits; a lease's LATEST@ checkpoint is
// not) is an error, and moves nothing; so is one Kinesis refuses for the
// shard (GetShardIterator answers InvalidArgumentException: a sequence
// number of another shard or stream), and the reader reads on where it
// was. A Seek is also how a shard whose checkpoint Kinesis refuses is read
// again (see docs/faults.md).
//
// With several streams it moves the readers of every stream; AtSequence
// names the shard as "stream:shardId" (the shard id alone means that shard
// of whichever stream holds it, and is an error, moving nothing, when this
// instance holds a shard of that id in several streams).
func (s *Service) Seek(ctx context.Context, pos Position) error { return s.group.Seek(ctx, pos) }

// Owned returns the ids of the shards this instance holds now, sorted; with
// several streams, as "stream:shardId".
func (s *Service) Owned() []string { return s.group.Owned() }

// Owner returns this instance's lease owner id (WithOwnerID, or a random
// one).
func (s *Service) Owner() string { return s.group.Owner() }

var (
	_ consumer.KinesisAPI = (*kinesis.Client)(nil)
	_ consumer.FanOutAPI  = (*kinesis.Client)(nil)
)
