package consumer

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/message"
	"github.com/shardsettle/lambdaadapter/settle"
)

// shard is one owned shard: its lease, watermark, reader and checkpointer.
type shard struct {
	c  *Consumer
	id string
	wm *settle.Watermark
	ck *checkpointer

	settleMu sync.Mutex // makes a settlement and its checkpoint update one step

	mu     sync.Mutex // guards lease, cancel, done; serialises lease writes
	lease  lease.Lease
	cancel context.CancelFunc
	done   chan struct{}

	ended    atomic.Bool // the reader reached the end of the closed shard
	finished atomic.Bool // SHARD_END handled
}

func (c *Consumer) newShard(l lease.Lease) *shard {
	s := &shard{c: c, id: l.Key.ShardID, wm: settle.NewWatermark(l.Key.ShardID), lease: l}
	s.ck = newCheckpointer(s)
	return s
}

// delivery is one record on its way from a reader to a lane.
type delivery struct {
	s      *shard
	m      message.Message
	ticket settle.Ticket
}

// done marks the delivery finished (handled or dropped).
func (d *delivery) done() { d.s.c.inflight.Add(-1) }

// stale reports whether the shard was sought (or dropped) since d was read.
func (d *delivery) stale() bool { return d.ticket.Epoch() != d.s.wm.Epoch() }

// stopReading cancels the reader and waits for it to exit.
func (s *shard) stopReading() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// renew renews the lease, serialised with checkpoint writes.
func (s *shard) renew(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.c.cfg.Store.Renew(ctx, s.lease)
	if err == nil {
		s.lease = l
	}
	return err
}

// release frees the lease after the final checkpoint.
func (s *shard) release(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.c.cfg.Store.Release(ctx, s.lease); err != nil {
		s.c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: releasing a lease failed; it expires instead", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
		return
	}
	s.c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: lease released", slog.String(attrShardID, s.id))
}

// settle settles d and passes a moved watermark to the checkpointer. The
// settlement and its checkpoint update happen as one step, so two lanes
// can never hand the checkpointer their values out of order.
func (s *shard) settle(d *delivery) {
	defer s.maybeEnd()
	s.settleMu.Lock()
	defer s.settleMu.Unlock()
	cp, moved, err := s.wm.Settle(d.ticket)
	if err != nil {
		if !errors.Is(err, settle.ErrStale) {
			s.c.log.LogAttrs(context.Background(), slog.LevelError, "consumer: settle failed", slog.String(attrShardID, s.id),
				slog.String(attrSequenceNumber, d.m.SequenceNumber), slog.String(attrError, err.Error()))
		}
		return
	}
	if moved {
		s.ck.update(cp)
	}
}

// maybeEnd checkpoints SHARD_END once the reader reached the end of a
// closed shard and every delivery settled.
func (s *shard) maybeEnd() {
	if !s.ended.Load() || s.wm.Pending() != 0 {
		return
	}
	if err := s.wm.End(); err != nil {
		return
	}
	if s.finished.CompareAndSwap(false, true) {
		s.ck.end()
	}
}

// batch is one GetRecords answer on its way from a shard's fetcher to its
// reader.
type batch struct {
	records []kinesistypes.Record
	end     bool // the shard is closed and these are its last records
}

// read is the reader of the shard: it hands the records its fetcher reads
// from pos to the consumer's channel, in order. The fetcher reads one batch
// ahead: while the reader hands a batch off (waiting whenever the channel is
// full), the next GetRecords call is already under way, so a shard never
// idles between a call and the hand-off of its records. At most two batches
// per shard are held: the one being handed off and the one read ahead.
func (s *shard) read(ctx context.Context, pos Position) {
	c := s.c
	ctx, cancel := context.WithCancel(ctx)
	batches := make(chan batch) // unbuffered: exactly one batch read ahead
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		s.fetch(ctx, pos, batches)
	}()
	defer func() {
		cancel()
		<-fetched
	}()
	epoch := s.wm.Epoch()
	for {
		var b batch
		select {
		case b = <-batches:
		case <-ctx.Done():
			return
		}
		for i := range b.records {
			d, err := s.deliver(&b.records[i], epoch)
			if err != nil {
				c.log.LogAttrs(ctx, slog.LevelError, "consumer: cannot track record", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
				continue
			}
			c.inflight.Add(1)
			select {
			case c.ch <- d:
			case <-ctx.Done():
				c.inflight.Add(-1)
				return
			}
		}
		if b.end {
			// The shard is closed and fully read.
			s.ended.Store(true)
			s.maybeEnd()
			return
		}
	}
}

// fetch reads the shard from pos with GetRecords and passes every non-empty
// answer (and the end of a closed shard) to out, until ctx is done or the
// shard ended.
func (s *shard) fetch(ctx context.Context, pos Position, out chan<- batch) {
	c := s.c
	iter, err := s.iterator(ctx, pos)
	for err != nil {
		if ctx.Err() != nil {
			return
		}
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: getting a shard iterator failed; will retry", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
		if !sleep(ctx, time.Second) {
			return
		}
		iter, err = s.iterator(ctx, pos)
	}
	// last is the sequence number of the last record read; every record
	// read is handed to the reader, so it is also the last one delivered
	// once the reader has caught up.
	last := ""
	backoff := minCallInterval
	var lastCall time.Time
	for {
		if wait := minCallInterval - time.Since(lastCall); wait > 0 && !sleep(ctx, wait) {
			return
		}
		lastCall = time.Now()
		res, err := c.cfg.Kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(int32(c.cfg.Limit)), StreamARN: optional(c.cfg.StreamARN)})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var expired *kinesistypes.ExpiredIteratorException
			var throttled *kinesistypes.ProvisionedThroughputExceededException
			switch {
			case errors.As(err, &expired):
				// A new iterator after the last record read: never a
				// rewind to the checkpoint, never LATEST.
				p := pos
				if last != "" {
					p = Position{kind: posSequence, shard: s.id, seq: last}
				}
				iter, err = s.iterator(ctx, p)
				if err != nil && !sleep(ctx, time.Second) {
					return
				}
				continue
			case errors.As(err, &throttled):
				backoff = min(backoff*2, 5*time.Second)
			default:
				backoff = min(backoff*2, 5*time.Second)
				c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: GetRecords failed; will retry", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
			}
			if !sleep(ctx, backoff) {
				return
			}
			continue
		}
		backoff = minCallInterval
		b := batch{records: res.Records, end: res.NextShardIterator == nil}
		if n := len(b.records); n > 0 {
			last = aws.ToString(b.records[n-1].SequenceNumber)
		}
		if len(b.records) > 0 || b.end {
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
		}
		if b.end {
			return
		}
		iter = res.NextShardIterator
		if len(b.records) == 0 && !sleep(ctx, idleWait) {
			return
		}
	}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// deliver turns a Kinesis record into a tracked delivery.
func (s *shard) deliver(r *kinesistypes.Record, epoch settle.Epoch) (*delivery, error) {
	seq := aws.ToString(r.SequenceNumber)
	t, err := s.wm.Deliver(seq, 1)
	if err != nil {
		return nil, err
	}
	if t.Epoch() != epoch {
		return nil, settle.ErrStale
	}
	h, payload := envelope.Decode(r.Data)
	h = slices.Grow(h, 3) // the delivery headers, without growing three times
	key := aws.ToString(r.PartitionKey)
	attempt := message.RetryCount(h) + 1
	h.Set(envelope.PartitionKeyHeader, key)
	h.Set(envelope.SequenceNumberHeader, seq)
	h.Set(envelope.ShardIDHeader, s.id)
	d := &delivery{s: s, ticket: t, m: message.Message{
		Payload: payload, Headers: h, PartitionKey: key, SequenceNumber: seq, ShardID: s.id,
		StreamARN: s.c.streamRef(), Attempt: attempt,
	}}
	if r.ApproximateArrivalTimestamp != nil {
		d.m.ArrivalTime = r.ApproximateArrivalTimestamp.UTC()
	}
	return d, nil
}

// iterator returns a shard iterator for pos.
func (s *shard) iterator(ctx context.Context, pos Position) (*string, error) {
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(s.id)}
	s.c.streamInput(&in.StreamName, &in.StreamARN)
	switch pos.kind {
	case posHorizon:
		in.ShardIteratorType = kinesistypes.ShardIteratorTypeTrimHorizon
	case posTimestamp:
		in.ShardIteratorType = kinesistypes.ShardIteratorTypeAtTimestamp
		in.Timestamp = aws.Time(pos.at)
	case posSequence:
		in.ShardIteratorType = kinesistypes.ShardIteratorTypeAfterSequenceNumber
		in.StartingSequenceNumber = aws.String(pos.seq)
	case posAtSequence:
		in.ShardIteratorType = kinesistypes.ShardIteratorTypeAtSequenceNumber
		in.StartingSequenceNumber = aws.String(pos.seq)
	default:
		in.ShardIteratorType = kinesistypes.ShardIteratorTypeLatest
	}
	out, err := s.c.cfg.Kinesis.GetShardIterator(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.ShardIterator, nil
}

// sleep waits d or until ctx is done; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// checkpointer writes a shard's checkpoint: only when the watermark moved,
// only while the lease is held, at most one write in flight, the newest
// value wins, at most one write per CheckpointInterval, and always flushed
// on handoff and shutdown.
type checkpointer struct {
	s    *shard
	wmu  sync.Mutex // serialises writes: at most one in flight
	mu   sync.Mutex
	want string // newest checkpoint to write
	have string // last written
	dead bool   // lease lost or shard stopped: write nothing more
	kick chan struct{}
	quit chan struct{}
	once sync.Once
	exit chan struct{}
	last time.Time
}

func newCheckpointer(s *shard) *checkpointer {
	k := &checkpointer{s: s, kick: make(chan struct{}, 1), quit: make(chan struct{}), exit: make(chan struct{})}
	go k.loop()
	return k
}

// update asks for seq to be written.
func (k *checkpointer) update(seq string) {
	k.mu.Lock()
	k.want = seq
	k.mu.Unlock()
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// end writes SHARD_END now, then gives the shard up: its children may
// start.
func (k *checkpointer) end() {
	k.update(lease.ShardEnd)
	k.flush(context.Background())
	s := k.s
	s.c.log.LogAttrs(context.Background(), slog.LevelInfo, "consumer: shard ended", slog.String(attrShardID, s.id))
	s.c.mu.Lock()
	if s.c.shards[s.id] == s {
		delete(s.c.shards, s.id)
	}
	s.c.mu.Unlock()
	k.halt()
	s.release(context.Background())
}

func (k *checkpointer) halt() {
	k.once.Do(func() { close(k.quit) })
	<-k.exit
}

func (k *checkpointer) loop() {
	defer close(k.exit)
	for {
		select {
		case <-k.quit:
			return
		case <-k.kick:
		}
		k.mu.Lock()
		last := k.last
		k.mu.Unlock()
		if wait := k.s.c.cfg.CheckpointInterval - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-k.quit:
				t.Stop()
				return
			}
		}
		k.flush(context.Background())
	}
}

// flush writes the newest wanted checkpoint if it was not written yet.
// Writes are serialised by wmu; k.mu is never held across the store call,
// so lanes settling the shard do not wait for DynamoDB.
func (k *checkpointer) flush(ctx context.Context) {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.mu.Lock()
	if k.dead || k.want == "" || k.want == k.have {
		k.mu.Unlock()
		return
	}
	want := k.want
	k.mu.Unlock()

	s := k.s
	s.mu.Lock()
	l, err := s.c.cfg.Store.Checkpoint(ctx, s.lease, want)
	if err == nil {
		s.lease = l
	}
	s.mu.Unlock()

	lost := errors.Is(err, lease.ErrLeaseLost)
	k.mu.Lock()
	k.last = time.Now()
	switch {
	case err == nil:
		k.have = want
	case lost:
		k.dead = true
	}
	k.mu.Unlock()
	switch {
	case err == nil:
	case lost:
		s.c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: checkpoint refused: lease lost", slog.String(attrShardID, s.id))
		// Stop reading the shard at once; Run's loop drops it (dropping
		// from here would wait for this very goroutine).
		select {
		case s.c.lost <- s:
		default: // the next renewal finds it
		}
	default:
		s.c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: checkpoint write failed; will retry", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
		select {
		case k.kick <- struct{}{}:
		default:
		}
	}
}

// stop flushes the newest checkpoint and stops the loop.
func (k *checkpointer) stop() {
	k.halt()
	k.flush(context.Background())
}

// abandon stops the loop without writing: the lease is gone.
func (k *checkpointer) abandon() {
	k.mu.Lock()
	k.dead = true
	k.mu.Unlock()
	k.halt()
}
