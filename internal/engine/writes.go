package engine

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/internal/retry"
	"github.com/shardsettle/lambdaadapter/observe"
)

// write is what must be written for a record before it settles: its counted
// copy (to Kinesis), its durable delay message or dead letter (to Kinesis or
// SQS).
type write struct {
	d         *Delivery
	dec       retry.Decision
	out       message.Outcome
	notBefore time.Time // a copy after RetryAfter(d) is written then

	rec  publish.Record       // a Kinesis write, when url == ""
	url  string               // the SQS queue of an SQS write
	qmsg publish.QueueMessage // the SQS message

	heapIdx  int
	delayed  bool // ordered: released before it was due (see shardWrites.delayed)
	failures int  // long-running: times it failed and is made again (writer.again)
}

// errNoPublisher is the error of a copy without a Kinesis client.
var errNoPublisher = errors.New("no Kinesis client to write a retry copy")

// newWrite builds the write dec asks for d.
func (e *Engine) newWrite(d *Delivery, dec retry.Decision, out message.Outcome, now time.Time) (*write, error) {
	m := d.msg()
	w := &write{d: d, dec: dec, out: out, heapIdx: -1}
	switch dec.Action {
	case retry.Copy:
		if e.cfg.Publisher == nil {
			return nil, errNoPublisher
		}
		w.rec = CopyOf(m)
		w.notBefore = now.Add(dec.Wait)
	case retry.DelayQueue:
		c := CopyOf(m)
		body, err := publish.Delayed{StreamARN: m.StreamARN, PartitionKey: c.PartitionKey, Headers: c.Headers,
			Payload: c.Payload, NotBefore: now.Add(dec.Wait)}.Body()
		if err != nil {
			return nil, err
		}
		w.url = e.cfg.DelayQueue
		w.qmsg = publish.QueueMessage{Body: string(body), Delay: min(dec.Wait, retry.MaxQueueDelay)}
	case retry.DeadLetter:
		dl := DeadLetterOf(m, reasonOf(dec, out), now)
		if e.cfg.DeadLetterStream != "" {
			w.rec = publish.DeadLetterRecord(e.cfg.DeadLetterStream, dl)
			break
		}
		body, err := publish.DeadLetterBody(dl)
		if err != nil {
			return nil, err
		}
		w.url = e.cfg.DeadLetterQueue
		w.qmsg = publish.QueueMessage{Body: string(body)}
	default:
		return nil, errors.New("no write for " + dec.Action.String())
	}
	if w.url == "" {
		if err := e.cfg.Publisher.Check(&w.rec); err != nil {
			return nil, err
		}
	} else if err := e.cfg.Queue.Check(w.url, &w.qmsg); err != nil {
		return nil, err
	}
	return w, nil
}

// originalDeadLetter is the write of d's record to the dead-letter stream as
// it arrived: its payload with its own headers (the delivery headers left
// out), under its partition key, without the dead-letter headers — the end
// of a record whose dead letter is too large for a Kinesis record. It is no
// larger than the record was, so it fits the stream's limit (unless the
// publisher was given a lower one).
func (e *Engine) originalDeadLetter(d *Delivery, dec retry.Decision, out message.Outcome) (*write, error) {
	m := d.msg()
	h := make(envelope.Headers, 0, len(m.Headers))
	for _, x := range m.Headers {
		if !envelope.IsDeliveryHeader(x.Name) {
			h = append(h, x)
		}
	}
	key := m.PartitionKey
	if key == "" {
		key = m.Headers.Get(envelope.PartitionKeyHeader)
	}
	w := &write{d: d, dec: dec, out: out, heapIdx: -1,
		rec: publish.Record{Stream: e.cfg.DeadLetterStream, PartitionKey: key, Headers: h, Payload: m.Payload}}
	if err := e.cfg.Publisher.Check(&w.rec); err != nil {
		return nil, err
	}
	return w, nil
}

// tooLarge reports whether err says a write is too large to make.
func tooLarge(err error) bool {
	return errors.Is(err, publish.ErrTooLarge) || errors.Is(err, publish.ErrMessageTooLarge)
}

// reasonOf is a dead letter's reason: the decision's note and the handler's
// error.
func reasonOf(d retry.Decision, out message.Outcome) string {
	if err := out.Err(); err != nil {
		return d.Note + ": " + err.Error()
	}
	return d.Note
}

// CopyOf returns the counted copy of m that a retry writes: to m.StreamARN,
// with m's partition key and payload (shared with m, not copied), and m's
// user headers in order with the delivery headers (partition-key,
// kinesis-sequence-number, kinesis-shard-id) removed,
// x-ruststream-retry-count set to m.Attempt (the attempts made so far: the
// copy's first delivery is attempt m.Attempt + 1; the first copy of an
// original says "1") in place when present, else last, and
// publish.FirstArrivalHeader (m's arrival) and publish.OriginHeader (m's
// shard, sequence number and sub-sequence number) set on the first copy and
// carried unchanged on later ones. It does not modify m.
func CopyOf(m *message.Message) publish.Record {
	h := make(envelope.Headers, 0, len(m.Headers)+3)
	for _, x := range m.Headers {
		if !envelope.IsDeliveryHeader(x.Name) {
			h = append(h, x)
		}
	}
	h.Set(envelope.RetryCountHeader, strconv.Itoa(max(m.Attempt, 1)))
	if _, ok := h.Lookup(publish.FirstArrivalHeader); !ok {
		h.Set(publish.FirstArrivalHeader, formatTime(m.ArrivalTime))
	}
	if _, ok := h.Lookup(publish.OriginHeader); !ok {
		h.Set(publish.OriginHeader, m.ShardID+"#"+m.SequenceNumber+"#"+strconv.Itoa(m.SubSequenceNumber))
	}
	key := m.PartitionKey
	if key == "" {
		key = m.Headers.Get(envelope.PartitionKeyHeader)
	}
	return publish.Record{Stream: m.StreamARN, PartitionKey: key, Headers: h, Payload: m.Payload}
}

// DeadLetterOf is the dead letter of m, given up on for reason at the time
// at: its user headers (publish.FirstArrivalHeader moved into
// FirstArrival, publish.OriginHeader left out), payload, key and
// coordinates, and Attempts = m.Attempt.
func DeadLetterOf(m *message.Message, reason string, at time.Time) publish.DeadLetter {
	first := m.ArrivalTime
	if v, ok := m.Headers.Lookup(publish.FirstArrivalHeader); ok {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			first = t
		}
	}
	h := m.Headers.Clone()
	h.Del(publish.FirstArrivalHeader)
	h.Del(publish.OriginHeader)
	sub := ""
	if m.Aggregated {
		sub = strconv.Itoa(m.SubSequenceNumber)
	}
	return publish.DeadLetter{
		SubSequenceNumber: sub,
		Reason:            reason,
		SourceStreamARN:   m.StreamARN,
		ShardID:           m.ShardID,
		SequenceNumber:    m.SequenceNumber,
		PartitionKey:      m.PartitionKey,
		Attempts:          m.Attempt,
		FirstArrival:      first,
		DeadLetteredAt:    at,
		Headers:           h,
		Payload:           m.Payload,
	}
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(publish.TimeFormat)
}

// writer writes the session's copies, delay messages and dead letters:
// Kinesis records with PutRecords, SQS messages with SendMessageBatch, as
// many as are ready in one round. In Lambda mode (ordered) a record's write
// is ready only once every earlier record of its shard has settled or has
// its own write under way, so a shard's writes go out in its order, in
// rounds of up to publish.MaxBatchRecords, one round at a time; in
// long-running mode every write is ready at once and several rounds run at
// the same time. A write after RetryAfter(d) is ready d after the outcome
// (in Lambda mode it holds back the later writes of its shard until then).
type writer struct {
	s       *Session
	ordered bool
	ctx     context.Context // set when the workers start
	cancel  context.CancelFunc

	mu       sync.Mutex
	shards   map[*Shard]*shardWrites // ordered: each shard's writes
	ready    []*write
	later    dueHeap[*write] // ready but not due yet
	inflight int
	// finishing counts the rounds whose writes are being finished: their
	// records settling makes the next writes of their shards ready, which
	// go out together in the next round instead of one call each.
	finishing int
	draining  bool // no new write comes; end when idle
	// unfenced is set when a shard's fence ended (Session.FenceEnded): the
	// next look at later writes takes those of shards no longer live at
	// once, so that they end (stale) without waiting out their backoff.
	unfenced bool
	closed   bool      // no write is accepted or started
	started  bool      // the workers run (from the first write on)
	changed  broadcast // woken when the writes change
	workers  sync.WaitGroup
	// npending counts the writes waiting for their turn, so that a settlement with
	// none waiting (the common case) does not take mu. It grows under mu
	// before the record's shard is looked at, so a settlement that the
	// look missed sees it.
	npending atomic.Int64
}

// shardWrites is what the ordered writer keeps of one shard's writes.
type shardWrites struct {
	pending []*write // waiting for their turn, by ordinal
	out     int      // released (ready, due later or under way) and not finished
	delayed int      // of out, those released before they were due
}

// newWriter returns the session's writer. Its workers start with the first
// write, so an invocation that writes nothing starts no goroutine for it.
func newWriter(s *Session) *writer {
	return &writer{s: s, ordered: s.pol.orderedWrites}
}

// startLocked starts the workers, once.
func (w *writer) startLocked() {
	if w.started {
		return
	}
	w.started = true
	if !w.s.cfg.WriteDeadline.IsZero() {
		w.ctx, w.cancel = context.WithDeadline(context.Background(), w.s.cfg.WriteDeadline)
	} else {
		w.ctx, w.cancel = context.WithCancel(context.Background())
	}
	n := 1
	if !w.ordered {
		n = w.s.cfg.WriteCalls
	}
	w.workers.Add(n)
	for range n {
		go func() {
			defer w.workers.Done()
			w.work()
		}()
	}
}

// stop cancels the workers' context, if they started.
func (w *writer) stop() {
	w.mu.Lock()
	cancel := w.cancel
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// submit queues wr. It reports false, queueing nothing, once the writer is
// closed.
func (w *writer) submit(wr *write) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.draining && w.ordered && w.s.ctx.Err() != nil {
		return false
	}
	if !w.ordered {
		w.queueLocked(wr)
		return true
	}
	sh := wr.d.shard
	sw := w.shardLocked(sh)
	i, _ := slices.BinarySearchFunc(sw.pending, wr.d.ord, func(x *write, ord int64) int { return int(x.d.ord - ord) })
	sw.pending = slices.Insert(sw.pending, i, wr)
	w.npending.Add(1)
	w.turnLocked(sh)
	return true
}

// shardLocked returns what the writer keeps of sh, made on first use.
func (w *writer) shardLocked(sh *Shard) *shardWrites {
	sw := w.shards[sh]
	if sw == nil {
		if w.shards == nil {
			w.shards = map[*Shard]*shardWrites{}
		}
		sw = &shardWrites{}
		w.shards[sh] = sw
	}
	return sw
}

// moved tells the writer that a record of sh settled (ordered mode: the
// next write of sh may be its turn now).
func (w *writer) moved(sh *Shard) {
	if !w.ordered || w.npending.Load() == 0 {
		return
	}
	w.mu.Lock()
	w.turnLocked(sh)
	w.mu.Unlock()
}

// turnLocked releases the pending writes of sh whose turn it is, in order: a
// write's turn comes once every unsettled record before it in its shard
// (counted by watermark part, so the user records of one KPL aggregate each
// wait for the ones before them) has its own write released and not
// finished. While a write released before it was due waits for its time,
// none after it is released.
func (w *writer) turnLocked(sh *Shard) {
	sw := w.shards[sh]
	if sw == nil {
		return
	}
	for len(sw.pending) > 0 && sw.delayed == 0 {
		wr := sw.pending[0]
		if wr.d.Stale() || sh.wm.UnsettledBefore(wr.d.ticket, sw.out) != sw.out {
			return
		}
		sw.pending[0] = nil
		sw.pending = sw.pending[1:]
		w.npending.Add(-1)
		sw.out++
		if time.Until(wr.notBefore) > 0 {
			wr.delayed = true
			sw.delayed++
		}
		w.queueLocked(wr)
	}
}

// dueLocked (ordered) notes that wr, released before it was due, is due:
// the writes after it in its shard may have their turn.
func (w *writer) dueLocked(wr *write) {
	if !wr.delayed {
		return
	}
	wr.delayed = false
	sh := wr.d.shard
	if sw := w.shards[sh]; sw != nil {
		sw.delayed--
		w.turnLocked(sh)
	}
}

// queueLocked makes wr ready, or due later.
func (w *writer) queueLocked(wr *write) {
	w.startLocked()
	if time.Until(wr.notBefore) > 0 {
		heap.Push(&w.later, wr)
	} else {
		w.ready = append(w.ready, wr)
	}
	w.broadcastLocked()
}

func (w *writer) broadcastLocked() { w.changed.wake() }

func (w *writer) idleLocked() bool {
	return w.inflight == 0 && len(w.ready) == 0 && len(w.later) == 0
}

// takeDeadLocked makes the later writes of records that can no longer be
// written (their shard's fence ended, or they are stale) ready at once: the
// next round ends them without a call, so a stopping shard does not wait
// for their backoff.
func (w *writer) takeDeadLocked() {
	keep := w.later[:0]
	for _, wr := range w.later {
		if wr.d.Stale() || !wr.d.shard.Live() {
			wr.heapIdx = -1
			w.ready = append(w.ready, wr)
			w.dueLocked(wr)
			continue
		}
		wr.heapIdx = len(keep)
		keep = append(keep, wr)
	}
	clear(w.later[len(keep):])
	w.later = keep
	heap.Init(&w.later)
}

// unfence wakes the writer to end the later writes of a shard whose fence
// ended (see takeDeadLocked).
func (w *writer) unfence() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unfenced = true
	w.broadcastLocked()
}

// next waits for ready writes and takes a round of them: at most
// publish.MaxBatchRecords. It returns nil when the writer ends.
func (w *writer) next() []*write {
	w.mu.Lock()
	defer w.mu.Unlock()
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		if w.unfenced {
			w.unfenced = false
			w.takeDeadLocked()
		}
		for len(w.later) > 0 && time.Until(w.later[0].notBefore) <= 0 {
			wr := heap.Pop(&w.later).(*write)
			w.ready = append(w.ready, wr)
			w.dueLocked(wr)
		}
		if w.closed {
			return nil
		}
		if len(w.ready) > 0 && w.ctx.Err() == nil && w.finishing == 0 {
			n := min(len(w.ready), publish.MaxBatchRecords)
			round := slices.Clone(w.ready[:n])
			clear(w.ready[:n])
			w.ready = w.ready[n:]
			w.inflight += n
			return round
		}
		if w.ctx.Err() != nil && (len(w.ready) > 0 || len(w.later) > 0) {
			// Out of time: what is not written stays unsettled.
			round := append(slices.Clone(w.ready), w.later...)
			clear(w.ready)
			w.ready = w.ready[:0]
			clear(w.later)
			w.later = w.later[:0]
			w.inflight += len(round)
			w.mu.Unlock()
			for _, wr := range round {
				w.finish(wr, w.ctx.Err(), false)
			}
			w.mu.Lock()
			continue
		}
		if w.draining && w.idleLocked() {
			w.broadcastLocked()
			return nil
		}
		var due <-chan time.Time
		if len(w.later) > 0 {
			wait := time.Until(w.later[0].notBefore)
			if t == nil {
				t = time.NewTimer(wait)
			} else {
				t.Reset(wait)
			}
			due = t.C
		}
		ch := w.changed.wait()
		w.mu.Unlock()
		select {
		case <-ch:
		case <-due:
		case <-w.ctx.Done():
		}
		w.mu.Lock()
		w.changed.leave(ch)
	}
}

// work writes rounds until the writer ends.
func (w *writer) work() {
	for {
		round := w.next()
		if round == nil {
			return
		}
		w.write(round)
	}
}

// write writes one round: the Kinesis records with PutBatch, the messages of
// each SQS queue with SendBatch, all at once; then finishes each write.
func (w *writer) write(round []*write) {
	cfg := &w.s.e.cfg
	ctx, end := w.ctx, func() {}
	if !w.ordered {
		ctx, end = w.roundContext(round)
	}
	errs := make([]error, len(round))
	unanswered := make([]bool, len(round))
	var recs []publish.Record
	var ri []int
	byURL := map[string][]int{}
	for i, wr := range round {
		switch {
		case wr.d.Stale(), !wr.d.shard.Live():
			// Sought, lost, or its lease not renewed in time: nothing is
			// written for it any more.
			errs[i] = errStale
		case wr.url == "":
			recs = append(recs, wr.rec)
			ri = append(ri, i)
		default:
			byURL[wr.url] = append(byURL[wr.url], i)
		}
	}
	var wg sync.WaitGroup
	if len(recs) > 0 {
		wg.Go(func() {
			for j, res := range cfg.Publisher.PutBatch(ctx, recs) {
				errs[ri[j]], unanswered[ri[j]] = res.Err, res.Unanswered
			}
		})
	}
	for url, idx := range byURL {
		wg.Go(func() {
			ms := make([]publish.QueueMessage, len(idx))
			for j, i := range idx {
				ms[j] = round[i].qmsg
			}
			for j, res := range cfg.Queue.SendBatch(ctx, url, ms) {
				errs[idx[j]], unanswered[idx[j]] = res.Err, res.Unanswered
			}
		})
	}
	wg.Wait()
	end() // before the writes finish: their records' memory may be reused then
	w.mu.Lock()
	w.finishing++
	w.mu.Unlock()
	for i, wr := range round {
		w.finish(wr, errs[i], unanswered[i])
	}
	w.mu.Lock()
	w.finishing--
	w.broadcastLocked()
	w.mu.Unlock()
}

// roundContext (long-running mode) returns the context of a round of
// writes and the function that ends it (call it once the round is done).
// The context ends WriteTimeout after the round began, or when the fence of
// a shard with a write in it lapses: at the fence's deadline as the
// renewals of its lease move it while the round is on the wire (see
// Shard.Fence), so that no write of a shard can still be under way once
// another worker may have taken its lease, yet a round slower than a
// fence (a slow or saturated Kinesis) that the renewals outlive is not cut
// — a cut write may have been applied, and is made again: a second copy.
func (w *writer) roundContext(round []*write) (context.Context, func()) {
	ctx, cancel := context.WithTimeout(w.ctx, w.s.cfg.WriteTimeout)
	// The shards, not the writes: a write's record may be reused once it
	// finished.
	var shards []*Shard
	for _, wr := range round {
		if sh := wr.d.shard; !slices.Contains(shards, sh) {
			shards = append(shards, sh)
		}
	}
	at, fenced := fenceDeadline(shards)
	if !fenced {
		return ctx, cancel
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			at, _ := fenceDeadline(shards)
			if wait := time.Until(at); wait > 0 {
				t.Reset(wait) // renewed meanwhile
				continue
			}
			cancel()
			return
		}
	})
	return ctx, func() {
		close(done)
		wg.Wait()
		cancel()
	}
}

// fenceDeadline returns the earliest deadline of the fences of shards, as
// it stands now; fenced is false when none of them has a fence.
func fenceDeadline(shards []*Shard) (at time.Time, fenced bool) {
	for _, sh := range shards {
		if u, ok := sh.Deadline(); ok && (!fenced || u.Before(at)) {
			at, fenced = u, true
		}
	}
	return at, fenced
}

// errStale marks a write dropped because its record's shard was sought or
// lost since.
var errStale = errors.New("stale")

// finish settles the record of a written write, or leaves it unsettled
// after a failed one, and counts the write done. unanswered says that an
// attempt of the write got no answer (publish.Result.Unanswered): the
// service may hold it once more than err says, which is logged.
func (w *writer) finish(wr *write, err error, unanswered bool) {
	s := w.s
	d := wr.d
	m := d.msg()
	var extra []slog.Attr
	if unanswered {
		extra = append(extra, slog.Bool(AttrUnanswered, true))
		if err == nil {
			s.e.logRecord(s.ctx, slog.LevelWarn, s.cfg.Mode, "lambdaadapter: writing the "+wr.dec.Action.String()+
				" failed at first without an answer, then succeeded; it may have been written twice", m, wr.out, nil, extra...)
		}
	}
	if w.ordered {
		w.unout(wr)
		if err == nil {
			s.e.written.noteBeyond(d)
		}
	}
	if !errors.Is(err, errStale) {
		s.e.cfg.Hooks.Write(observe.Write{Mode: s.cfg.Mode, Kind: writeKindOf(wr.dec.Action), Stream: m.StreamARN,
			ShardID: m.ShardID, SequenceNumber: m.SequenceNumber, Err: err})
	}
	again := false
	switch {
	case errors.Is(err, errStale):
		s.done(d)
	case err != nil && w.again(wr, err):
		// Long-running mode: the handler did its part; only the write
		// failed (throttling longer than a round, an outage), so the write
		// is made again after a backoff, counting no attempt, while later
		// records of its key wait.
		again = true
		wr.failures++
		wr.notBefore = time.Now().Add(s.cfg.Backoff(wr.failures))
		s.e.logRecord(s.ctx, slog.LevelWarn, s.cfg.Mode, "lambdaadapter: writing the "+wr.dec.Action.String()+
			" failed; the write is made again", m, wr.out, err, append(extra, slog.Duration(AttrRetryIn, time.Until(wr.notBefore)))...)
	case err != nil:
		msg := "lambdaadapter: writing the " + wr.dec.Action.String() + " failed; record left unsettled"
		if errors.Is(err, publish.ErrTooLarge) || errors.Is(err, publish.ErrMessageTooLarge) {
			msg = "lambdaadapter: the " + wr.dec.Action.String() + " is too large to write; record left unsettled (see docs/faults.md: oversize records)"
		}
		s.e.logRecord(s.ctx, slog.LevelError, s.cfg.Mode, msg, m, wr.out, err, extra...)
		s.unsettled(d, wr.out, err, nil)
	default:
		if wr.dec.Action == retry.DeadLetter {
			s.e.logRecord(s.ctx, slog.LevelWarn, s.cfg.Mode, "lambdaadapter: record dead-lettered: "+wr.dec.Note, m, wr.out, nil)
		} else {
			s.e.logRecord(s.ctx, slog.LevelInfo, s.cfg.Mode, "lambdaadapter: record will come again as a counted copy ("+wr.dec.Action.String()+")", m, wr.out, nil)
		}
		s.settle(d)
	}
	w.mu.Lock()
	w.inflight--
	if again {
		w.queueLocked(wr)
	}
	w.broadcastLocked()
	w.mu.Unlock()
}

// again (long-running mode) reports whether wr, which failed with err,
// is made again rather than leaving its record unsettled: unless the
// writer is stopping (its context ended), the record's shard is no longer
// live (lost, fenced, or its stop cancelled its handlers), or the session
// stops — then the record comes again from the checkpoint, as any
// unsettled record does — or the write can never be made (too large). A
// shard being handed over or stopping gracefully still makes its writes
// again while it waits for its records: a write that lands settles its
// record, so the next owner does not handle it again.
func (w *writer) again(wr *write, err error) bool {
	if w.ordered || w.ctx.Err() != nil || tooLarge(err) || errors.Is(err, errNoPublisher) {
		return false
	}
	return wr.d.shard.Live() && !w.s.isStopping()
}

// unout (ordered) counts wr no longer out, before its record settles: were
// the settlement seen first, a record before wr without a write of its own
// would look like wr's released write, and a write after it would be
// released too early.
func (w *writer) unout(wr *write) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sw := w.shards[wr.d.shard]; sw != nil {
		sw.out--
		if wr.delayed { // failed before it was due
			wr.delayed = false
			sw.delayed--
		}
	}
}

// drain (Lambda mode) waits until every write that can be made was made —
// or failed, at the latest at the write deadline — and gives up on the rest:
// the writes of records after one that stays unsettled, which Lambda
// delivers again anyway. The workers have ended when it returns.
func (w *writer) drain() {
	w.mu.Lock()
	w.draining = true
	w.broadcastLocked()
	for !w.idleLocked() {
		ch := w.changed.wait()
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
	w.closed = true
	var abandoned [][]*write
	for _, sw := range w.shards {
		abandoned = append(abandoned, sw.pending)
		sw.pending = nil
	}
	w.npending.Store(0)
	w.broadcastLocked()
	w.mu.Unlock()
	w.workers.Wait()
	w.stop()
	for _, q := range abandoned {
		for _, wr := range q {
			w.s.e.logRecord(w.s.ctx, slog.LevelInfo, w.s.cfg.Mode, "lambdaadapter: "+wr.dec.Action.String()+
				" not written: an earlier record of the shard stays unsettled, so Lambda delivers this one again", wr.d.msg(), wr.out, nil)
			w.s.giveUp(wr.d)
		}
	}
}

// close (long-running mode) stops taking writes, waits until those queued
// were written or failed, or until ctx ends; then it cancels what is still
// under way (those records stay unsettled and come again from the
// checkpoint). The workers have ended when it returns.
func (w *writer) close(ctx context.Context) {
	w.mu.Lock()
	w.draining = true
	w.broadcastLocked()
	for !w.idleLocked() && ctx.Err() == nil {
		ch := w.changed.wait()
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		w.mu.Lock()
		w.changed.leave(ch)
	}
	w.mu.Unlock()
	w.stop() // fails what is under way or waiting
	w.workers.Wait()
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

func (wr *write) dueAt() time.Time { return wr.notBefore }
func (wr *write) setHeapIdx(i int) { wr.heapIdx = i }
