package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/observe"
)

// FanOutAPI is the part of *kinesis.Client that enhanced fan-out needs:
// Config.Kinesis must implement it as well when Config.EnhancedFanOut is
// set. The consumer registers its stream consumer (or finds it registered)
// with DescribeStreamConsumer and RegisterStreamConsumer, and reads every
// shard it holds with SubscribeToShard.
type FanOutAPI interface {
	RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error)
	DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error)
	SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error)
}

var _ FanOutAPI = (*kinesis.Client)(nil)

// Enhanced fan-out settings.
const (
	// subscribeInterval keeps the SubscribeToShard calls of a shard at
	// least a second apart: Kinesis allows one call per second per
	// consumer and shard.
	subscribeInterval = time.Second
	// maxSubscribeBackoff caps the wait after a SubscribeToShard that
	// failed. A ResourceInUseException (a subscription of this consumer and
	// shard is still open) lasts at most 5 seconds after the call that
	// opened it.
	maxSubscribeBackoff = 5 * time.Second
	// subscriptionIdle ends a subscription that delivered no event for
	// this long; the shard is subscribed to again. Kinesis sends an event
	// every few seconds, without records when there is nothing new.
	subscriptionIdle = time.Minute
	// registerPoll and maxRegisterPoll space the DescribeStreamConsumer
	// calls while a stream consumer is being created (or deleted): 500ms
	// doubling up to 5s. DescribeStreamConsumer allows 20 calls per second
	// per account, shared by every worker that starts.
	registerPoll    = 500 * time.Millisecond
	maxRegisterPoll = 5 * time.Second
	// registerAttempts bounds the calls in a row that fail while the
	// stream consumer is registered or looked up.
	registerAttempts = 10
)

// consumerName is what Kinesis accepts as a stream consumer's name.
var consumerName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

// subscription is one SubscribeToShard event stream as the fan-out reader
// uses it; *kinesis.SubscribeToShardEventStream is one. Events is closed
// when the stream ends, and Err then says why: nil when Kinesis ended it (it
// does after five minutes). Close releases the stream; it may be called more
// than once.
type subscription interface {
	Events() <-chan kinesistypes.SubscribeToShardEventStream
	Err() error
	Close() error
}

// fanOut is a consumer's enhanced fan-out: the stream consumer it reads as,
// and how it subscribes to a shard.
type fanOut struct {
	api  FanOutAPI
	name string
	// open subscribes to a shard: SubscribeToShard and its event stream.
	// Tests replace it, since the SDK's output cannot carry a stream of
	// theirs.
	open func(ctx context.Context, in *kinesis.SubscribeToShardInput) (subscription, error)

	// regMu serialises registrations (at start, and again when the stream
	// consumer disappeared).
	regMu sync.Mutex
	mu    sync.Mutex
	arn   string // the stream consumer's ARN, once registered
}

// checkFanOut validates the enhanced fan-out settings of c.
func (c *Config) checkFanOut() error {
	if c.EnhancedFanOut == "" {
		return nil
	}
	if !consumerName.MatchString(c.EnhancedFanOut) {
		return fmt.Errorf("consumer: enhanced fan-out consumer name %q: want 1 to 128 letters, digits, '_', '.' or '-'", c.EnhancedFanOut)
	}
	if _, ok := c.Kinesis.(FanOutAPI); !ok {
		return fmt.Errorf("consumer: enhanced fan-out (consumer %q) needs a Kinesis client with RegisterStreamConsumer, DescribeStreamConsumer and SubscribeToShard (FanOutAPI; a *kinesis.Client has them)", c.EnhancedFanOut)
	}
	return nil
}

// newFanOut returns the fan-out of cfg, or nil when cfg reads by polling.
// cfg was validated.
func newFanOut(cfg *Config) *fanOut {
	if cfg.EnhancedFanOut == "" {
		return nil
	}
	f := &fanOut{api: cfg.Kinesis.(FanOutAPI), name: cfg.EnhancedFanOut}
	f.open = f.subscribeToShard
	return f
}

// subscribeToShard calls SubscribeToShard and returns its event stream.
func (f *fanOut) subscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput) (subscription, error) {
	out, err := f.api.SubscribeToShard(ctx, in)
	if err != nil {
		return nil, err
	}
	if es := out.GetStream(); es != nil {
		return es, nil
	}
	return nil, errors.New("consumer: SubscribeToShard returned no event stream")
}

// consumerARN returns the stream consumer's ARN.
func (f *fanOut) consumerARN() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.arn
}

// source returns how the shard's reader reads: SubscribeToShard with
// enhanced fan-out, else GetRecords. Both have the same contract (see
// fetch).
func (s *shard) source() func(context.Context, Position, chan<- batch) {
	if s.c.fan != nil {
		return s.subscribe
	}
	return s.fetch
}

// startFanOut registers the stream consumer, or finds it registered, and
// waits until it is ACTIVE, before any reader starts. It does nothing when
// the consumer polls.
func (c *Consumer) startFanOut(ctx context.Context) error {
	if c.fan == nil {
		return nil
	}
	stream := c.streamARN()
	if stream == "" {
		return fmt.Errorf("consumer: enhanced fan-out needs the ARN of stream %s: set Config.StreamARN (lambdaadapter.WithStreamARN, LAMBDAADAPTER_STREAM_ARN), or give a Kinesis client that answers DescribeStreamSummary", c.cfg.Stream)
	}
	return c.fan.register(ctx, c.log, stream, "")
}

// streamARN returns the stream's ARN, configured or learnt at start, or "".
func (c *Consumer) streamARN() string {
	if c.cfg.StreamARN != "" {
		return c.cfg.StreamARN
	}
	return c.arn
}

// register looks the stream consumer up, registers it when it does not
// exist, and waits until it is ACTIVE; then its ARN is the one every
// subscription uses. A registration by someone else at the same time
// (ResourceInUseException) is looked up again. stale is the ARN a reader
// found missing (the consumer was deregistered under it): when another
// reader registered the consumer again meanwhile, register does nothing.
// It gives up after registerAttempts failed calls in a row, or when ctx is
// done.
func (f *fanOut) register(ctx context.Context, log *slog.Logger, stream, stale string) error {
	f.regMu.Lock()
	defer f.regMu.Unlock()
	if f.consumerARN() != stale {
		return nil
	}
	attrs := []slog.Attr{slog.String("consumer_name", f.name), slog.String("stream_arn", stream)}
	wait, failures := registerPoll, 0
	for {
		var status kinesistypes.ConsumerStatus
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		d, err := f.api.DescribeStreamConsumer(cctx, &kinesis.DescribeStreamConsumerInput{StreamARN: aws.String(stream), ConsumerName: aws.String(f.name)})
		cancel()
		switch {
		case err == nil && d.ConsumerDescription != nil:
			failures = 0
			status = d.ConsumerDescription.ConsumerStatus
			if status == kinesistypes.ConsumerStatusActive {
				arn := aws.ToString(d.ConsumerDescription.ConsumerARN)
				f.mu.Lock()
				f.arn = arn
				f.mu.Unlock()
				log.LogAttrs(ctx, slog.LevelInfo, "consumer: enhanced fan-out consumer active", append(attrs, slog.String("consumer_arn", arn))...)
				return nil
			}
		case err == nil:
			err = errors.New("DescribeStreamConsumer answered no consumer description")
		case missingShard(err): // the stream consumer does not exist
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			r, rerr := f.api.RegisterStreamConsumer(cctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(stream), ConsumerName: aws.String(f.name)})
			cancel()
			if rerr == nil {
				failures = 0
				if r.Consumer != nil {
					log.LogAttrs(ctx, slog.LevelInfo, "consumer: enhanced fan-out consumer registered", append(attrs, slog.String("consumer_arn", aws.ToString(r.Consumer.ConsumerARN)))...)
				}
				continue // look it up: it may be ACTIVE already
			}
			err = rerr
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case inUse(err):
			// Registered by another worker at the same moment (or still
			// being deleted): look it up again after the wait. It counts
			// as a failure only so that a lookup and a registration that
			// keep contradicting each other end.
			failures++
			log.LogAttrs(ctx, slog.LevelDebug, "consumer: enhanced fan-out consumer registered concurrently", attrs...)
		case err != nil:
			failures++
			log.LogAttrs(ctx, slog.LevelWarn, "consumer: registering the enhanced fan-out consumer failed; will retry",
				append(attrs, slog.String(attrError, err.Error()))...)
		default:
			log.LogAttrs(ctx, slog.LevelDebug, "consumer: waiting for the enhanced fan-out consumer", append(attrs, slog.String("status", string(status)))...)
		}
		if failures >= registerAttempts {
			return fmt.Errorf("consumer: enhanced fan-out consumer %q of %s: %w", f.name, stream, err)
		}
		if !sleep(ctx, wait) {
			return ctx.Err()
		}
		wait = min(2*wait, maxRegisterPoll)
	}
}

// resumePoint is where a shard's next subscription starts: after the last
// record handed to the reader; before any, after the continuation sequence
// number of the last event passed on (Kinesis's documented resume point,
// which moves on even while nothing is written); before any event, the
// reader's start position.
type resumePoint struct {
	start        Position
	last         string // the sequence number of the last record handed on
	continuation string // the ContinuationSequenceNumber of the last event passed on
}

func (p *resumePoint) position() *kinesistypes.StartingPosition {
	switch {
	case p.last != "":
		return &kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String(p.last)}
	case p.continuation != "":
		return &kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String(p.continuation)}
	}
	return startingPosition(p.start)
}

// startingPosition maps pos to a SubscribeToShard starting position, as
// iterator maps it to a shard iterator type.
func startingPosition(pos Position) *kinesistypes.StartingPosition {
	switch pos.kind {
	case posHorizon:
		return &kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeTrimHorizon}
	case posTimestamp:
		return &kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(pos.at)}
	case posSequence:
		return &kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String(pos.seq)}
	case posAtSequence:
		return &kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(pos.seq)}
	}
	return &kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeLatest}
}

// errIdle ends a subscription that delivered nothing for subscriptionIdle.
var errIdle = errors.New("consumer: no event on the subscription for " + subscriptionIdle.String())

// subscribe reads the shard from pos with SubscribeToShard (enhanced
// fan-out) and passes every event with records (and the end of a closed
// shard, or its disappearance) to out, until ctx is done or the shard
// ended: fetch's contract, one batch per event. A subscription that ends
// (Kinesis ends each after five minutes) or fails is renewed after the last
// record handed to out; an event read but not passed on (ctx ended first)
// is never skipped. Every event stream is closed before subscribe returns.
func (s *shard) subscribe(ctx context.Context, pos Position, out chan<- batch) {
	c := s.c
	at := resumePoint{start: pos}
	var last time.Time // the last SubscribeToShard call
	var backoff, refusedWait time.Duration
	for {
		if wait := max(subscribeInterval-time.Since(last), backoff); wait > 0 && !sleep(ctx, wait) {
			return
		}
		last = time.Now()
		arn := c.fan.consumerARN()
		start := at.position()
		done, err := s.subscription(ctx, arn, start, &at, out)
		if done || ctx.Err() != nil {
			return
		}
		if err == nil {
			// Kinesis ended the subscription: renew it at once.
			backoff = 0
			c.log.LogAttrs(ctx, slog.LevelDebug, "consumer: subscription ended; renewing", slog.String(attrShardID, s.id))
			continue
		}
		backoff = min(max(2*backoff, subscribeInterval), maxSubscribeBackoff)
		switch {
		case inUse(err):
			// The previous subscription of this consumer and shard is
			// still open (for at most 5 seconds).
			c.log.LogAttrs(ctx, slog.LevelDebug, "consumer: subscription still in use; will retry", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
		case missingShard(err):
			// Either the shard is gone or the stream consumer is.
			gone, gerr := s.missing(ctx)
			switch {
			case gone:
				select {
				case out <- batch{gone: true}:
				case <-ctx.Done():
				}
				return
			case gerr != nil:
				c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: SubscribeToShard found nothing and the shard cannot be checked; will retry", slog.String(attrShardID, s.id), slog.String(attrError, gerr.Error()))
			default:
				c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: the enhanced fan-out consumer is missing; registering it again", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
				if rerr := c.fan.register(ctx, c.log, c.streamARN(), arn); rerr != nil && ctx.Err() == nil {
					c.log.LogAttrs(ctx, slog.LevelError, "consumer: registering the enhanced fan-out consumer again failed; will retry", slog.String(attrShardID, s.id), slog.String(attrError, rerr.Error()))
				}
			}
		case refusedPosition(err, Position{seq: aws.ToString(start.SequenceNumber)}):
			// As fetch: the lease is kept and the shard is not read, and
			// the error is repeated less and less often.
			backoff = c.refused(ctx, s.id, aws.ToString(start.SequenceNumber), err, &refusedWait)
		default:
			var throttled *kinesistypes.LimitExceededException
			if !errors.As(err, &throttled) {
				c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: subscription failed; will retry", slog.String(attrShardID, s.id),
					slog.String("starting_position", string(start.Type)), slog.String(attrError, err.Error()))
			}
		}
	}
}

// subscription reads one subscription of the shard, starting at start, and
// moves at past what it passes to out. It reports done when reading must
// stop (ctx done, or the shard's end passed on); otherwise the subscription
// ended, cleanly (err nil) or not. The event stream is closed when it
// returns.
func (s *shard) subscription(ctx context.Context, arn string, start *kinesistypes.StartingPosition, at *resumePoint, out chan<- batch) (done bool, err error) {
	c := s.c
	// The subscription's own context ends with it; the call has a
	// deadline, the event stream it opens lives on.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slow := time.AfterFunc(callTimeout, cancel)
	sub, err := c.fan.open(sctx, &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String(s.id), StartingPosition: start})
	slow.Stop()
	if err != nil {
		return false, err
	}
	defer sub.Close()
	c.log.LogAttrs(ctx, slog.LevelDebug, "consumer: subscribed", slog.String(attrShardID, s.id),
		slog.String("starting_position", string(start.Type)), slog.String(engine.AttrSequenceNumber, aws.ToString(start.SequenceNumber)))
	idle := time.NewTimer(subscriptionIdle)
	defer idle.Stop()
	events := sub.Events()
	for {
		var ev kinesistypes.SubscribeToShardEventStream
		select {
		case <-ctx.Done():
			return true, nil
		case <-idle.C:
			return false, errIdle
		case e, ok := <-events:
			if !ok {
				return false, sub.Err()
			}
			ev = e
		}
		m, ok := ev.(*kinesistypes.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
		if !ok {
			idle.Reset(subscriptionIdle)
			continue // a kind of event this SDK version does not know
		}
		v := &m.Value
		s.c.obs.Read(observe.Read{Stream: s.c.cfg.Stream, ShardID: s.id, Records: len(v.Records), MillisBehindLatest: aws.ToInt64(v.MillisBehindLatest)})
		cont := aws.ToString(v.ContinuationSequenceNumber)
		// The shard is closed and read to its end: Kinesis names its
		// children and gives no continuation.
		end := cont == "" && len(v.ChildShards) > 0
		if len(v.Records) > 0 || end {
			select {
			case out <- batch{records: v.Records, end: end}:
			case <-ctx.Done():
				return true, nil // not passed on: at stays before it
			}
			if n := len(v.Records); n > 0 {
				at.last = aws.ToString(v.Records[n-1].SequenceNumber)
			}
		}
		switch {
		case end:
			return true, nil
		case cont == "":
			// Not the end (no children), yet no continuation: subscribe
			// again after what was passed on.
			return false, errors.New("consumer: subscription event without a continuation sequence number or child shards")
		}
		at.continuation = cont
		// Idle counts from here: a reader that waited long for the
		// consumer's channel does not make the subscription look dead.
		idle.Reset(subscriptionIdle)
	}
}

// missing reports whether the shard no longer exists, as GetShardIterator
// tells (SubscribeToShard answers ResourceNotFoundException for a missing
// stream consumer as well).
func (s *shard) missing(ctx context.Context) (bool, error) {
	_, err := s.iterator(ctx, Position{kind: posHorizon})
	if missingShard(err) {
		return true, nil
	}
	return false, err
}

// inUse reports whether err is a ResourceInUseException.
func inUse(err error) bool {
	var e *kinesistypes.ResourceInUseException
	return errors.As(err, &e)
}
