package lambda

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/batchresponse"
	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/event"
	"github.com/shardsettle/lambdaadapter/internal/message"
)

// Invoke handles one raw Lambda invocation: it decodes the Kinesis event
// without reflection, runs the batch and returns the JSON partial batch
// response. It implements aws-lambda-go's lambda.Handler. An SQS event (from
// the delay queue) is handed to InvokeSQS.
//
// Invoke returns an error (so Lambda retries the whole batch) only when the
// invocation cannot be trusted: malformed JSON, a record without a sequence
// number, data that is not base64, or sequence numbers that do not grow
// within a shard. Handler failures never make Invoke fail: they are reported
// per record in the response.
func (r *Runner) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	buf, _ := r.buffers.Get().(*event.Buffers)
	if buf == nil {
		buf = new(event.Buffers)
	}
	ev, err := event.DecodeKinesisChunked(payload, buf)
	if err != nil {
		r.buffers.Put(buf)
		if errors.Is(err, event.ErrNotKinesis) && isSQSEvent(payload) {
			return r.InvokeSQS(ctx, payload)
		}
		return nil, err
	}
	var b batch
	if ev.MaybeAggregates {
		b = deliveries(ev.Records)
	} else {
		b = batch{recs: ev.Records} // the decoder saw no KPL magic
	}
	b.buffers = buf
	ids, err := r.run(ctx, b)
	if err != nil {
		return nil, err
	}
	return batchresponse.AppendJSON(make([]byte, 0, 128), ids), nil
}

// HandleEvent handles one already-decoded Kinesis event and returns the
// partial batch response, for callers that use aws-lambda-go's reflection
// based lambda.Start or build events in tests. It behaves exactly like
// Invoke.
func (r *Runner) HandleEvent(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	recs := make([]event.KinesisRecord, len(ev.Records))
	for i := range ev.Records {
		e := &ev.Records[i]
		recs[i] = event.KinesisRecord{
			Data:           e.Kinesis.Data,
			PartitionKey:   e.Kinesis.PartitionKey,
			SequenceNumber: e.Kinesis.SequenceNumber,
			ArrivalTime:    roundMillis(e.Kinesis.ApproximateArrivalTimestamp.Time),
			EventID:        e.EventID,
			ShardID:        event.ShardIDOf(e.EventID),
			EventSourceARN: e.EventSourceArn,
			AWSRegion:      e.AwsRegion,
			EventSource:    e.EventSource,
		}
	}
	ids, err := r.run(ctx, deliveries(recs))
	if err != nil {
		return events.KinesisEventResponse{}, err
	}
	resp := events.KinesisEventResponse{BatchItemFailures: make([]events.KinesisBatchItemFailure, len(ids))}
	for i, id := range ids {
		resp.BatchItemFailures[i].ItemIdentifier = id
	}
	return resp, nil
}

func roundMillis(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Round(time.Millisecond).UTC()
}

// deliveries turns decoded Kinesis records into a batch: the records
// themselves when they are all ordinary (the runner makes their deliveries
// as it submits them), else one delivery per user record (see aggregated).
func deliveries(recs []event.KinesisRecord) batch {
	for i := range recs {
		if message.MaybeAggregate(recs[i].Data) {
			return aggregated(recs)
		}
	}
	return batch{recs: recs}
}

// batch is an invocation's deliveries in record order: either ds, whose
// messages are set, or recs, ordinary records whose deliveries are not made
// yet (see Runner.run). groups, when not nil, holds for each Kinesis record
// of ds the number of its deliveries: the user records of a KPL aggregate
// settle as parts of their record. nil means one delivery per record.
type batch struct {
	ds     []engine.Delivery
	groups []int
	recs   []event.KinesisRecord
	shared shared // buildInto's

	// buffers, when not nil, holds the memory of the decoded records and
	// their data (payloads alias it). Once every handler returned, the
	// Runner reuses the records; the data too with RecycleMessages, else it
	// is left to the messages (Buffers.GiveUpData).
	buffers *event.Buffers
}

// len is the number of deliveries.
func (b *batch) len() int {
	if b.recs != nil {
		return len(b.recs)
	}
	return len(b.ds)
}

// open makes the deliveries of recs[lo:hi], with what registering them
// needs (sequence number and shard); buildInto sets the rest.
func (b *batch) open(lo, hi int) []engine.Delivery {
	ds := make([]engine.Delivery, hi-lo)
	for i := range ds {
		rec := &b.recs[lo+i]
		ds[i].Msg.SequenceNumber, ds[i].Msg.ShardID = rec.SequenceNumber, rec.ShardID
	}
	return ds
}

// buildInto builds the messages of ds, the deliveries of recs[lo:], their
// headers appended to backing (from its length on; nil makes one). It
// returns backing.
func (b *batch) buildInto(ds []engine.Delivery, lo int, backing envelope.Headers) envelope.Headers {
	if backing == nil {
		backing = make(envelope.Headers, 0, len(ds)*(message.DeliveryHeaders+1))
	}
	for i := range ds {
		backing = plainInto(&ds[i].Msg, &b.recs[lo+i], backing, &b.shared)
	}
	return backing
}

// buildApart is buildInto with the messages in msgs (msgs[i] handed out by
// ds[i]) instead of in the deliveries.
func (b *batch) buildApart(ds []engine.Delivery, msgs []message.Message, lo int, backing envelope.Headers) envelope.Headers {
	for i := range ds {
		backing = plainInto(&msgs[i], &b.recs[lo+i], backing, &b.shared)
		ds[i].SetMessage(&msgs[i])
	}
	return backing
}

// chunk is the storage of up to buildChunk deliveries, their messages and
// their headers. The deliveries are the engine's bookkeeping, which nobody
// sees once the invocation answered: the Runner reuses them from one
// invocation to the next. By default the messages and headers are the
// handlers' to keep: each invocation has its own (msgs and headers, sized
// to its records), which the deliveries hand out (engine.Delivery.SetMessage).
// With engine.Config.RecycleMessages the messages are the deliveries' own
// and the headers are reused too: a chunk is then only reused once every
// handler given one of its messages has returned.
type chunk struct {
	ds      []engine.Delivery
	msgs    []message.Message // the messages handed out, when not recycled
	headers envelope.Headers
}

// getChunk returns a chunk of n ≤ buildChunk deliveries that are zero or
// reused, with fresh messages and headers unless they are recycled.
func (r *Runner) getChunk(n int) *chunk {
	c, _ := r.chunks.Get().(*chunk)
	if c == nil {
		c = &chunk{ds: make([]engine.Delivery, buildChunk)}
		if r.recycle {
			c.headers = make(envelope.Headers, 0, buildChunk*(message.DeliveryHeaders+1))
		}
	}
	c.ds = c.ds[:n]
	if !r.recycle {
		c.msgs = make([]message.Message, n)
		c.headers = make(envelope.Headers, 0, n*(message.DeliveryHeaders+1))
	}
	return c
}

// putChunks readies the deliveries of each chunk for the next invocation
// and keeps the chunks. Recycled, the deliveries are zeroed with their
// messages (engine.Recycle, as long-running mode does) and the headers the
// messages held cleared; otherwise the deliveries are readied without
// touching the messages they handed out (engine.Reuse), which the chunk
// lets go of.
func (r *Runner) putChunks(cs []*chunk) {
	for _, c := range cs {
		if r.recycle {
			engine.Recycle(c.ds)
			clear(c.headers)
			c.headers = c.headers[:0]
		} else {
			engine.Reuse(c.ds)
			c.msgs, c.headers = nil, nil
		}
		r.chunks.Put(c)
	}
}

// shared is what the messages of an invocation share: the stream ARN of
// the last event source ARN seen (the records of an invocation have one;
// the zero value holds the empty source, whose stream ARN is empty too) and
// the blocks their header strings are written in (message.Blocks: a few
// allocations for all the records' headers instead of one a record).
type shared struct {
	src, stream string
	blocks      message.Blocks
}

// streamOf returns message.StreamARNFromSource(src).
func (c *shared) streamOf(src string) string {
	if src != c.src {
		c.src, c.stream = src, message.StreamARNFromSource(src)
	}
	return c.stream
}

// plain returns the message of an ordinary record, its headers appended to
// backing; sh gives its stream ARN and holds its header strings.
func plain(rec *event.KinesisRecord, backing envelope.Headers, sh *shared) (message.Message, envelope.Headers) {
	var m message.Message
	backing = plainInto(&m, rec, backing, sh)
	return m, backing
}

// plainInto is plain into *m, every field of which it sets: the message is
// written where it stays (a delivery of a chunk), field by field, instead of
// built aside and copied there whole, which costs a second pass over its 208
// bytes and, while the collector marks, a barrier over all its pointers.
func plainInto(m *message.Message, rec *event.KinesisRecord, backing envelope.Headers, sh *shared) envelope.Headers {
	var attempt int
	m.Payload, m.Headers, attempt, backing = message.Open(&sh.blocks, backing, rec.Data, rec.PartitionKey, rec.SequenceNumber, rec.ShardID)
	m.PartitionKey = rec.PartitionKey
	m.ExplicitHashKey = ""
	m.SequenceNumber = rec.SequenceNumber
	m.Aggregated = false
	m.SubSequenceNumber = 0
	m.ShardID = rec.ShardID
	m.StreamARN = sh.streamOf(rec.EventSourceARN)
	m.EventSourceARN = rec.EventSourceARN
	m.ArrivalTime = rec.ArrivalTime
	m.Attempt = attempt
	message.Bind(m, nil)
	return backing
}

// aggregated is deliveries for an invocation with at least one record that
// starts with the KPL magic: each aggregate becomes one delivery per user
// record; a malformed one (its MD5 matches) one poison delivery with its
// raw data.
func aggregated(recs []event.KinesisRecord) batch {
	var b batch
	b.groups = make([]int, len(recs))
	b.ds = make([]engine.Delivery, 0, len(recs))
	var backing envelope.Headers
	var sh shared
	for i := range recs {
		rec := &recs[i]
		var m message.Message
		m, backing = plain(rec, backing, &sh)
		users, _, agg, poison := message.Unpack(&m, rec.Data, 0)
		switch {
		case !agg || poison != nil:
			b.ds = append(b.ds, engine.Delivery{Msg: m, Poison: poison})
			b.groups[i] = 1
		default:
			for _, u := range users {
				b.ds = append(b.ds, engine.Delivery{Msg: u})
			}
			b.groups[i] = len(users)
		}
	}
	return b
}
