package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
)

// batchLane hands batches to the BatchHandler, one at a time, until the
// session ends.
func (s *Session) batchLane() {
	for {
		batch, keys := s.takeBatch()
		if batch == nil {
			return
		}
		s.runBatch(batch)
		s.mu.Lock()
		for _, ks := range keys {
			s.sched.release(ks)
		}
		s.mu.Unlock()
	}
}

// takeBatch waits for a ready key and collects up to BatchSize records:
// every waiting record of each ready key, keys in the order they became
// ready, closed BatchWindow after the first record. It holds the keys it
// took, so records of those keys that arrive while the batch is open join
// it too (after the others of their key, in order). It returns nil when the
// lane should end.
func (s *Session) takeBatch() ([]*Delivery, []*keyQueue) {
	size := max(s.cfg.BatchSize, 1)
	var batch []*Delivery
	var keys []*keyQueue
	var window *time.Timer
	defer func() {
		if window != nil {
			window.Stop()
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.ctx.Err() != nil {
			for _, ks := range keys {
				s.sched.release(ks)
			}
			return nil, nil
		}
		batch = s.topUpLocked(batch, keys, size)
		for len(batch) < size {
			ks := s.sched.takeReady(s.ctx)
			if ks == nil {
				break
			}
			keys = append(keys, ks)
			batch = s.topUpLocked(batch, keys[len(keys)-1:], size)
		}
		if len(batch) >= size {
			return batch, keys
		}
		if len(batch) == 0 && s.sched.closed && s.sched.empty() {
			s.sched.broadcast()
			return nil, nil
		}
		if len(batch) > 0 && window == nil {
			window = time.NewTimer(s.cfg.BatchWindow)
		}
		var expired <-chan time.Time
		if window != nil {
			expired = window.C
		}
		ch := s.sched.wait()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-expired:
			s.mu.Lock()
			s.sched.leave(ch)
			return s.topUpLocked(batch, keys, size), keys
		}
		s.mu.Lock()
	}
}

// topUpLocked adds to batch, up to size, the waiting records of keys, which
// the batch holds; s.mu must be held.
func (s *Session) topUpLocked(batch []*Delivery, keys []*keyQueue, size int) []*Delivery {
	for _, ks := range keys {
		for ks.head != nil && len(batch) < size {
			batch = append(batch, s.sched.pop(ks))
		}
	}
	return batch
}

// runBatch hands batch to the BatchHandler and concludes every element on
// its own. Records to deliver again go back to their keys in order, after
// the batch.
func (s *Session) runBatch(batch []*Delivery) {
	live := batch[:0:0]
	for _, d := range batch {
		switch {
		case d.Stale(), d.shard.after(d):
			s.done(d)
		case !d.shard.Live():
			s.giveUp(d) // see handle
		case d.Poison != nil:
			s.startSpan(d)
			s.conclude(d, message.Drop(d.Poison), nil, nil, nil)
		default:
			if age, old := s.tooOld(d); old {
				s.startSpan(d)
				s.expire(d, age, nil)
				continue
			}
			live = append(live, d)
		}
	}
	// Each record of the batch gets its span, over the batch's call (the
	// BatchHandler itself gets the session's context).
	for _, d := range live {
		s.startSpan(d)
	}
	if len(live) == 0 {
		return
	}
	ms := make([]*message.Message, len(live))
	for i, d := range live {
		ms[i] = d.msg()
		d.openReplies()
	}
	var start time.Time
	if s.e.cfg.Hooks.WantsRecords() {
		start = time.Now()
	}
	ctx, stop := s.batchContext(live)
	outs := s.callBatch(ctx, live, ms)
	stop()
	if !start.IsZero() {
		took := time.Since(start)
		for _, d := range live {
			d.observed().handled = took
		}
	}
	var parks []parked
	for i, d := range live {
		out := message.Retry(ErrBatchShort)
		if i < len(outs) {
			out = outs[i]
		}
		s.conclude(d, out, d.closeReplies(), &parks, nil)
	}
	for i := len(parks) - 1; i >= 0; i-- {
		s.park(parks[i].d, parks[i].wait, parks[i].counted)
	}
}

// batchContext is the context of a BatchHandler call over live: the
// session's, cancelled as well when the fence of any shard with a record in
// the batch is (long-running mode: that shard's lease is given up). stop
// releases it.
func (s *Session) batchContext(live []*Delivery) (ctx context.Context, stop func()) {
	var shards []*Shard
	for _, d := range live {
		if d.shard.fctx != nil && !slices.Contains(shards, d.shard) {
			shards = append(shards, d.shard)
		}
	}
	if len(shards) == 0 {
		return s.ctx, func() {}
	}
	ctx, cancel := context.WithCancel(s.ctx)
	stops := make([]func() bool, len(shards))
	for i, sh := range shards {
		stops[i] = context.AfterFunc(sh.fctx, cancel)
	}
	return ctx, func() {
		for _, f := range stops {
			f()
		}
		cancel()
	}
}

// callBatch runs the BatchHandler with ctx, turning a panic into a Retry of
// every element (logged once, with the stack).
func (s *Session) callBatch(ctx context.Context, live []*Delivery, ms []*message.Message) (outs []message.Outcome) {
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("%w: %v", ErrPanic, p)
			s.e.log.LogAttrs(s.ctx, slog.LevelError, "lambdaadapter: batch handler panicked; its records are treated as Retry",
				slog.String(AttrMode, string(s.cfg.Mode)), slog.Int("records", len(ms)),
				slog.String(AttrShardID, live[0].Msg.ShardID), slog.String(AttrSequenceNumber, live[0].Msg.SequenceNumber),
				slog.Any(AttrPanic, p), slog.String(AttrStack, string(debug.Stack())))
			outs = make([]message.Outcome, len(ms))
			for i := range outs {
				outs[i] = message.Retry(err)
			}
		}
	}()
	return s.e.cfg.BatchHandler.HandleBatch(ctx, ms)
}
