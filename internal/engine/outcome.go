package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/internal/retry"
	"github.com/shardsettle/lambdaadapter/internal/settle"
	"github.com/shardsettle/lambdaadapter/observe"
)

// call runs the handler for d with d open for replies, turning a panic into
// a Retry for this record only. It returns the outcome and the first reply
// that failed.
func (s *Session) call(d *Delivery) (out message.Outcome, replyErr error) {
	d.openReplies()
	defer func() {
		if p := recover(); p != nil {
			out = s.recovered(d, p)
		}
		replyErr = d.closeReplies()
	}()
	ctx := d.shard.handlerContext(s.ctx)
	if d.obs != nil && d.obs.hctx != nil {
		ctx = d.obs.hctx
	}
	return s.e.cfg.Handler.HandleRecord(ctx, d.msg()), nil
}

// recovered logs a handler panic with its stack and returns the Retry it
// stands for.
func (s *Session) recovered(d *Delivery, p any) message.Outcome {
	out := message.Retry(fmt.Errorf("%w: %v", ErrPanic, p))
	s.e.logRecord(s.ctx, slog.LevelError, s.cfg.Mode, "lambdaadapter: handler panicked; treated as Retry", d.msg(), out, nil,
		slog.Any(AttrPanic, p), slog.String(AttrStack, string(debug.Stack())))
	return out
}

// conclude carries out the outcome of d's handler: once the handler
// returned, the record settles, is written somewhere first, or stays
// unsettled. parks, when not nil, collects the records to deliver again
// instead of parking them at once (a batch parks them in order at its end).
// lb, when not nil, collects d's settlement (see laneSettles).
func (s *Session) conclude(d *Delivery, out message.Outcome, replyErr error, parks *[]parked, lb *laneSettles) {
	m := d.msg()
	e := s.e
	ctx := s.ctx
	if ctx.Err() != nil || !d.shard.Live() {
		// Cut off (the Lambda deadline, a long-running stop past its
		// timeout, the shard's lease given up or not renewed in time): the
		// answer is being built or the lease released, and what the
		// handler returned changes nothing; nothing is written for it.
		s.cutRecords.Store(true)
		s.observe(d, out, observe.ActionUnsettled)
		s.giveUp(d)
		return
	}
	if replyErr != nil {
		e.logRecord(ctx, slog.LevelError, s.cfg.Mode, "lambdaadapter: reply failed; record left unsettled", m, out, replyErr)
		s.observe(d, out, observe.ActionUnsettled)
		s.unsettled(d, out, replyErr, parks)
		return
	}
	if out.Kind() == message.KindInvalid {
		out = message.Retry(ErrZeroOutcome)
		e.logRecord(ctx, slog.LevelError, s.cfg.Mode, "lambdaadapter: handler returned the zero Outcome (a handler bug); treated as Retry", m, out, nil)
	}
	remaining := time.Duration(-1)
	if !s.cfg.Cutoff.IsZero() {
		remaining = max(time.Until(s.cfg.Cutoff), 0)
	}
	dec := e.cfg.Policy.Decide(out, m.Attempt, remaining)
	if dec.Note != "" && dec.Action != retry.DeadLetter && dec.Action != retry.Retire {
		e.logRecord(ctx, slog.LevelWarn, s.cfg.Mode, "lambdaadapter: "+dec.Note, m, out, nil)
	}
	switch dec.Action {
	case retry.Settle:
		if out.Kind() == message.KindDrop {
			e.logRecord(ctx, slog.LevelWarn, s.cfg.Mode, "lambdaadapter: record dropped", m, out, nil)
		}
		s.observe(d, out, observe.ActionSettled)
		s.settleIn(d, lb)
	case retry.Retire:
		e.logRecord(ctx, slog.LevelWarn, s.cfg.Mode, "lambdaadapter: record retired without a dead-letter target: "+dec.Note, m, out, nil)
		s.observe(d, out, observe.ActionRetired)
		s.settleIn(d, lb)
	case retry.Leave:
		s.observe(d, out, observe.ActionUnsettled)
		s.leave(d, out, nil, parks, !dec.Uncounted)
	default:
		w, err := e.newWrite(d, dec, out, time.Now())
		if tooLarge(err) && dec.Action != retry.DeadLetter {
			// Its copy or delay message can never be written (the added
			// headers push it over the limit), so it can never reach the
			// cap: it ends now, as at the cap.
			note := "its " + dec.Action.String() + " is too large to write"
			if !e.cfg.Policy.DeadLetter {
				e.logRecord(ctx, slog.LevelError, s.cfg.Mode, "lambdaadapter: record retired: "+note+
					" and there is no dead-letter target (see docs/faults.md: oversize records)", m, out, err)
				s.observe(d, out, observe.ActionRetired)
				s.settleIn(d, lb)
				return
			}
			dec = retry.Decision{Action: retry.DeadLetter, Note: note}
			w, err = e.newWrite(d, dec, out, time.Now())
		}
		if tooLarge(err) && dec.Action == retry.DeadLetter && e.cfg.DeadLetterStream != "" {
			// The dead letter's headers push it over the limit: the record
			// goes to the dead-letter stream as it arrived.
			dec.Note += "; dead-lettered as it arrived, without the dead-letter headers (too large with them)"
			w, err = e.originalDeadLetter(d, dec, out)
		}
		if err != nil {
			e.logRecord(ctx, slog.LevelError, s.cfg.Mode, "lambdaadapter: cannot write the "+dec.Action.String()+"; record left unsettled", m, out, err)
			s.observe(d, out, observe.ActionUnsettled)
			s.unsettled(d, out, err, parks)
			return
		}
		s.observe(d, out, actionOf(dec.Action))
		if !s.submitWrite(w) {
			s.giveUp(d) // the session ended under it
		}
	}
}

// parked is a record a batch delivers again after its end.
type parked struct {
	d       *Delivery
	wait    time.Duration
	counted bool
}

// unsettled handles a record that stays unsettled: Lambda mode (and a shard
// being handed over or a session stopping) gives it up — it comes again from
// the next delivery of its shard; long-running mode delivers it again after
// a backoff.
func (s *Session) unsettled(d *Delivery, out message.Outcome, err error, parks *[]parked) {
	s.leave(d, out, err, parks, true)
}

// leave is unsettled; counted false delivers d again in process without
// counting an attempt (its handler attempted nothing: a run in progress
// elsewhere holds the record, retry.Decision.Uncounted), the backoff
// growing all the same. The mode decides (giveUpUnsettled, redeliver).
func (s *Session) leave(d *Delivery, out message.Outcome, err error, parks *[]parked, counted bool) {
	s.pol.leave(s, d, out, err, parks, counted)
}

// retryBase is the attempt before the one d arrived with, so the backoff
// grows with the in-process redeliveries only.
func retryBase(d *Delivery) int { return d.firstAttempt - 1 }

func (s *Session) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// giveUp leaves d unsettled for good: later records of its shard are not
// started (nor written, in Lambda mode), and it comes again from the next
// delivery of its shard.
func (s *Session) giveUp(d *Delivery) {
	d.shard.block(d)
	s.pol.gaveUp(s, d)
	s.done(d)
}

// settle settles d on its shard.
func (s *Session) settle(d *Delivery) {
	d.shard.settle(d.ticket)
	s.w.moved(d.shard)
	s.done(d)
}

// settleBatch is the most settlements a Lambda-mode lane holds before it
// hands them to the watermark.
const settleBatch = 64

// laneSettles is what a Lambda-mode lane settled and has not yet handed to
// the watermark: tickets of one shard, settled under one lock of its
// watermark (SettleEach) instead of one lock each, which the lanes would
// contend for. The lane hands them over when it holds settleBatch, before
// it waits for a key and when it ends; the session flushes every lane's
// (flushAllSettles) before it looks at the watermarks: when a write is
// submitted (its turn depends on the settlements before it) and in Wait.
// While any write waits for its turn, a settlement is handed over at once.
type laneSettles struct {
	mu  sync.Mutex
	sh  *Shard // written under mu by the owning lane only
	ts  []settle.Ticket
	buf [16]settle.Ticket // ts's first array: a lane of a small invocation allocates no other
}

// settleIn settles d, which the lane of lb handled: into lb when d's shard
// has no hooks to keep in step and d no storage to release (Lambda mode),
// else at once. lb may be nil.
func (s *Session) settleIn(d *Delivery, lb *laneSettles) {
	if lb == nil || d.shard.hooks.Moved != nil || d.shard.hooks.Settled != nil || d.Ref != nil {
		s.settle(d)
		return
	}
	if lb.sh != d.shard {
		s.flushSettles(lb)
		lb.mu.Lock()
		lb.sh = d.shard
		lb.mu.Unlock()
	}
	lb.mu.Lock()
	if lb.ts == nil {
		lb.ts = lb.buf[:0]
	}
	lb.ts = append(lb.ts, d.ticket)
	full := len(lb.ts) >= settleBatch
	lb.mu.Unlock()
	// A write that waits for its turn (npending grows before submitWrite
	// flushes the lanes) must not wait for this lane's next hand-over.
	if full || s.w.npending.Load() > 0 {
		s.flushSettles(lb)
	}
}

// flushSettles hands lb's settlements to their watermark, then finishes
// their records. lb may be nil.
func (s *Session) flushSettles(lb *laneSettles) {
	if lb == nil {
		return
	}
	lb.mu.Lock()
	sh, n := lb.sh, len(lb.ts)
	if n > 0 {
		sh.wm.SettleEach(lb.ts)
		clear(lb.ts)
		lb.ts = lb.ts[:0]
	}
	lb.mu.Unlock()
	if n > 0 {
		s.w.moved(sh)
		sh.track(-n)
	}
}

// flushAllSettles hands every lane's settlements to their watermarks.
func (s *Session) flushAllSettles() {
	s.flushSettles(&s.inl.lb)
	if p := s.settles.Load(); p != nil {
		for i := range *p {
			s.flushSettles(&(*p)[i])
		}
	}
}

// submitWrite submits wr to the writer, then flushes the lanes'
// settlements, so that the turn of wr's record (ordered writes: once every
// earlier record of its shard settled) does not wait for a lane's next
// hand-over. It reports false, submitting nothing, once the writer is
// closed.
func (s *Session) submitWrite(wr *write) bool {
	if !s.w.submit(wr) {
		return false
	}
	s.flushAllSettles()
	return true
}

// openReplies opens d for Message.Reply.
//
// A record whose handler makes no reply (the common case) takes no lock:
// replying and replied are atomic, and only a call that saw a Reply
// (replied) takes rmu, to reset or read replyErr. A Reply marks replied
// before it takes rmu and then looks at replying, and closeReplies clears
// replying before it looks at replied: so either the Reply sees that its
// handler returned (ErrReplyAfterReturn), or closeReplies waits for it under
// rmu and returns its error.
func (d *Delivery) openReplies() {
	if d.replied.Load() {
		d.rmu.Lock()
		d.replyErr = nil
		d.replied.Store(false)
		d.rmu.Unlock()
	}
	d.replying.Store(true)
	message.Bind(d.msg(), d)
}

// closeReplies closes d for replies and returns the first one that failed.
func (d *Delivery) closeReplies() error {
	d.replying.Store(false)
	if !d.replied.Load() {
		return nil
	}
	d.rmu.Lock()
	defer d.rmu.Unlock()
	return d.replyErr
}

// Reply implements message.Replier: it writes r with one PutRecord while
// d's handler runs. Replies to one record are written one at a time.
func (d *Delivery) Reply(ctx context.Context, m *message.Message, r message.Reply) error {
	d.replied.Store(true)
	d.rmu.Lock()
	defer d.rmu.Unlock()
	if !d.replying.Load() || m != d.msg() {
		return message.ErrReplyAfterReturn
	}
	if t := d.sess.e.cfg.Hooks.Tracer(); t != nil {
		r.Headers = slices.Clone(r.Headers)
		t.Inject(ctx, &r.Headers)
	}
	err := d.sess.e.putReply(ctx, m, r)
	d.sess.e.cfg.Hooks.Write(observe.Write{Mode: d.sess.cfg.Mode, Kind: observe.WriteReply, Stream: m.StreamARN,
		ShardID: m.ShardID, SequenceNumber: m.SequenceNumber, Err: err})
	if err != nil && d.replyErr == nil {
		d.replyErr = err
	}
	return err
}

// replyBufs are the buffers replies are encoded into.
var replyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// putReply writes r, a reply of the handler of m: to r.Stream, else to the
// reply stream. Every error names the stream and m's shard and sequence
// number; no stream at all is message.ErrNoReplyStream.
func (e *Engine) putReply(ctx context.Context, m *message.Message, r message.Reply) error {
	stream := r.Stream
	if stream == "" {
		stream = e.cfg.ReplyStream
	}
	var err error
	switch {
	case stream == "":
		err = message.ErrNoReplyStream
	case e.cfg.Publisher == nil:
		err = errors.New("replies need a Kinesis client")
	default:
		bp := replyBufs.Get().(*[]byte)
		_, err = e.cfg.Publisher.PutBuffer(ctx, publish.Record{Stream: stream, PartitionKey: r.PartitionKey, Headers: r.Headers, Payload: r.Payload}, bp)
		if cap(*bp) <= 64<<10 {
			replyBufs.Put(bp)
		}
	}
	if err != nil {
		return fmt.Errorf("lambdaadapter: reply to %q for shard %s sequence number %s: %w", stream, m.ShardID, m.SequenceNumber, err)
	}
	return nil
}
