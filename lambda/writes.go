package lambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/shardsettle/lambdaadapter/message"
	"github.com/shardsettle/lambdaadapter/publish"
	"github.com/shardsettle/lambdaadapter/retry"
)

// FirstArrivalHeader is publish.FirstArrivalHeader, carried on counted
// copies.
const FirstArrivalHeader = publish.FirstArrivalHeader

// pendingWrite is a record waiting for its copy, delay message or dead
// letter to be written before it settles.
type pendingWrite struct {
	i         int
	d         retry.Decision
	out       message.Outcome
	notBefore time.Time
}

// queue adds w to the writes of the batch. It reports false when the batch
// is sealed: the record then stays unsettled.
func (b *batch) queue(w pendingWrite) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sealed {
		return false
	}
	b.pending = append(b.pending, w)
	return true
}

// flush seals the batch and writes every pending copy, dead letter and
// delay message: Kinesis records in PutRecords batches, SQS messages in
// SendMessageBatch batches. A record settles only when its write succeeded;
// any failure leaves it unsettled, so it is reported and comes again.
func (b *batch) flush(ctx context.Context) {
	b.mu.Lock()
	writes := b.pending
	b.pending = nil
	b.sealed = true
	b.mu.Unlock()
	if len(writes) == 0 {
		return
	}
	writes = b.dropRedelivered(ctx, writes)
	var latest time.Time
	for _, w := range writes {
		if w.notBefore.After(latest) {
			latest = w.notBefore
		}
	}
	if wait := time.Until(latest); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if err := ctx.Err(); err != nil {
		for _, w := range writes {
			b.logRecord(ctx, slog.LevelError, "lambda: no time left to write the "+w.d.Action.String()+"; record left unsettled", &b.msgs[w.i], w.out, err)
		}
		return
	}

	cfg := &b.r.cfg
	var krecs []publish.Record
	var kidx []int
	qmsgs := map[string][]publish.QueueMessage{}
	qidx := map[string][]int{}
	now := time.Now()
	for wi, w := range writes {
		m := &b.msgs[w.i]
		switch {
		case w.d.Action == retry.Copy:
			krecs = append(krecs, publish.RetryCopy(m))
			kidx = append(kidx, wi)
		case w.d.Action == retry.DelayQueue:
			c := publish.RetryCopy(m)
			body, err := publish.Delayed{
				StreamARN: m.StreamARN, PartitionKey: c.PartitionKey, Headers: c.Headers,
				Payload: c.Payload, NotBefore: now.Add(w.d.Wait),
			}.Body()
			if err != nil {
				b.logRecord(ctx, slog.LevelError, "lambda: cannot encode the delay message; record left unsettled", m, w.out, err)
				continue
			}
			qmsgs[cfg.DelayQueue] = append(qmsgs[cfg.DelayQueue], publish.QueueMessage{Body: string(body), Delay: min(w.d.Wait, retry.MaxQueueDelay)})
			qidx[cfg.DelayQueue] = append(qidx[cfg.DelayQueue], wi)
		case w.d.Action == retry.DeadLetter && cfg.DeadLetterStream != "":
			krecs = append(krecs, publish.DeadLetterRecord(cfg.DeadLetterStream, deadLetterOf(m, w, now)))
			kidx = append(kidx, wi)
		case w.d.Action == retry.DeadLetter:
			body, err := publish.DeadLetterBody(deadLetterOf(m, w, now))
			if err != nil {
				b.logRecord(ctx, slog.LevelError, "lambda: cannot encode the dead letter; record left unsettled", m, w.out, err)
				continue
			}
			qmsgs[cfg.DeadLetterQueue] = append(qmsgs[cfg.DeadLetterQueue], publish.QueueMessage{Body: string(body)})
			qidx[cfg.DeadLetterQueue] = append(qidx[cfg.DeadLetterQueue], wi)
		}
	}

	errs := make([]error, len(writes))
	for i := range errs {
		errs[i] = errNotWritten
	}
	var wg sync.WaitGroup
	if len(krecs) > 0 {
		wg.Go(func() {
			for j, res := range cfg.Publisher.PutBatch(ctx, krecs) {
				errs[kidx[j]] = res.Err
			}
		})
	}
	for url, ms := range qmsgs {
		idx := qidx[url]
		wg.Go(func() {
			for j, res := range cfg.Queue.SendBatch(ctx, url, ms) {
				errs[idx[j]] = res.Err
			}
		})
	}
	wg.Wait()

	for wi, w := range writes {
		m := &b.msgs[w.i]
		if err := errs[wi]; err != nil {
			msg := "lambda: writing the " + w.d.Action.String() + " failed; record left unsettled"
			if errors.Is(err, publish.ErrTooLarge) || errors.Is(err, publish.ErrMessageTooLarge) {
				msg = "lambda: the " + w.d.Action.String() + " is too large to write; record left unsettled (see README: oversize records)"
			}
			b.logRecord(ctx, slog.LevelError, msg, m, w.out, err)
			continue
		}
		switch w.d.Action {
		case retry.DeadLetter:
			b.logRecord(ctx, slog.LevelWarn, "lambda: record dead-lettered: "+w.d.Note, m, w.out, nil)
		default:
			b.logRecord(ctx, slog.LevelInfo, "lambda: record will come again as a counted copy ("+w.d.Action.String()+")", m, w.out, nil)
		}
		b.settle(ctx, w.i)
	}
}

var errNotWritten = errors.New("lambda: not written")

// dropRedelivered removes the writes of records that Lambda delivers again
// anyway: those after the first record of their shard that stays unsettled
// (left, cut off by the deadline, or never started). Writing their copies
// now would only handle them twice.
func (b *batch) dropRedelivered(ctx context.Context, writes []pendingWrite) []pendingWrite {
	queued := make(map[int]bool, len(writes))
	for _, w := range writes {
		queued[w.i] = true
	}
	hole := make([]int, len(b.shards))
	for s := range hole {
		hole[s] = len(b.msgs)
	}
	for i := range b.msgs {
		s := b.shardOf[i]
		if i < hole[s] && !b.settled[i].Load() && !queued[i] {
			hole[s] = i
		}
	}
	kept := writes[:0]
	for _, w := range writes {
		if w.i > hole[b.shardOf[w.i]] {
			b.logRecord(ctx, slog.LevelInfo, "lambda: "+w.d.Action.String()+" not written: an earlier record of the shard stays unsettled, so Lambda delivers this one again", &b.msgs[w.i], w.out, nil)
			continue
		}
		kept = append(kept, w)
	}
	return kept
}

// deadLetterOf is the dead letter of the record of w.
func deadLetterOf(m *message.Message, w pendingWrite, now time.Time) publish.DeadLetter {
	return publish.DeadLetterOf(m, reasonOf(w.d, w.out), now)
}

// reasonOf is a dead letter's reason: the decision's note and the handler's
// error.
func reasonOf(d retry.Decision, out message.Outcome) string {
	if err := out.Err(); err != nil {
		return d.Note + ": " + err.Error()
	}
	return d.Note
}

// laneState is one lane's reply state: the message its handler is working
// on and a buffer reused for every reply the lane writes.
type laneState struct {
	b      *batch
	mu     sync.Mutex
	cur    int // index of the message being handled, -1 between calls
	buf    []byte
	failed error
}

func (l *laneState) begin(m *message.Message, i int) {
	l.mu.Lock()
	l.cur, l.failed = i, nil
	l.mu.Unlock()
	message.Bind(m, l)
}

// end closes the handler call and returns the first reply error, if any.
func (l *laneState) end() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cur = -1
	return l.failed
}

// ErrReplyAfterReturn is returned by Message.Reply after the handler
// returned (the same error in both modes).
var ErrReplyAfterReturn = message.ErrReplyAfterReturn

// ErrNoReplyStream is returned by Message.Reply when neither the reply nor
// the adapter names a stream (the same error in both modes).
var ErrNoReplyStream = message.ErrNoReplyStream

// Reply implements message.Replier: it writes r with one PutRecord, encoding
// into the lane's buffer. Replies of one lane are written one at a time.
func (l *laneState) Reply(ctx context.Context, m *message.Message, r message.Reply) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur < 0 || &l.b.msgs[l.cur] != m {
		return ErrReplyAfterReturn
	}
	err := l.b.r.cfg.Publisher.PutReply(ctx, m, r, l.b.r.cfg.ReplyStream, &l.buf)
	if err != nil {
		err = fmt.Errorf("lambda: %w", err)
		if l.failed == nil {
			l.failed = err
		}
	}
	return err
}
