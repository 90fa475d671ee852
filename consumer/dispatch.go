package consumer

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/shardsettle/lambdaadapter/message"
	"github.com/shardsettle/lambdaadapter/publish"
	"github.com/shardsettle/lambdaadapter/retry"
)

var laneSeed = maphash.MakeSeed()

// dispatch takes deliveries off the channel until it is closed and hands
// them to lanes (one handler) or batches (BatchHandler). It returns after
// every lane exited.
func (c *Consumer) dispatch(ctx context.Context) {
	if c.cfg.BatchHandler != nil {
		c.dispatchBatches(ctx)
		return
	}
	n := c.cfg.Concurrency
	lanes := make([]chan *delivery, n)
	var wg sync.WaitGroup
	for i := range lanes {
		lanes[i] = make(chan *delivery, 4)
		q := lanes[i]
		wg.Go(func() {
			rep := newReplier(c)
			for d := range q {
				c.handle(ctx, d, rep)
			}
		})
	}
	for d := range c.ch {
		if d.stale() {
			d.done() // read before a seek: dropped on its way out
			continue
		}
		// Same key, same lane: order per partition key.
		lanes[maphash.String(laneSeed, d.m.PartitionKey)%uint64(n)] <- d
	}
	for _, q := range lanes {
		close(q)
	}
	wg.Wait()
}

// dispatchBatches forms batches of up to BatchSize records, closed
// BatchWindow after their first record, and runs them one at a time.
func (c *Consumer) dispatchBatches(ctx context.Context) {
	batch := make([]*delivery, 0, c.cfg.BatchSize)
	rep := newReplier(c)
	for {
		d, ok := <-c.ch
		if !ok {
			return
		}
		batch = append(batch[:0], d)
		t := time.NewTimer(c.cfg.BatchWindow)
	fill:
		for len(batch) < c.cfg.BatchSize {
			select {
			case d, ok := <-c.ch:
				if !ok {
					break fill
				}
				batch = append(batch, d)
			case <-t.C:
				break fill
			}
		}
		t.Stop()
		c.handleBatch(ctx, batch, rep)
	}
}

func (c *Consumer) handleBatch(ctx context.Context, batch []*delivery, rep *replier) {
	live := batch[:0:0]
	for _, d := range batch {
		if d.stale() {
			d.done()
			continue
		}
		live = append(live, d)
	}
	if len(live) == 0 {
		return
	}
	ms := make([]*message.Message, len(live))
	for i, d := range live {
		ms[i] = &d.m
		rep.begin(ms[i])
	}
	outs := c.callBatch(ctx, ms)
	for i, d := range live {
		out := message.Retry(errors.New("consumer: batch handler returned no outcome for this record"))
		if i < len(outs) {
			out = outs[i]
		}
		if err := rep.end(ms[i]); err != nil {
			c.logRecord(ctx, slog.LevelError, "consumer: reply failed; record left unsettled, holding the checkpoint", ms[i], out, err)
		} else {
			c.act(ctx, d, out)
		}
		d.done()
	}
}

func (c *Consumer) callBatch(ctx context.Context, ms []*message.Message) (outs []message.Outcome) {
	defer func() {
		if p := recover(); p != nil {
			c.log.LogAttrs(ctx, slog.LevelError, "consumer: batch handler panicked; its records are retried",
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			outs = nil
		}
	}()
	return c.cfg.BatchHandler.HandleBatch(ctx, ms)
}

// handle runs the handler for one delivery and acts on its outcome; a
// delivery whose reply failed is left unsettled.
func (c *Consumer) handle(ctx context.Context, d *delivery, rep *replier) {
	defer d.done()
	if d.stale() {
		return
	}
	rep.begin(&d.m)
	out := c.call(ctx, &d.m)
	if err := rep.end(&d.m); err != nil {
		c.logRecord(ctx, slog.LevelError, "consumer: reply failed; record left unsettled, holding the checkpoint", &d.m, out, err)
		return
	}
	c.act(ctx, d, out)
}

func (c *Consumer) call(ctx context.Context, m *message.Message) (out message.Outcome) {
	defer func() {
		if p := recover(); p != nil {
			c.log.LogAttrs(ctx, slog.LevelError, "consumer: handler panicked; record retried",
				slog.String(attrShardID, m.ShardID), slog.String(attrSequenceNumber, m.SequenceNumber),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			out = message.Retry(fmt.Errorf("consumer: handler panicked: %v", p))
		}
	}()
	return c.cfg.Handler.HandleRecord(ctx, m)
}

// act carries out the retry policy's decision for out. The record settles
// only once whatever must be written for it (copy, delay message, dead
// letter) was written; otherwise it stays unsettled and holds the
// checkpoint, so it is read again when the shard's lease is next taken.
func (c *Consumer) act(ctx context.Context, d *delivery, out message.Outcome) {
	m := &d.m
	if out.Kind() == message.KindInvalid {
		out = message.Retry(errors.New("consumer: handler returned the zero Outcome"))
	}
	dec := c.cfg.Policy.Decide(out, m.Attempt, -1)
	switch dec.Action {
	case retry.Settle:
		if out.Kind() == message.KindDrop {
			c.logRecord(ctx, slog.LevelWarn, "consumer: record dropped", m, out, nil)
		}
		d.s.settle(d)
	case retry.Retire:
		c.logRecord(ctx, slog.LevelWarn, "consumer: record retired without a dead-letter target: "+dec.Note, m, out, nil)
		d.s.settle(d)
	case retry.Leave:
		c.logRecord(ctx, slog.LevelWarn, "consumer: record left unsettled; it holds the checkpoint", m, out, nil)
	default:
		if dec.Wait > 0 && dec.Action == retry.Copy {
			// Waited out here: the lane moves on, the record holds the
			// checkpoint until its copy is written.
			c.inflight.Add(1)
			time.AfterFunc(dec.Wait, func() {
				defer c.inflight.Add(-1)
				c.write(context.WithoutCancel(ctx), d, dec, out)
			})
			return
		}
		c.write(ctx, d, dec, out)
	}
}

// write writes the copy, delay message or dead letter of d, then settles it.
// Kinesis writes go through the batching writer while the consumer runs;
// SQS messages and writes after shutdown are written here, one at a time.
func (c *Consumer) write(ctx context.Context, d *delivery, dec retry.Decision, out message.Outcome) {
	m := &d.m
	if d.stale() {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	switch {
	case dec.Action == retry.Copy:
		if c.cfg.Publisher == nil {
			err = errors.New("consumer: no Kinesis publisher for retry copies")
			break
		}
		rec := publish.RetryCopy(m)
		if c.writer != nil && c.writer.submit(&kinesisWrite{d: d, rec: rec, dec: dec, out: out}) {
			return // batched; settled once written
		}
		_, err = c.cfg.Publisher.Put(wctx, rec)
	case dec.Action == retry.DelayQueue:
		cp := publish.RetryCopy(m)
		body, berr := publish.Delayed{StreamARN: m.StreamARN, PartitionKey: cp.PartitionKey, Headers: cp.Headers, Payload: cp.Payload, NotBefore: time.Now().Add(dec.Wait)}.Body()
		if err = berr; err == nil {
			_, err = c.cfg.Queue.Send(wctx, c.cfg.DelayQueue, publish.QueueMessage{Body: string(body), Delay: min(dec.Wait, retry.MaxQueueDelay)})
		}
	case dec.Action == retry.DeadLetter:
		reason := dec.Note
		if e := out.Err(); e != nil {
			reason += ": " + e.Error()
		}
		dl := publish.DeadLetterOf(m, reason, time.Now())
		if c.cfg.DeadLetterStream != "" {
			rec := publish.DeadLetterRecord(c.cfg.DeadLetterStream, dl)
			if c.writer != nil && c.writer.submit(&kinesisWrite{d: d, rec: rec, dec: dec, out: out}) {
				return // batched; settled once written
			}
			_, err = c.cfg.Publisher.Put(wctx, rec)
		} else {
			body, berr := publish.DeadLetterBody(dl)
			if err = berr; err == nil {
				_, err = c.cfg.Queue.Send(wctx, c.cfg.DeadLetterQueue, publish.QueueMessage{Body: string(body)})
			}
		}
	}
	if err != nil {
		c.logRecord(ctx, slog.LevelError, "consumer: writing the "+dec.Action.String()+" failed; record left unsettled, holding the checkpoint", m, out, err)
		return
	}
	d.s.settle(d)
}

func (c *Consumer) logRecord(ctx context.Context, level slog.Level, msg string, m *message.Message, out message.Outcome, err error) {
	if !c.log.Enabled(ctx, level) {
		return
	}
	if err == nil {
		err = out.Err()
	}
	attrs := []slog.Attr{slog.String(attrShardID, m.ShardID), slog.String(attrSequenceNumber, m.SequenceNumber),
		slog.String(attrPartitionKey, m.PartitionKey), slog.Int(attrAttempt, m.Attempt), slog.String(attrOutcome, out.String())}
	if err != nil {
		attrs = append(attrs, slog.String(attrError, err.Error()))
	}
	c.log.LogAttrs(ctx, level, msg, attrs...)
}
