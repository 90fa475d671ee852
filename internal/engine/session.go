package engine

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
)

// Backoff returns how long to wait before delivering a record again after
// its n-th unsettled attempt in process (n ≥ 1).
type Backoff func(n int) time.Duration

// Default backoff of in-process redelivery.
const (
	DefaultBackoffBase = 500 * time.Millisecond
	DefaultBackoffMax  = 30 * time.Second
)

// ExponentialBackoff returns a Backoff that waits base × 2^(n-1), at most
// max, each wait drawn evenly from its upper half (jitter keeps records that
// failed together from coming back together).
func ExponentialBackoff(base, max time.Duration) Backoff {
	return func(n int) time.Duration {
		d := max
		if n < 32 {
			d = min(base<<(n-1), max)
		}
		if d <= 1 {
			return d
		}
		half := d / 2
		return half + rand.N(d-half+1)
	}
}

// SessionConfig configures a Session.
type SessionConfig struct {
	// Mode is the session's mode (required: Start panics without one).
	Mode Mode
	// Lanes is the number of partition keys handled at once (≥ 1). With a
	// BatchHandler there is one lane, which hands over batches.
	Lanes int
	// Cutoff (Lambda mode): no record starts after it, the handlers'
	// context ends at it, and an outcome returned later changes nothing.
	// Zero means none.
	Cutoff time.Time
	// WriteDeadline (Lambda mode): writes end at it; what is not written by
	// then stays unsettled. Zero means no deadline.
	WriteDeadline time.Time
	// MaxQueued (long-running mode): Submit waits while this many records
	// wait for a lane, so a key whose record is retried cannot pile up
	// records without bound. 0 means no limit.
	MaxQueued int
	// Backoff (long-running mode) spaces in-process redeliveries; nil means
	// ExponentialBackoff(DefaultBackoffBase, DefaultBackoffMax).
	Backoff Backoff
	// BatchSize and BatchWindow (long-running mode, BatchHandler): a batch
	// holds at most BatchSize records and closes BatchWindow after its
	// first.
	BatchSize   int
	BatchWindow time.Duration
	// WriteCalls (long-running mode) is the number of write calls in flight
	// at once (default 4).
	WriteCalls int
	// WriteTimeout (long-running mode) bounds one round of writes, retries
	// included (default 30s); the lapse of a fence of its shards ends it
	// sooner. A write that fails within it is made again (writer.again) or
	// leaves its record unsettled, to be delivered again.
	WriteTimeout time.Duration
}

// Session runs the handler over the records submitted to it: in Lambda mode
// one invocation, in long-running mode the life of a consumer. It owns its
// lanes, its retry timer and its writer; they end before Wait (Lambda) or
// Stop (long-running) returns.
type Session struct {
	e          *Engine
	cfg        SessionConfig
	pol        *policy         // what the mode decides
	cutRecords atomic.Bool     // a handler returned after the cut-off: its outcome changed nothing
	ctx        context.Context // the handlers' context
	cancel     context.CancelFunc

	mu       sync.Mutex
	sched    keyScheduler // the key queues, and the lanes waiting for them; guarded by mu
	stopping bool         // long-running stop: unsettled records are given up on
	// deadKeys (Lambda mode) are the partition keys of records given up
	// on: their later records wait for Lambda's redelivery, which keeps
	// per-key order across attempts.
	deadKeys map[string]bool
	ndead    atomic.Int32 // len(deadKeys), read without mu

	w *writer
	// settles (Lambda mode) is each lane's settlements not yet on the
	// watermark, once the lanes started (the inline runner may flush them
	// meanwhile).
	settles   atomic.Pointer[[]laneSettles]
	nlanes    int          // lanes to start
	started   bool         // the lanes, or the inline runner, started (under mu)
	lanes     atomic.Int32 // lanes still running; the last one closes lanesDone
	lanesDone chan struct{}
	timerDone chan struct{}
	quit      chan struct{} // closed by Stop / Wait: the timer ends
	stopWake  func() bool   // stops the cut-off wake-up
	// inlining (under mu): Submit keeps the records for the inline runner,
	// which Close starts (Lambda mode, see inline.go); watching: Wait
	// watches the runner.
	inlining, watching bool
	inl                inlineRun
}

// closed is a closed channel (the timer of a Lambda-mode session, which has
// none).
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// defaultBackoff is ExponentialBackoff(DefaultBackoffBase, DefaultBackoffMax).
var defaultBackoff = ExponentialBackoff(DefaultBackoffBase, DefaultBackoffMax)

// errClosed is Submit's error once the session is closed.
var errClosed = errors.New("lambdaadapter: session closed")

// Start starts a session of the engine. ctx is the parent of the handlers'
// context. The caller submits records, then ends the session with Close and
// Wait (Lambda mode) or Stop (long-running mode).
func (e *Engine) Start(ctx context.Context, cfg SessionConfig) *Session {
	if cfg.Lanes < 1 {
		cfg.Lanes = 1
	}
	if cfg.Backoff == nil {
		cfg.Backoff = defaultBackoff
	}
	if cfg.WriteCalls < 1 {
		cfg.WriteCalls = 4
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	s := &Session{
		e: e, cfg: cfg, pol: policyOf(cfg.Mode),
		lanesDone: make(chan struct{}),
		timerDone: closed,
	}
	if !cfg.Cutoff.IsZero() {
		s.ctx, s.cancel = context.WithDeadline(ctx, cfg.Cutoff)
	} else {
		s.ctx, s.cancel = context.WithCancel(ctx)
	}
	s.sched.init(&s.mu, schedConfig{keep: s.pol.keepKeys, batch: e.Batch(), maxQueued: cfg.MaxQueued,
		parking: s.pol.parking})
	s.w = newWriter(s)
	s.nlanes = cfg.Lanes
	if e.Batch() {
		s.nlanes = 1
	}
	s.pol.start(s)
	return s
}

// Context returns the handlers' context.
func (s *Session) Context() context.Context { return s.ctx }

// startLanesLocked starts the lanes, once. Lambda mode starts them when the
// invocation's records are in their queues, so no lane parks first and
// must be woken.
func (s *Session) startLanesLocked() {
	if s.started {
		return
	}
	s.started = true
	s.spawnLanesLocked(s.nlanes)
}

// spawnLanesLocked starts n lanes, counted in s.lanes.
func (s *Session) spawnLanesLocked(n int) {
	batch := s.e.Batch()
	s.lanes.Add(int32(n))
	var settles []laneSettles
	if s.pol.laneSettles && !batch {
		settles = make([]laneSettles, n)
		s.settles.Store(&settles)
	}
	for i := range n {
		go func() {
			defer s.laneEnded()
			switch {
			case batch:
				s.batchLane()
			case settles != nil:
				s.lane(&settles[i])
			default:
				s.lane(nil)
			}
		}()
	}
}

// laneEnded counts a lane (or the inline runner) out; the last one closes
// lanesDone.
func (s *Session) laneEnded() {
	if s.lanes.Add(-1) == 0 {
		close(s.lanesDone)
	}
}

// Submit hands ds, registered with their shards (Shard.Deliver,
// Shard.DeliverGroup), to the session, in order, and returns how many of
// them it took: the engine owns a delivery it took until it has finished
// with it. A delivery whose shard started a new epoch since it was
// registered is finished without its handler. Once the session is closed
// Submit takes no more and returns an error; a delivery it did not take is
// still the caller's (see Delivery.Drop).
//
// In long-running mode Submit takes the lock once for as many deliveries
// as fit (a reader hands over a run of one shard's records) and waits
// while MaxQueued records wait for a lane, or until ctx ends: it then
// returns ctx's error. In Lambda mode it never waits: with a per-record
// handler it keeps ds for the inline runner, which Close starts (see
// inline.go); with a BatchHandler, or for the records the inline runner
// hands to the lanes, it queues an invocation, or a chunk of one, with the
// key queues' bookkeeping allocated in one piece, taking the lock once per
// submitPiece deliveries. A record whose write an earlier invocation made
// is settled without its handler (see written).
func (s *Session) Submit(ctx context.Context, ds []Delivery) (int, error) {
	return s.pol.submit(s, ctx, ds)
}

// submitLongRunning is Submit in long-running mode.
func (s *Session) submitLongRunning(ctx context.Context, ds []Delivery) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range ds {
		d := &ds[i]
		if d.Stale() {
			d.Drop()
			continue
		}
		if err := s.sched.waitRoom(ctx); err != nil {
			return i, err
		}
		if s.sched.closed {
			return i, errClosed
		}
		d.sess = s
		d.firstAttempt, d.uncounted = d.msg().Attempt, 0
		s.sched.push(d, false)
		s.startLanesLocked()
	}
	return len(ds), nil
}

// submitLambda is Submit in Lambda mode. A Close while it runs may leave
// the rest of ds untaken; the Lambda runner closes after its last Submit.
func (s *Session) submitLambda(_ context.Context, ds []Delivery) (int, error) {
	s.mu.Lock()
	if s.inlining {
		s.inl.parts = append(s.inl.parts, ds)
		s.inl.n += len(ds)
		s.mu.Unlock()
		return len(ds), nil
	}
	s.mu.Unlock()
	return s.pushLambda(ds, false)
}

// pushLambda is submitLambda once the records go to the lanes; handOver:
// the inline runner's records, which go to the lanes after Close.
func (s *Session) pushLambda(ds []Delivery, handOver bool) (int, error) {
	var kss [submitPiece]*keyQueue
	var slab []keyQueue
	for taken := 0; taken < len(ds); {
		piece := ds[taken:min(len(ds), taken+submitPiece)]
		slab = s.sched.lockQueuesOf(piece, kss[:len(piece)], slab, len(ds)-taken-len(piece))
		if s.sched.closed && !handOver {
			s.mu.Unlock()
			return taken, errClosed
		}
		s.sched.ready = slices.Grow(s.sched.ready, len(piece))
		var known []*Delivery
		for i := range piece {
			d := &piece[i]
			d.sess = s
			d.firstAttempt, d.uncounted = d.msg().Attempt, 0
			if s.e.written.take(d.msg()) {
				known = append(known, d)
				continue
			}
			s.sched.pushTo(kss[i], d, false)
		}
		s.startLanesLocked()
		s.mu.Unlock()
		for _, d := range known {
			s.settleWritten(d)
		}
		taken += len(piece)
	}
	return len(ds), nil
}

// settleWritten settles d, whose write an earlier invocation in this
// execution environment made while a record before it stayed unsettled
// (see written): its handler ran and what it asked for was written, so it
// is not run again.
func (s *Session) settleWritten(d *Delivery) {
	s.e.logRecord(s.ctx, slog.LevelInfo, s.cfg.Mode,
		"lambdaadapter: record settled without its handler: an earlier invocation wrote its copy, delay message or dead letter", d.msg(), message.Outcome{}, nil)
	s.settle(d)
}

// submitPiece is the most deliveries Submit queues under one lock in
// Lambda mode.
const submitPiece = 256

// Close refuses further Submits; the lanes end once every record submitted
// was handled. In Lambda mode with a per-record handler it starts the
// inline runner (see inline.go). In long-running mode it also stops
// retries: a record that stays unsettled from now on is given up on.
func (s *Session) Close() {
	s.mu.Lock()
	s.sched.close()
	if s.inlining {
		s.startInlineLocked()
	}
	s.startLanesLocked() // with nothing submitted they end at once
	s.pol.close(s)
	s.sched.broadcast()
	s.mu.Unlock()
}

// Quiesce makes sh give up on its records instead of delivering them again:
// the ones waiting for a retry now, and any that stays unsettled from now
// on; records of sh after one given up on are not started. Long-running
// mode calls it before handing a shard over or stopping, so the shard
// settles what it can, quickly, and leaves the rest to its next reader.
func (s *Session) Quiesce(sh *Shard) {
	sh.quiesce()
	s.mu.Lock()
	s.releaseParkedLocked(sh)
	s.sched.broadcast()
	s.mu.Unlock()
}

// FenceEnded tells the session that a shard's fence context ended (its
// records may no longer start or be written): that shard's writes waiting
// to be made again end at once instead of after their backoff, so that a
// stopping shard need not wait for them.
func (s *Session) FenceEnded() { s.w.unfence() }

// Wait (Lambda mode) waits until every submitted record was handled and
// every write that can be made was made, or until the cut-off (then it
// waits for the writes of what settled by then, up to the write deadline).
// Records a lane is still handling at the cut-off keep their goroutine until
// their handler returns, but change nothing. Call Close first.
//
// Wait reports whether the cut-off came first: records were still waiting
// or running then. While the inline runner runs, Wait watches it and hands
// the rest of the invocation to the lanes once its handlers prove slow.
func (s *Session) Wait() (cutOff bool) {
	s.watchInline()
	select {
	case <-s.lanesDone:
	case <-s.ctx.Done():
		select {
		case <-s.lanesDone:
		default:
			cutOff = true
		}
	}
	// Settlements a lane still holds (it is in a handler at the cut-off)
	// count, as they would have had they reached the watermark at once.
	s.flushAllSettles()
	s.w.drain()
	s.mu.Lock()
	s.sched.close()
	s.mu.Unlock()
	s.stopWake()
	s.cancel()
	if s.quit != nil {
		close(s.quit)
	}
	<-s.timerDone
	return cutOff || s.cutRecords.Load()
}

// Stop (long-running mode) ends the session: it stops retries (Close),
// waits until the records in flight were handled and written or ctx ends,
// then cancels the handlers' context and waits for the lanes once more, up
// to grace; the writes still under way are cancelled (their records stay
// unsettled). It returns false when a handler did not return within grace:
// it ignores its cancelled context, and what it returns changes nothing.
// Every goroutine of the session but such a handler has ended when Stop
// returns.
func (s *Session) Stop(ctx context.Context, grace time.Duration) bool {
	s.Close()
	ok := true
	select {
	case <-s.lanesDone:
	case <-ctx.Done():
		s.cancel()
		t := time.NewTimer(grace)
		select {
		case <-s.lanesDone:
		case <-t.C:
			ok = false
		}
		t.Stop()
	}
	s.w.close(ctx)
	s.stopWake()
	s.cancel()
	if s.quit != nil {
		close(s.quit)
	}
	<-s.timerDone
	return ok
}

// lane handles keys until the scheduler says to end. lb, in Lambda mode,
// collects the lane's settlements, which it hands to the watermarks before
// it waits for a key.
func (s *Session) lane(lb *laneSettles) {
	var w *laneWake // made the first time the lane waits
	var idle func()
	if lb != nil {
		idle = func() { s.flushSettles(lb) }
	}
	for {
		ks := s.sched.take(s.ctx, &w, idle)
		if ks == nil {
			s.flushSettles(lb)
			return
		}
		s.pol.runKey(s, ks, lb)
	}
}

// runKeyLongRunning handles the records of ks one after another, until
// its queue is empty, its head waits for a retry, the lane has had its
// turn, or the session's context ended; then it lets ks go and goes on with
// the next ready key, under the same lock, and returns once none is ready
// (the lane then waits in take). lb is nil in long-running mode.
func (s *Session) runKeyLongRunning(ks *keyQueue, _ *laneSettles) {
	// One lock per record: the lane lets a key go, takes the next ready
	// one and pops its first record under the same lock.
	s.mu.Lock()
	for turn := 0; ; turn++ {
		if s.sched.turnOver(s.ctx, ks, turn) {
			if ks = s.sched.switchKey(s.ctx, ks); ks == nil {
				s.mu.Unlock()
				return
			}
			turn = 0
		}
		d := s.sched.pop(ks)
		s.mu.Unlock()
		s.handle(d, nil)
		s.mu.Lock()
	}
}

// runKeyLambda is runKeyLongRunning in Lambda mode, where no record is ever put back
// into its key queue (an unsettled record is given up on, not parked): it
// takes the records of ks a run at a time, up to what is left of the turn,
// under one lock, and handles them one after another. The records of a run
// not started when the session's context ends go back to the head of the
// queue, where they were. The lane's settlements go to the watermark
// together (see laneSettles). One lock per run: the lane lets a key go,
// takes the next ready one and pops its first run under the same lock.
func (s *Session) runKeyLambda(ks *keyQueue, lb *laneSettles) {
	s.mu.Lock()
	for turn := 0; ; {
		if s.sched.turnOver(s.ctx, ks, turn) {
			if ks = s.sched.switchKey(s.ctx, ks); ks == nil {
				s.mu.Unlock()
				return
			}
			turn = 0
		}
		run := s.sched.popRun(ks, max(turnLimit-turn, 1))
		s.mu.Unlock()
		for d := run; d != nil; {
			if s.ctx.Err() != nil {
				s.mu.Lock()
				s.sched.unpopRun(ks, d)
				s.mu.Unlock()
				break
			}
			next := d.next
			d.next = nil
			s.handle(d, lb)
			d = next
			turn++
		}
		s.mu.Lock()
	}
}

// handle runs the handler for d (unless d is stale or after a record of its
// shard given up on) and concludes its outcome. lb, when not nil, collects
// d's settlement (a Lambda-mode lane's).
func (s *Session) handle(d *Delivery, lb *laneSettles) {
	switch {
	case d.Stale():
		s.done(d)
		return
	case d.shard.after(d) || s.deadKey(d):
		s.done(d) // Lambda delivers it again / the next reader reads it
		return
	case !d.shard.Live():
		// The shard's lease is being given up, or was not renewed in time
		// (long-running mode): no record of it starts any more. It comes
		// again from the checkpoint, to whoever holds the lease next.
		s.giveUp(d)
		return
	}
	// A record concluded without its handler (poison, too old) gets its
	// span too, ended with what became of it.
	s.startSpan(d)
	if d.Poison != nil {
		s.conclude(d, message.Drop(d.Poison), nil, nil, lb)
		return
	}
	if age, old := s.tooOld(d); old {
		s.expire(d, age, lb)
		return
	}
	var start time.Time
	if s.e.cfg.Hooks.WantsRecords() {
		start = time.Now()
	}
	out, replyErr := s.call(d)
	if !start.IsZero() {
		d.observed().handled = time.Since(start)
	}
	s.conclude(d, out, replyErr, nil, lb)
}

// deadKey reports whether a record of d's key was given up on (Lambda
// mode: see deadKeyOf).
func (s *Session) deadKey(d *Delivery) bool {
	if s.ndead.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadKeys[d.msg().PartitionKey]
}

// park puts d back at the head of its key queue to be delivered again after
// wait, with its attempt counted up when counted; later records of its key
// wait for it.
func (s *Session) park(d *Delivery, wait time.Duration, counted bool) {
	// The redelivery gets a message of its own: the handler that had the
	// last one may keep it (Message: yours to keep), unchanged.
	m := new(message.Message)
	*m = *d.msg()
	d.again = m
	switch {
	case !counted:
		d.uncounted++
	case m.Attempt < math.MaxInt:
		m.Attempt++
	}
	until := time.Now().Add(wait)
	s.mu.Lock()
	s.sched.park(d, until)
	s.mu.Unlock()
	s.sched.kick()
}

// releaseParkedLocked gives up on the records waiting for a retry: those of
// sh, or every one when sh is nil.
func (s *Session) releaseParkedLocked(sh *Shard) {
	var match func(*Delivery) bool
	if sh != nil {
		match = func(d *Delivery) bool { return d.shard == sh }
	}
	given := s.sched.unparkHeads(match, nil)
	// Done outside the key bookkeeping, but under mu: cheap, and keeps the
	// given-up records from racing a retry timer.
	for _, d := range given {
		d.shard.block(d)
		s.done(d)
	}
}

// done finishes d: the engine will not touch it again. Once d.Ref is
// released, d itself may be reused (its answer's slab, long-running mode):
// nothing of d is read after it.
func (s *Session) done(d *Delivery) {
	sh := d.shard
	d.Ref.Release()
	sh.track(-1)
}
