// Package lambda is the Lambda-mode runner of lambdaadapter: it turns one
// Kinesis invocation into messages, runs the handler over them in lanes,
// settles each record on its shard's watermark and answers with the partial
// batch response.
//
// Lanes: records with the same partition key are handled one after another in
// stream order; different keys run in parallel, at most Config.Concurrency at
// a time. When a record is left unsettled (Retry), Lambda will deliver it
// again together with every later record of its shard, so the runner starts
// no later record of that shard: they would only be handled twice.
//
// Deadline: the runner stops starting records at the invocation deadline
// minus Config.DeadlineMargin, cancels the context it handed to running
// handlers, and answers at once with what settled by then. A handler that
// returns after that changes nothing: its shard's watermark was sealed (reset
// to a new epoch), so its late settlement is stale.
//
// Writes: a Retry on a counted configuration, a RetryAfter and a dead
// letter become writes (counted copies to the record's stream, delay
// messages, dead letters). They are collected while the lanes run and
// written together when the lanes are done (RetryAfter copies once their
// delay passed), with PutRecords and SendMessageBatch, before the response;
// each record settles only once its write succeeded. An SQS event from the
// delay queue is forwarded to the stream (see Runner.InvokeSQS).
//
// Most users reach this package through the module root
// (lambdaadapter.New, lambdaadapter.Handle).
package lambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardsettle/lambdaadapter/batchresponse"
	"github.com/shardsettle/lambdaadapter/message"
	"github.com/shardsettle/lambdaadapter/retry"
	"github.com/shardsettle/lambdaadapter/settle"
)

// Default settings of a Runner.
const (
	// DefaultConcurrency is the default number of lanes that run at once.
	DefaultConcurrency = 16
	// DefaultDeadlineMargin is the default time kept free before the
	// invocation deadline to build and send the response.
	DefaultDeadlineMargin = 500 * time.Millisecond
)

// Log attribute keys used by the runner. They are stable: dashboards and
// alarms may rely on them.
const (
	AttrShardID        = "shard_id"
	AttrSequenceNumber = "sequence_number"
	AttrPartitionKey   = "partition_key"
	AttrOutcome        = "outcome"
	AttrAttempt        = "attempt"
	AttrError          = "error"
	AttrStack          = "stack"
)

// Config configures a Runner. The zero Config is valid: every zero field
// takes its default, and with no Publisher every retry stays unsettled.
type Config struct {
	// Concurrency is the number of lanes (distinct partition keys) handled
	// at once; 0 means DefaultConcurrency.
	Concurrency int
	// DeadlineMargin is how long before the invocation deadline the runner
	// stops waiting for handlers and answers; 0 means
	// DefaultDeadlineMargin. A context without a deadline never cuts off.
	DeadlineMargin time.Duration
	// Logger receives the runner's logs; nil discards them.
	Logger *slog.Logger

	// Settings are the retry policy and targets, shared with the
	// long-running mode; the Publisher also writes replies. NewRunner
	// derives the Policy's DeadLetter and DelayQueue from the targets.
	retry.Settings
	// ReplyStream is the default stream of Message.Reply.
	ReplyStream string
}

// Validate reports an error for settings that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Concurrency < 0:
		return fmt.Errorf("lambda: concurrency %d is negative", c.Concurrency)
	case c.DeadlineMargin < 0:
		return fmt.Errorf("lambda: deadline margin %s is negative", c.DeadlineMargin)
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("lambda: %w", err)
	}
	return nil
}

// Runner runs a handler over Kinesis invocations. A Runner is safe for
// concurrent use, although Lambda sends one invocation at a time.
type Runner struct {
	h      message.Handler
	conc   int
	margin time.Duration
	log    *slog.Logger
	cfg    Config
}

// NewRunner returns a Runner for h. It panics if h is nil and returns an
// error for an invalid Config.
func NewRunner(h message.Handler, cfg Config) (*Runner, error) {
	if h == nil {
		panic("lambda: nil handler")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Complete()
	r := &Runner{h: h, conc: cfg.Concurrency, margin: cfg.DeadlineMargin, log: cfg.Logger, cfg: cfg}
	if r.conc == 0 {
		r.conc = DefaultConcurrency
	}
	if r.margin == 0 {
		r.margin = DefaultDeadlineMargin
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// ErrPanic is wrapped by the error a recovered handler panic is retried with.
var ErrPanic = errors.New("lambda: handler panicked")

// Run handles one batch of messages, in the order Kinesis delivered them,
// and returns the item identifiers to report as failed: for each shard with
// an unsettled record, the sequence number of its oldest unsettled record.
// Run returns an error, and handles nothing, only when the batch itself is
// unusable (a sequence number that is not a number, or that does not grow
// within its shard), since no response could then be trusted.
//
// Run returns when every record settled or was given up on, or at ctx's
// deadline minus the margin, whichever is first. Handler calls still running
// then keep their goroutine until they return, but change nothing.
func (r *Runner) Run(ctx context.Context, msgs []message.Message) ([]string, error) {
	b, err := r.newBatch(msgs)
	if err != nil {
		return nil, err
	}
	runCtx := ctx
	var cancel context.CancelFunc
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		b.cutoff = dl.Add(-r.margin)
		runCtx, cancel = context.WithDeadline(ctx, b.cutoff)
	} else {
		runCtx, cancel = context.WithCancel(ctx)
	}
	defer cancel()

	lanes := min(r.conc, len(b.heads))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(lanes)
	for range lanes {
		go func() {
			defer wg.Done()
			b.lane(runCtx)
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-runCtx.Done():
		// Out of time (or the caller gave up): answer with what settled.
		if ctx.Err() == nil {
			r.log.LogAttrs(ctx, slog.LevelWarn, "lambda: deadline margin reached; answering with records still running",
				slog.String("margin", r.margin.String()))
		}
	}
	// Copies, dead letters and delay messages are written now, in as few
	// calls as possible; each record settles once its write succeeded.
	// Their time runs to a fifth of the margin before the deadline, leaving
	// the rest to send the response.
	flushCtx, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), noDeadlineFlushTimeout)
	if hasDeadline {
		cancelFlush()
		flushCtx, cancelFlush = context.WithDeadline(context.WithoutCancel(ctx), dl.Add(-r.margin/5))
	}
	b.flush(flushCtx)
	cancelFlush()

	// Sealing makes every settlement still to come stale.
	ids := batchresponse.Failures(b.shards)
	for _, w := range b.shards {
		w.Reset("")
	}
	return ids, nil
}

// noDeadlineFlushTimeout bounds the writes of a batch run without a
// deadline (tests, tools): Lambda always sets one.
const noDeadlineFlushTimeout = time.Minute

// RunJSON is Run followed by batchresponse.AppendJSON into dst.
func (r *Runner) RunJSON(ctx context.Context, dst []byte, msgs []message.Message) ([]byte, error) {
	ids, err := r.Run(ctx, msgs)
	if err != nil {
		return dst, err
	}
	return batchresponse.AppendJSON(dst, ids), nil
}

// batch is the state of one Run.
type batch struct {
	r       *Runner
	msgs    []message.Message
	tickets []settle.Ticket
	shardOf []int32 // index into shards
	shards  []*settle.Watermark
	// blocked[s] is the lowest message index left unsettled on shard s
	// (len(msgs) when none): later records of the shard are not started.
	blocked []atomic.Int64
	heads   []int32 // first message of each partition key, in arrival order
	next    []int32 // next message with the same key, -1 at the end
	cursor  atomic.Int64
	cutoff  time.Time // zero without a deadline
	settled []atomic.Bool

	mu      sync.Mutex
	pending []pendingWrite // guarded by mu
	sealed  bool           // guarded by mu: no write is queued any more
}

func (r *Runner) newBatch(msgs []message.Message) (*batch, error) {
	b := &batch{
		r:       r,
		msgs:    msgs,
		tickets: make([]settle.Ticket, len(msgs)),
		shardOf: make([]int32, len(msgs)),
		next:    make([]int32, len(msgs)),
		settled: make([]atomic.Bool, len(msgs)),
	}
	shardIdx := make(map[string]int32, 1)
	last := make(map[string]int32, 64) // partition key -> last message index
	for i := range msgs {
		m := &msgs[i]
		s, ok := shardIdx[m.ShardID]
		if !ok {
			s = int32(len(b.shards))
			shardIdx[m.ShardID] = s
			b.shards = append(b.shards, settle.NewWatermark(m.ShardID))
		}
		t, err := b.shards[s].Deliver(m.SequenceNumber, 1)
		if err != nil {
			return nil, fmt.Errorf("lambda: record %d (shard %q, sequence number %q): %w", i, m.ShardID, m.SequenceNumber, err)
		}
		b.tickets[i] = t
		b.shardOf[i] = s
		b.next[i] = -1
		if p, ok := last[m.PartitionKey]; ok {
			b.next[p] = int32(i)
		} else {
			b.heads = append(b.heads, int32(i))
		}
		last[m.PartitionKey] = int32(i)
	}
	b.blocked = make([]atomic.Int64, len(b.shards))
	for s := range b.blocked {
		b.blocked[s].Store(int64(len(msgs)))
	}
	return b, nil
}

// lane takes partition keys off the batch one at a time and handles each
// key's records in order, until no key is left or ctx is done.
func (b *batch) lane(ctx context.Context) {
	l := &laneState{b: b, cur: -1}
	for {
		k := b.cursor.Add(1) - 1
		if k >= int64(len(b.heads)) {
			return
		}
		for i := b.heads[k]; i >= 0; i = b.next[i] {
			if ctx.Err() != nil {
				return
			}
			s := b.shardOf[i]
			if int64(i) > b.blocked[s].Load() {
				break // Lambda redelivers it anyway
			}
			if !b.handle(ctx, l, int(i)) {
				b.block(s, int64(i))
				break // keep the key's order: nothing after it runs now
			}
		}
	}
}

func (b *batch) block(s int32, i int64) {
	for {
		cur := b.blocked[s].Load()
		if i >= cur || b.blocked[s].CompareAndSwap(cur, i) {
			return
		}
	}
}

// handle runs the handler for message i and acts on its outcome. It
// reports false when the record is left unsettled for good (Lambda delivers
// it again), so later records of its key and shard must wait.
func (b *batch) handle(ctx context.Context, l *laneState, i int) bool {
	m := &b.msgs[i]
	l.begin(m, i)
	out := b.call(ctx, m)
	if err := l.end(); err != nil {
		b.logRecord(ctx, slog.LevelError, "lambda: reply failed; record left unsettled", m, out, err)
		return false
	}
	if ctx.Err() != nil {
		// Cut off: the answer is being built, and an outcome returned now
		// changes nothing: the record stays unsettled and is reported.
		return false
	}
	if out.Kind() == message.KindInvalid {
		out = message.Retry(errors.New("lambda: handler returned the zero Outcome"))
	}
	remaining := time.Duration(-1)
	if !b.cutoff.IsZero() {
		remaining = max(time.Until(b.cutoff), 0)
	}
	d := b.r.cfg.Policy.Decide(out, m.Attempt, remaining)
	if d.Note != "" && d.Action != retry.DeadLetter && d.Action != retry.Retire {
		b.logRecord(ctx, slog.LevelWarn, "lambda: "+d.Note, m, out, nil)
	}
	switch d.Action {
	case retry.Settle:
		if out.Kind() == message.KindDrop {
			b.logRecord(ctx, slog.LevelWarn, "lambda: record dropped", m, out, nil)
		}
	case retry.Retire:
		b.logRecord(ctx, slog.LevelWarn, "lambda: record retired without a dead-letter target: "+d.Note, m, out, nil)
	case retry.Copy, retry.DelayQueue, retry.DeadLetter:
		if d.Action == retry.Copy && b.r.cfg.Publisher == nil {
			b.logRecord(ctx, slog.LevelError, "lambda: no Kinesis client to write a retry copy; record left unsettled", m, out, nil)
			return false
		}
		w := pendingWrite{i: i, d: d, out: out}
		if d.Action == retry.Copy {
			w.notBefore = time.Now().Add(d.Wait)
		}
		if !b.queue(w) {
			return false
		}
		return true
	default: // retry.Leave
		if ctx.Err() == nil && !errors.Is(out.Err(), ErrPanic) { // a panic was logged with its stack
			b.logRecord(ctx, slog.LevelWarn, "lambda: record left unsettled; Lambda delivers it again", m, out, nil)
		}
		return false
	}
	// After the cut-off the response may already be built; the seal then
	// makes this settlement stale (ErrStale), which changes nothing.
	b.settle(ctx, i)
	return true
}

// settle settles message i on its shard.
func (b *batch) settle(ctx context.Context, i int) {
	m := &b.msgs[i]
	w := b.shards[b.shardOf[i]]
	b.settled[i].Store(true)
	if _, _, err := w.Settle(b.tickets[i]); err != nil && !errors.Is(err, settle.ErrStale) {
		b.r.log.LogAttrs(ctx, slog.LevelError, "lambda: settle failed",
			slog.String(AttrShardID, m.ShardID), slog.String(AttrSequenceNumber, m.SequenceNumber), errAttr(err))
	}
}

func (b *batch) logRecord(ctx context.Context, level slog.Level, msg string, m *message.Message, out message.Outcome, err error) {
	if !b.r.log.Enabled(ctx, level) {
		return
	}
	if err == nil {
		err = out.Err()
	}
	b.r.log.LogAttrs(ctx, level, msg,
		slog.String(AttrShardID, m.ShardID), slog.String(AttrSequenceNumber, m.SequenceNumber),
		slog.String(AttrPartitionKey, m.PartitionKey), slog.Int(AttrAttempt, m.Attempt),
		slog.String(AttrOutcome, out.String()), errAttr(err))
}

// call runs the handler, turning a panic into a Retry for this record only.
func (b *batch) call(ctx context.Context, m *message.Message) (out message.Outcome) {
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("%w: %v", ErrPanic, p)
			b.r.log.LogAttrs(ctx, slog.LevelError, "lambda: handler panicked; record left unsettled",
				slog.String(AttrShardID, m.ShardID), slog.String(AttrSequenceNumber, m.SequenceNumber),
				slog.String(AttrPartitionKey, m.PartitionKey), slog.Any("panic", p),
				slog.String(AttrStack, string(debug.Stack())))
			out = message.Retry(err)
		}
	}()
	return b.r.h.HandleRecord(ctx, m)
}

func errAttr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.String(AttrError, err.Error())
}
