// Package lambda is the Lambda-mode runner of lambdaadapter: it turns one
// Kinesis invocation into deliveries, hands them to the settlement engine
// (which runs the handler in lanes, decides, writes and settles each record
// on its shard's watermark) and answers with the partial batch response.
//
// Lanes: records with the same partition key are handled one after another in
// stream order; different keys run in parallel, at most Config.Concurrency at
// a time. When a record is left unsettled (Retry), Lambda will deliver it
// again together with every later record of its shard, so no later record of
// that shard is started: it would only be handled twice.
//
// Deadline: the runner stops starting records at the invocation deadline
// minus Config.DeadlineMargin, cancels the context it handed to running
// handlers, and answers with what settled by then. A handler that returns
// after that changes nothing: its shard's watermark was sealed (reset to a new
// epoch), so its late settlement is stale.
//
// Writes: a Retry on a counted configuration, a RetryAfter and a dead letter
// become writes (counted copies to the record's stream, delay messages, dead
// letters), made while the lanes run, in shard order and in batches: a
// record's write goes out once every earlier record of its shard settled or
// has its own write under way, in PutRecords calls of up to 500 entries
// (1,000 copies on one shard take two calls); a write that fails for good
// stops every later write of its shard not yet sent, and those sent with it
// are remembered so that their records settle without their handler when
// Lambda delivers them again to this execution environment (see package
// engine). A RetryAfter copy waiting for its delay holds back the writes
// of later records of its shard. Writes end at a fifth of the margin before
// the deadline; each record settles only once its write succeeded, and what
// is not written by then stays unsettled and is reported. An SQS event from
// the delay queue is forwarded to the stream (see Runner.InvokeSQS).
//
// Most users reach this package through the module root
// (lambdaadapter.New, lambdaadapter.Handle).
package lambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/batchresponse"
	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/event"
	"github.com/shardsettle/lambdaadapter/internal/hooks"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/settle"
	"github.com/shardsettle/lambdaadapter/observe"
)

// Default settings of a Runner.
const (
	// DefaultConcurrency is the default number of lanes that run at once.
	DefaultConcurrency = 16
	// DefaultDeadlineMargin is the default time kept free before the
	// invocation deadline to build and send the response.
	DefaultDeadlineMargin = 500 * time.Millisecond
)

// ErrPanic is wrapped by the error a recovered handler panic is retried with
// (the same error in both modes).
var ErrPanic = engine.ErrPanic

// Config configures a Runner.
type Config struct {
	// Engine runs the handler, decides, writes and settles (required).
	Engine *engine.Engine
	// Concurrency is the number of lanes (distinct partition keys) handled
	// at once; 0 means DefaultConcurrency.
	Concurrency int
	// DeadlineMargin is how long before the invocation deadline the runner
	// stops waiting for handlers and answers; 0 means
	// DefaultDeadlineMargin. A context without a deadline never cuts off.
	DeadlineMargin time.Duration
}

// Validate reports an error for settings that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Engine == nil:
		return errors.New("lambda: no engine")
	case c.Engine.Batch():
		return errors.New("lambda: batch handlers run in long-running mode only")
	case c.Concurrency < 0:
		return fmt.Errorf("lambda: concurrency %d is negative", c.Concurrency)
	case c.DeadlineMargin < 0:
		return fmt.Errorf("lambda: deadline margin %s is negative", c.DeadlineMargin)
	}
	return nil
}

// Runner runs the engine's handler over Kinesis invocations. A Runner is
// safe for concurrent use, although Lambda sends one invocation at a time.
type Runner struct {
	e       *engine.Engine
	conc    int
	margin  time.Duration
	log     *slog.Logger
	recycle bool      // engine.Config.RecycleMessages
	chunks  sync.Pool // of *chunk, when recycling
	buffers sync.Pool // of *event.Buffers

	// spare is the sealed watermark of the last invocation that ended
	// with every handler returned, whose array the next one takes
	// (settle.Watermark.TakeRoom): 56 bytes a record not allocated and
	// cleared again.
	spare atomic.Pointer[settle.Watermark]
}

// NewRunner returns a Runner, or an error for an invalid Config.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{e: cfg.Engine, conc: cfg.Concurrency, margin: cfg.DeadlineMargin, log: cfg.Engine.Logger(),
		recycle: cfg.Engine.Config().RecycleMessages}
	if r.conc == 0 {
		r.conc = DefaultConcurrency
	}
	if r.margin == 0 {
		r.margin = DefaultDeadlineMargin
	}
	return r, nil
}

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
	ds := make([]engine.Delivery, len(msgs))
	for i := range msgs {
		ds[i].Msg = msgs[i]
	}
	return r.run(ctx, batch{ds: ds})
}

// RunJSON is Run followed by batchresponse.AppendJSON into dst.
func (r *Runner) RunJSON(ctx context.Context, dst []byte, msgs []message.Message) ([]byte, error) {
	ids, err := r.Run(ctx, msgs)
	if err != nil {
		return dst, err
	}
	return batchresponse.AppendJSON(dst, ids), nil
}

// run is Run on a batch: deliveries whose messages are set, or ordinary
// records whose deliveries it makes.
func (r *Runner) run(ctx context.Context, b batch) ([]string, error) {
	began := time.Now()
	n := b.len()
	shards := shardSet{spare: r.spare.Swap(nil)}
	hooks := r.e.Config().Hooks
	tracer := hooks.Tracer()
	// Invoke's ordinary records are made into deliveries, registered with
	// their watermarks and built a chunk at a time while the lanes handle
	// the chunks before, once a check of their sequence numbers shows that
	// the watermarks will take every one (so that an unusable batch still
	// handles nothing). Other batches, and one that fails the check (to
	// report the error the watermark gives), are registered first.
	pipelined := b.recs != nil && tracer == nil && registrable(b.recs)
	if !pipelined {
		if b.recs != nil {
			b.ds = b.open(0, n)
		}
		if err := shards.registerAll(b.ds, b.groups); err != nil {
			return nil, err
		}
	}
	cfg := engine.SessionConfig{Mode: engine.ModeLambda, Lanes: min(r.conc, max(n, 1))}
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		// Handlers stop at the margin; writes a fifth of the margin before
		// the deadline, leaving the rest to send the response.
		cfg.Cutoff = dl.Add(-r.margin)
		cfg.WriteDeadline = dl.Add(-r.margin / 5)
	} else {
		cfg.WriteDeadline = time.Now().Add(noDeadlineWriteTimeout)
	}
	var endInvocation func(observe.Invocation)
	if tracer != nil {
		if b.recs != nil {
			b.buildInto(b.ds, 0, nil) // the invocation's span links every record
			b.recs = nil
		}
		msgs := make([]*message.Message, n)
		for i := range b.ds {
			msgs[i] = &b.ds[i].Msg
		}
		ctx, endInvocation = tracer.StartInvocation(ctx, msgs)
	}
	s := r.e.Start(ctx, cfg)
	var (
		regErr error
		parts  [][]engine.Delivery // every delivery, for the report
		chunks []*chunk            // parts' storage, reused
	)
	switch {
	case pipelined:
		parts = make([][]engine.Delivery, 0, (n+buildChunk-1)/buildChunk)
		chunks = make([]*chunk, 0, cap(parts))
		// The chunks built go to the lanes in groups that double: the
		// first chunk at once, so that the lanes start early, then 2, 4,
		// 8... chunks at a time. Each group wakes the lanes that ran out of
		// records, and a lane that waits costs its thread a sleep and a
		// wake-up: a Submit per chunk woke them up to 40 times at 10,000
		// records, the doubling groups 6 times.
		sent, group := 0, 1
		for lo := 0; lo < n; lo += buildChunk {
			hi := min(lo+buildChunk, n)
			c := r.getChunk(hi - lo)
			chunks = append(chunks, c)
			ds := c.ds
			if regErr = shards.registerEach(ds, b.recs[lo:hi], lo, n); regErr != nil {
				break
			}
			if c.msgs != nil {
				c.headers = b.buildApart(ds, c.msgs, lo, c.headers)
			} else {
				c.headers = b.buildInto(ds, lo, c.headers)
			}
			parts = append(parts, ds)
			if len(parts)-sent >= group || hi == n {
				for _, p := range parts[sent:] {
					_, _ = s.Submit(ctx, p) // cannot fail before Close
				}
				sent, group = len(parts), 2*group
			}
		}
		for _, p := range parts[sent:] { // registered before a refusal
			_, _ = s.Submit(ctx, p)
		}
	case b.recs != nil:
		// Registered already; the lanes handle a chunk while the next one
		// is built.
		for lo := 0; lo < n; lo += buildChunk {
			hi := min(lo+buildChunk, n)
			b.buildInto(b.ds[lo:hi], lo, nil)
			_, _ = s.Submit(ctx, b.ds[lo:hi])
		}
		parts = [][]engine.Delivery{b.ds}
	default:
		_, _ = s.Submit(ctx, b.ds)
		parts = [][]engine.Delivery{b.ds}
	}
	s.Close()
	cut := s.Wait()
	if cut && ctx.Err() == nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "lambda: deadline margin reached; answering with records still running",
			slog.String("margin", r.margin.String()))
	}
	wms := make([]*settle.Watermark, len(shards.list))
	for i, sh := range shards.list {
		wms[i] = sh.Watermark()
	}
	ids := batchresponse.Failures(wms)
	// Sealing makes every settlement still to come stale.
	for _, sh := range shards.list {
		sh.Reset("")
	}
	if regErr != nil {
		// registrable said this cannot happen. Records after the refused
		// one were never registered, so no response could be trusted:
		// Lambda retries the whole batch.
		return nil, regErr
	}
	r.report(ctx, &hooks, parts, n, ids, began, cut, cfg.WriteDeadline, endInvocation)
	if !cut && len(shards.list) > 0 {
		r.spare.Store(shards.list[0].Watermark()) // sealed above
	}
	switch {
	case cut:
		// A cut-off run leaves its storage to the handlers still running.
	case r.recycle:
		// Every handler returned and every write ended: the next
		// invocation may reuse the storage of the messages and payloads.
		r.putChunks(chunks)
		if b.buffers != nil {
			if testing.Testing() {
				b.buffers.Scribble() // see lambdaadapter.WithRecycledMessages
			}
			r.buffers.Put(b.buffers)
		}
	default:
		// The messages keep their payloads and headers; the next
		// invocation reuses the deliveries and the decoded records.
		r.putChunks(chunks)
		if b.buffers != nil {
			b.buffers.GiveUpData()
			r.buffers.Put(b.buffers)
		}
	}
	return ids, nil
}

// shardSet is the shards of one run, in the order their first records came.
type shardSet struct {
	list  []*engine.Shard
	byID  map[string]*engine.Shard // made with a second shard (Lambda invokes with one)
	spare *settle.Watermark        // a sealed watermark whose array the first shard takes, or nil
}

// of returns the shard id, making it (room for n deliveries, when it is
// the first) when it is new.
func (set *shardSet) of(id string, n int) *engine.Shard {
	if len(set.list) == 1 && set.list[0].ID() == id {
		return set.list[0]
	}
	if sh := set.byID[id]; sh != nil {
		return sh
	}
	sh := engine.NewShard(id, engine.Hooks{})
	switch len(set.list) {
	case 0:
		// Lambda invokes with the records of one shard.
		if set.spare != nil {
			sh.Watermark().TakeRoom(set.spare)
			set.spare = nil
		}
		sh.Watermark().Grow(n)
	case 1:
		set.byID = map[string]*engine.Shard{set.list[0].ID(): set.list[0]}
	}
	if set.byID != nil {
		set.byID[id] = sh
	}
	set.list = append(set.list, sh)
	return sh
}

// registerAll registers every delivery of ds with its shard's watermark;
// groups, when not nil, gives for each Kinesis record its number of
// deliveries (see batch).
func (set *shardSet) registerAll(ds []engine.Delivery, groups []int) error {
	for i, rec := 0, 0; i < len(ds); rec++ {
		m := &ds[i].Msg
		sh := set.of(m.ShardID, len(ds))
		n := 1
		if groups != nil {
			n = groups[rec]
		}
		var err error
		if n == 1 {
			_, err = sh.Deliver(sh.Watermark().Epoch(), ds[i:i+1])
		} else {
			err = sh.DeliverGroup(sh.Watermark().Epoch(), ds[i:i+n], 0)
		}
		if err != nil {
			return recordError(rec, m.ShardID, m.SequenceNumber, err)
		}
		i += n
	}
	return nil
}

// registerEach registers ds, the deliveries of the ordinary records recs,
// records lo to lo+len(ds)-1 of a batch of total, a run of one shard at a
// time, from the records themselves (their messages are built after).
// Their sequence numbers must have passed registrable: within a run, only
// the first is checked again.
func (set *shardSet) registerEach(ds []engine.Delivery, recs []event.KinesisRecord, lo, total int) error {
	for i := 0; i < len(ds); {
		id := recs[i].ShardID
		j := i + 1
		for j < len(ds) && recs[j].ShardID == id {
			j++
		}
		sh := set.of(id, total)
		n, err := sh.DeliverOrdered(sh.Watermark().Epoch(), ds[i:j], func(k int) string { return recs[i+k].SequenceNumber }) // registrable checked them
		if err != nil {
			return recordError(lo+i+n, id, recs[i+n].SequenceNumber, err)
		}
		i = j
	}
	return nil
}

func recordError(rec int, shardID, seq string, err error) error {
	return fmt.Errorf("lambda: record %d (shard %q, sequence number %q): %w", rec, shardID, seq, err)
}

// maxCheckedShards is the most shards registrable follows; a batch with
// more (Lambda sends one) is registered the slow way.
const maxCheckedShards = 8

// registrable reports whether new watermarks take every record of recs in
// order: each sequence number valid and above the previous one of its
// shard, what settle.Watermark.Deliver checks.
func registrable(recs []event.KinesisRecord) bool {
	type last struct{ shard, seq string }
	var lasts [maxCheckedShards]last
	n, cur := 0, -1
	for i := range recs {
		rec := &recs[i]
		if cur < 0 || lasts[cur].shard != rec.ShardID {
			cur = -1
			for k := range n {
				if lasts[k].shard == rec.ShardID {
					cur = k
				}
			}
			if cur < 0 {
				if n == maxCheckedShards {
					return false
				}
				lasts[n], cur = last{shard: rec.ShardID}, n
				n++
			}
		}
		seq := rec.SequenceNumber
		if !settle.ValidSequence(seq) || lasts[cur].seq != "" && settle.CompareSequence(seq, lasts[cur].seq) <= 0 {
			return false
		}
		lasts[cur].seq = seq
	}
	return true
}

// report tells the hooks about the invocation and flushes them, within the
// write deadline (a fifth of the margin before the Lambda deadline): an
// exporter's lines go out before the response, so a timed-out invocation is
// the only one whose metrics are lost.
func (r *Runner) report(ctx context.Context, h *hooks.Set, parts [][]engine.Delivery, records int, ids []string, began time.Time, cut bool, flushBy time.Time, end func(observe.Invocation)) {
	if h.Empty() {
		return
	}
	inv := observe.Invocation{Records: records, Failures: len(ids), Duration: time.Since(began), Cut: cut}
	var oldest time.Time
	for _, ds := range parts {
		for i := range ds {
			m := ds[i].Message()
			if inv.Stream == "" {
				inv.Stream = m.StreamARN
			}
			if !m.ArrivalTime.IsZero() && (oldest.IsZero() || m.ArrivalTime.Before(oldest)) {
				oldest = m.ArrivalTime
			}
		}
	}
	if !oldest.IsZero() {
		inv.OldestAge = max(time.Since(oldest), 0) // a clock behind the stream's reads 0
	}
	h.Invocation(inv)
	if end != nil {
		end(inv)
	}
	if h.Flushes() {
		fctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), flushBy)
		h.Flush(fctx)
		cancel()
	}
}

// buildChunk is the number of records whose messages the runner builds
// before it hands them to the lanes.
const buildChunk = 256

// noDeadlineWriteTimeout bounds the writes of a batch run without a
// deadline (tests, tools): Lambda always sets one.
const noDeadlineWriteTimeout = time.Minute
