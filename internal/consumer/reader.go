package consumer

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/getrecords"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/pool"
	"github.com/shardsettle/lambdaadapter/internal/settle"
	"github.com/shardsettle/lambdaadapter/observe"
)

// reader is the reader of one shard: a goroutine that hands the records its
// fetcher reads to the consumer's channel, in order. Stop it with stop.
type reader struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// stop cancels the reader and waits until it and its fetcher exited.
func (r *reader) stop() {
	r.cancel()
	<-r.done
}

// startReader starts the reader of the shard at pos, registering its
// records in epoch e of the shard's watermark. It ends with the shard's
// life, or when stopped.
func (s *shard) startReader(pos Position, e settle.Epoch) *reader {
	ctx, cancel := context.WithCancel(s.life)
	r := &reader{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		s.read(ctx, pos, e)
	}()
	return r
}

// batch is one GetRecords answer on its way from a shard's fetcher to its
// reader.
type batch struct {
	records []kinesistypes.Record
	data    *getrecords.Data // what records' data were decoded into, given back once all are finished; nil: none
	end     bool             // the shard is closed and these are its last records
	gone    bool             // the shard no longer exists (trimmed away)
}

// read hands the records the fetcher reads from pos to the consumer's
// channel, in order, registering each in epoch e. The fetcher reads one
// batch ahead: while the reader hands a batch off (waiting whenever the
// channel is full), the next GetRecords call is already under way. At most
// two batches per shard are held: the one being handed off and the one read
// ahead. The reader also pauses while more than maxSpan records of the
// shard are not passed by its checkpoint (a record that does not settle
// holds every later one), which bounds what a restart re-delivers.
func (s *shard) read(ctx context.Context, pos Position, e settle.Epoch) {
	c := s.c
	ctx, cancel := context.WithCancel(ctx)
	batches := make(chan batch) // unbuffered: exactly one batch read ahead
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		s.source()(ctx, pos, batches) // GetRecords, or SubscribeToShard (efo.go)
	}()
	defer func() {
		cancel()
		<-fetched
	}()
	wm := s.es.Watermark()
	// resume: the first record read, when it is the KPL aggregate the lease
	// stopped inside, skips the user records that settled before.
	var resume Position
	if pos.kind == posAtSequence && pos.skip > 0 {
		resume = pos
	}
	for {
		var b batch
		select {
		case b = <-batches:
		case <-ctx.Done():
			return
		}
		for wm.Span() >= c.maxSpan() {
			select {
			case <-s.moved:
			case <-ctx.Done():
				return
			}
		}
		var size int64
		for i := range b.records {
			size += int64(len(b.records[i].Data))
		}
		ds, spans, ref, ok := s.register(ctx, e, b.records, b.data, &resume)
		if !ok {
			ref.Release()
			return // sought or lost since this reader started
		}
		s.flow.records.Add(int64(len(ds)))
		s.flow.bytes.Add(size)
		passed := c.pass(ctx, ds, spans)
		ref.Release() // the reader's hold: the deliveries hold the answer's storage now
		if !passed {
			return
		}
		switch {
		case b.gone:
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: shard no longer exists (trimmed away); releasing its lease", slog.String(attrShardID, s.id))
			s.stopGracefully(stopRequest{reason: stopGone})
			return
		case b.end:
			// The shard is closed and fully read.
			s.endEpoch.Store(uint64(e))
			s.maybeEnd()
			return
		}
	}
}

// maxSpan is how many records of a shard may be read beyond its checkpoint
// before its reader pauses: the records that may wait for a lane plus two
// batches.
func (c *Consumer) maxSpan() int { return c.cfg.MaxWaiting + 2*c.cfg.Limit }

// chunkSize is the most deliveries that pass the channel as one element: a
// run of one shard's records, submitted to the engine under one lock.
const chunkSize = 16

// span is a run ds[from:to] of registered deliveries.
type span struct{ from, to int }

// register turns the records of one answer into deliveries, registered in
// epoch e of the shard's watermark in one piece: one per ordinary record,
// one per user record of a KPL aggregate (from index resume.skip on for the
// aggregate the lease stopped inside: the ones before settled before a
// restart), or one poison delivery with the raw data for an aggregate whose
// MD5 matches but whose body is malformed. The deliveries and their headers
// share one allocation each. It returns the deliveries and the spans of
// them that were registered, in order; a record the watermark refuses (an
// invalid or repeated sequence number) is logged and left out. ok is false
// when the shard's epoch is no longer e: nothing is registered then.
//
// data is what recs were decoded into (nil: not known). Once the engine
// finished with every delivery registered, the decoded records are reused
// for a later answer; the messages, their payloads and headers are the
// handlers' to keep. With engine.Config.RecycleMessages the answer's
// whole storage — data, the deliveries (their Messages) and the headers'
// backing, the latter two taken from pools — is reused then instead. Each
// delivery holds ref, and so does the caller, who releases it once it
// passed the deliveries on (or gave up), whatever ok says.
func (s *shard) register(ctx context.Context, e settle.Epoch, recs []kinesistypes.Record, data *getrecords.Data, resume *Position) (ds []engine.Delivery, spans []span, ref *engine.Ref, ok bool) {
	c := s.c
	var (
		backing envelope.Headers
		sp      *[]engine.Delivery // the pooled slab, when recycling
	)
	if c.cfg.Engine.Config().RecycleMessages {
		sp = slabs.Get(len(recs))
		ds = *sp
		bp := backings.Get(len(recs) * message.DeliveryHeaders)
		backing = *bp
		if testing.Testing() {
			data.ScribbleOnRelease() // see lambdaadapter.WithRecycledMessages
		}
		ref = engine.NewRef(func() {
			data.Release()
			*bp = backing // grown, maybe: the array the headers live in
			backings.Put(bp)
			slabs.Put(sp)
		})
	} else {
		ds = make([]engine.Delivery, 0, len(recs))
		backing = make(envelope.Headers, 0, len(recs)*message.DeliveryHeaders)
		ref = engine.NewRef(data.ReleaseRecords)
	}
	// groups are the aggregates among recs: ds[from:to] are the user
	// records of one, skip the ones settled before.
	type group struct {
		span
		skip int
	}
	var groups []group
	var blocks message.Blocks // the answer's header strings
	for i := range recs {
		r := &recs[i]
		skip := 0
		if resume.seq != "" {
			if aws.ToString(r.SequenceNumber) == resume.seq {
				skip = resume.skip
			}
			*resume = Position{}
		}
		// The message is built in its delivery's place, which is zero
		// or recycled (ds has room for one per record until an aggregate
		// grows it): a Delivery is large, and building it elsewhere and
		// copying it in costs a copy with write barriers per record.
		if len(ds) < cap(ds) {
			ds = ds[:len(ds)+1]
		} else {
			ds = append(ds, engine.Delivery{})
		}
		d := &ds[len(ds)-1]
		d.Ref = ref
		backing = s.message(&d.Msg, r, backing, &blocks)
		users, n, agg, poison := message.Unpack(&d.Msg, r.Data, skip)
		if !agg || poison != nil {
			d.Poison = poison
			continue
		}
		// An aggregate: its user records take the place (none when every
		// one settled before the restart), which is zero again first.
		*d = engine.Delivery{}
		ds = ds[:len(ds)-1]
		if len(users) > 0 {
			groups = append(groups, group{span{len(ds), len(ds) + len(users)}, n - len(users)})
			for _, u := range users {
				ds = append(ds, engine.Delivery{Msg: u, Ref: ref})
			}
		}
	}
	if sp != nil {
		*sp = ds // grown by aggregates, maybe: the array the deliveries live in
	}
	refused := func(at int, err error) {
		c.log.LogAttrs(ctx, slog.LevelError, "consumer: cannot track record", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
	}
	// Ordinary records between the aggregates register as runs, under one
	// lock of the watermark each.
	add := func(from, to int) {
		if from < to {
			ref.Hold(to - from)
			if n := len(spans); n > 0 && spans[n-1].to == from {
				spans[n-1].to = to
			} else {
				spans = append(spans, span{from, to})
			}
		}
	}
	stale := func() ([]engine.Delivery, []span, *engine.Ref, bool) {
		drop(ds, spans)
		return nil, nil, ref, false
	}
	run := func(from, to int) bool {
		for from < to {
			n, err := s.es.Deliver(e, ds[from:to])
			add(from, from+n)
			if err == nil {
				return true
			}
			if errors.Is(err, settle.ErrStale) {
				return false
			}
			refused(from+n, err)
			from += n + 1
		}
		return true
	}
	next := 0
	for _, g := range groups {
		if !run(next, g.from) {
			return stale()
		}
		switch err := s.es.DeliverGroup(e, ds[g.from:g.to], g.skip); {
		case err == nil:
			add(g.from, g.to)
		case errors.Is(err, settle.ErrStale):
			return stale()
		default:
			refused(g.from, err)
		}
		next = g.to
	}
	if !run(next, len(ds)) {
		return stale()
	}
	return ds, spans, ref, true
}

// slabs are the released delivery slabs of answers (see register),
// recycled (engine.Recycle); at most one answer of the most records
// GetRecords returns.
var slabs = pool.Slices[engine.Delivery]{Max: 10_000, Reset: engine.Recycle}

// backings are the released header backings of answers (see register);
// at most an answer of 10,000 records with their delivery headers and a
// few of their own.
var backings = pool.Slices[envelope.Header]{Max: 64 << 10}

// pass passes the registered deliveries ds[sp.from:sp.to] of each span
// to the channel, chunkSize at a time, in order. When ctx ends first, the
// ones not passed are dropped (they come again from the checkpoint) and it
// returns false.
func (c *Consumer) pass(ctx context.Context, ds []engine.Delivery, spans []span) bool {
	for k, sp := range spans {
		for i := sp.from; i < sp.to; i += chunkSize {
			select {
			case c.ch <- ds[i:min(i+chunkSize, sp.to)]:
			case <-ctx.Done():
				drop(ds, append([]span{{i, sp.to}}, spans[k+1:]...))
				return false
			}
		}
	}
	return true
}

// drop drops the registered deliveries of spans, which were not passed on:
// they come again from the checkpoint.
func drop(ds []engine.Delivery, spans []span) {
	for _, sp := range spans {
		for i := sp.from; i < sp.to; i++ {
			ds[i].Drop()
		}
	}
}

// message sets m, a zero Message, from a Kinesis record of the shard: the
// RSK1 envelope opened, the delivery headers set, Attempt from the retry
// count. Its headers are appended to backing, which it returns extended,
// their strings written in blocks.
func (s *shard) message(m *message.Message, r *kinesistypes.Record, backing envelope.Headers, blocks *message.Blocks) envelope.Headers {
	seq := aws.ToString(r.SequenceNumber)
	key := aws.ToString(r.PartitionKey)
	var h envelope.Headers
	m.Payload, h, m.Attempt, backing = message.Open(blocks, backing, r.Data, key, seq, s.id)
	m.Headers, m.PartitionKey, m.SequenceNumber, m.ShardID, m.StreamARN = h, key, seq, s.id, s.c.streamRef()
	if r.ApproximateArrivalTimestamp != nil {
		m.ArrivalTime = r.ApproximateArrivalTimestamp.UTC()
	}
	return backing
}

// callTimeout bounds one GetShardIterator or GetRecords call.
const callTimeout = 30 * time.Second

// fetch reads the shard from pos with GetRecords and passes every non-empty
// answer (and the end of a closed shard, or its disappearance) to out, until
// ctx is done or the shard ended.
func (s *shard) fetch(ctx context.Context, pos Position, out chan<- batch) {
	c := s.c
	send := func(b batch) bool {
		select {
		case out <- b:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var iter *string // none yet: the loop gets one from pos
	// last is the sequence number of the last record read; every record
	// read is handed to the reader, so it is also the last one delivered
	// once the reader has caught up.
	last := ""
	backoff := minCallInterval
	refusedWait := time.Duration(0) // the wait after a refused position (refusedPosition)
	var lastCall time.Time
	for {
		if wait := minCallInterval - time.Since(lastCall); wait > 0 && !sleep(ctx, wait) {
			return
		}
		lastCall = time.Now()
		if iter == nil {
			// At the start from pos; after an expired iterator, a new
			// one after the last record read (never a rewind to the
			// checkpoint, never LATEST), until one comes.
			p := pos
			if last != "" {
				p = Position{kind: posSequence, shard: s.id, seq: last}
			}
			next, err := s.iterator(ctx, p)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if missingShard(err) {
					send(batch{gone: true})
					return
				}
				if refusedPosition(err, p) {
					// Not a fault that passes: the sequence number is not
					// of this shard (another shard's or stream's, or beyond
					// the shard). Skipping to elsewhere in the shard could
					// lose records, so the lease is kept, the shard is not
					// read, and the error says so loudly, each time less
					// often, until a Seek moves the reader (or the worker
					// restarts from a repaired checkpoint).
					if !sleep(ctx, c.refused(ctx, s.id, p.seq, err, &refusedWait)) {
						return
					}
					continue
				}
				c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: getting a shard iterator failed; will retry", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
				if !sleep(ctx, time.Second) {
					return
				}
				continue
			}
			iter = next
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		s.flow.polls.Add(1)
		res, err := c.cfg.Kinesis.GetRecords(cctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(int32(c.cfg.Limit)), StreamARN: optional(c.cfg.StreamARN)},
			c.getRecordsOpts...)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var expired *kinesistypes.ExpiredIteratorException
			var throttled *kinesistypes.ProvisionedThroughputExceededException
			switch {
			case errors.As(err, &expired):
				// A new iterator after the last record read, at the top
				// of the loop.
				iter = nil
				continue
			case missingShard(err):
				send(batch{gone: true})
				return
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
		c.obs.Read(observe.Read{Stream: c.cfg.Stream, ShardID: s.id, Records: len(res.Records), MillisBehindLatest: aws.ToInt64(res.MillisBehindLatest)})
		b := batch{records: res.Records, data: getrecords.DataOf(res), end: res.NextShardIterator == nil}
		if n := len(b.records); n > 0 {
			last = aws.ToString(b.records[n-1].SequenceNumber)
		}
		if (len(b.records) > 0 || b.end) && !send(b) {
			return
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

// maxRefusedWait is the longest wait between two GetShardIterator calls
// for a position Kinesis refuses (refusedPosition): the waits double from
// 1 s up to it.
const maxRefusedWait = time.Minute

// refused logs that Kinesis refused the position seq of shard (err,
// refusedPosition) and returns how long to wait before asking again: the
// wait *w after the last refusal doubled, from 1 s up to maxRefusedWait,
// which it keeps in *w.
func (c *Consumer) refused(ctx context.Context, shard, seq string, err error, w *time.Duration) time.Duration {
	*w = min(max(2**w, time.Second), maxRefusedWait)
	c.log.LogAttrs(ctx, slog.LevelError, "consumer: Kinesis refuses the shard's position (a sequence number not of this shard); the lease is kept and the shard is not read until a Seek moves it or its checkpoint is repaired",
		slog.String(attrShardID, shard), slog.String(engine.AttrSequenceNumber, seq), slog.String(attrError, err.Error()), slog.Duration("retry_in", *w))
	return *w
}

// refusedPosition reports whether err, the answer to GetShardIterator at
// pos, says the position can never be read: Kinesis answers
// InvalidArgumentException for a sequence number that did not come from
// the shard (another shard's or stream's, or beyond the shard's range).
func refusedPosition(err error, pos Position) bool {
	var invalid *kinesistypes.InvalidArgumentException
	return pos.seq != "" && errors.As(err, &invalid)
}

// missingShard reports whether err says the shard does not exist (any
// more): Kinesis answers ResourceNotFoundException for a shard that was
// trimmed away.
func missingShard(err error) bool {
	var missing *kinesistypes.ResourceNotFoundException
	return errors.As(err, &missing)
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
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
