package engine

import (
	"container/heap"
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

// Mode is what the engine does with a record that stays unsettled, and how
// it writes.
type Mode uint8

const (
	// ModeLambda: an unsettled record is given up on (the invocation reports
	// it and Lambda delivers it again with every later record of its shard),
	// so no later record of its shard is started, and writes go out in shard
	// order.
	ModeLambda Mode = iota + 1
	// ModeLongRunning: an unsettled record is delivered again in process
	// after a backoff (Message.Attempt counted up), while later records of
	// its partition key wait for it; writes are batched.
	ModeLongRunning
)

// String returns "lambda" or "ecs", the mode's name in logs.
func (m Mode) String() string {
	if m == ModeLongRunning {
		return "ecs"
	}
	return "lambda"
}

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

// turnLimit is how many records a lane handles of one key before it lets
// another ready key have the lane (a key that never runs dry must not keep
// a lane for ever).
const turnLimit = 64

// SessionConfig configures a Session.
type SessionConfig struct {
	// Mode is the session's mode (required).
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
	cutRecords atomic.Bool     // a handler returned after the cut-off: its outcome changed nothing
	ctx        context.Context // the handlers' context
	cancel     context.CancelFunc

	mu sync.Mutex
	// keys is the queue of each partition key, guarded by mu, and in
	// Lambda mode by keysMu instead: there a key queue lives until the
	// session ends, so SubmitAll finds (or makes) the queues of its
	// records holding keysMu only, and holds mu just to queue them, which
	// keeps the lanes' waits for mu short.
	keys     map[string]*keyQueue
	keysMu   sync.Mutex
	ready    []*keyQueue        // keys ready for a lane, in the order they became ready
	parked   dueHeap[*keyQueue] // keys waiting for a record's retry, by time
	queued   int                // records in key queues
	running  int                // keys held by a lane (or the batch being handled)
	closed   bool               // Submit refused; lanes end once nothing is left
	stopping bool               // long-running stop: unsettled records are given up on
	changed  broadcast          // woken when waiters should look again
	// idle are the lanes waiting in take for a ready key, each on its own
	// channel, so that a key made ready wakes one lane, not all of them;
	// waking counts the lanes woken that have not taken the lock since.
	// While a woken lane is on its way, no other is woken: the lane that
	// takes a key wakes the next one if more are ready (takeReadyLocked).
	idle   []*laneWake
	waking int
	// freeKeys are key queues forgotten in long-running mode, for the next
	// new key (keys come and go with every record when they are random).
	freeKeys []*keyQueue
	// deadKeys (Lambda mode) are the partition keys of records given up
	// on: their later records wait for Lambda's redelivery, which keeps
	// per-key order across attempts.
	deadKeys map[string]bool
	ndead    atomic.Int32 // len(deadKeys), read without mu

	w         *writer
	settles   []laneSettles // Lambda mode: each lane's settlements not yet on the watermark
	nlanes    int           // lanes to start
	started   bool          // the lanes started (under mu; Lambda mode starts them with the first records)
	lanes     atomic.Int32  // lanes still running; the last one closes lanesDone
	lanesDone chan struct{}
	timerKick chan struct{}
	timerDone chan struct{}
	quit      chan struct{} // closed by Stop / Wait: the timer ends
	stopWake  func() bool   // stops the cut-off wake-up
}

// closed is a closed channel (the timer of a Lambda-mode session, which has
// none).
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// defaultBackoff is ExponentialBackoff(DefaultBackoffBase, DefaultBackoffMax).
var defaultBackoff = ExponentialBackoff(DefaultBackoffBase, DefaultBackoffMax)

// laneWake is how a waiting lane is woken: a token on ch. woken (under the
// session's lock) says a token was sent and the lane is counted in waking.
type laneWake struct {
	ch    chan struct{} // capacity 1
	woken bool
}

// wakeLaneLocked wakes one waiting lane, unless one is already on its way.
func (s *Session) wakeLaneLocked() {
	if s.waking > 0 || len(s.idle) == 0 {
		return
	}
	w := s.idle[len(s.idle)-1]
	s.idle[len(s.idle)-1] = nil
	s.idle = s.idle[:len(s.idle)-1]
	s.signalLocked(w)
}

// wakeAllLanesLocked wakes every waiting lane (the session may be over).
func (s *Session) wakeAllLanesLocked() {
	for i, w := range s.idle {
		s.signalLocked(w)
		s.idle[i] = nil
	}
	s.idle = s.idle[:0]
}

func (s *Session) signalLocked(w *laneWake) {
	w.woken = true
	s.waking++
	select {
	case w.ch <- struct{}{}:
	default: // a token from an earlier wake-up is still there
	}
}

// errClosed is Submit's error once the session is closed.
var errClosed = errors.New("lambdaadapter: session closed")

// keyQueue is the records of one partition key waiting for a lane, oldest
// first.
type keyQueue struct {
	key         string
	head, tail  *Delivery
	active      bool      // a lane (or the batch) holds the key
	inReady     bool      // in Session.ready
	parkedUntil time.Time // the head waits for its retry until then; zero when not parked
	heapIdx     int
}

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
		e: e, cfg: cfg,
		lanesDone: make(chan struct{}),
		timerDone: closed,
	}
	if cfg.Mode == ModeLongRunning {
		s.timerKick, s.timerDone, s.quit = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	}
	if !cfg.Cutoff.IsZero() {
		s.ctx, s.cancel = context.WithDeadline(ctx, cfg.Cutoff)
	} else {
		s.ctx, s.cancel = context.WithCancel(ctx)
	}
	s.w = newWriter(s)
	s.nlanes = cfg.Lanes
	if e.Batch() {
		s.nlanes = 1
	}
	if cfg.Mode == ModeLongRunning {
		s.startLanesLocked()
	}
	if cfg.Mode == ModeLongRunning {
		go s.timer()
	}
	if cfg.Mode == ModeLongRunning {
		// A cancellation wakes waiting lanes and Submits so they end. (In
		// Lambda mode a waiting lane watches the context itself.)
		s.stopWake = context.AfterFunc(s.ctx, func() {
			s.mu.Lock()
			s.broadcastLocked()
			s.mu.Unlock()
		})
	} else {
		s.stopWake = func() bool { return false }
	}
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
	batch := s.e.Batch()
	s.lanes.Store(int32(s.nlanes))
	if s.cfg.Mode == ModeLambda && !batch {
		s.settles = make([]laneSettles, s.nlanes)
	}
	for i := range s.nlanes {
		go func() {
			defer func() {
				if s.lanes.Add(-1) == 0 {
					close(s.lanesDone)
				}
			}()
			switch {
			case batch:
				s.batchLane()
			case s.settles != nil:
				s.lane(&s.settles[i])
			default:
				s.lane(nil)
			}
		}()
	}
}

// Submit hands d to the session. In long-running mode it waits while
// MaxQueued records wait for a lane, or until ctx ends (then it returns
// ctx's error and d is not submitted). It returns an error, submitting
// nothing, once the session is closed.
func (s *Session) Submit(ctx context.Context, d *Delivery) error {
	if s.cfg.Mode == ModeLambda && s.e.written.take(d.msg()) {
		if s.isClosed() {
			s.e.written.put(d.msg()) // not taken after all
			return errClosed
		}
		d.sess = s
		s.settleWritten(d)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.submitLocked(ctx, d)
}

func (s *Session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// SubmitEach is Submit for each of ds in order, taking the lock once for as
// many as fit: a reader hands over a run of one shard's records at once. A
// delivery whose shard started a new epoch since it was registered is
// dropped (Drop) instead. It returns how many of ds it took, submitted or
// dropped, with Submit's error for the first one it did not take.
func (s *Session) SubmitEach(ctx context.Context, ds []Delivery) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range ds {
		d := &ds[i]
		if d.Stale() {
			d.Drop()
			continue
		}
		if err := s.submitLocked(ctx, d); err != nil {
			return i, err
		}
	}
	return len(ds), nil
}

// submitLocked is Submit under s.mu, which it lets go while it waits.
func (s *Session) submitLocked(ctx context.Context, d *Delivery) error {
	for s.cfg.MaxQueued > 0 && s.queued >= s.cfg.MaxQueued && !s.closed {
		ch := s.waitLocked()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			s.mu.Lock()
			s.leaveLocked(ch)
			return ctx.Err()
		}
		s.mu.Lock()
	}
	if s.closed {
		return errClosed
	}
	d.sess = s
	d.firstAttempt, d.uncounted = d.msg().Attempt, 0
	s.enqueueLocked(d, false)
	s.startLanesLocked()
	return nil
}

// SubmitAll hands every delivery of ds to the session at once, in order
// (Lambda mode hands over a whole invocation), with the key queues'
// bookkeeping allocated in one piece, taking the lock once per
// submitPiece deliveries. Once the session is closed it submits nothing
// more and returns an error (a Close while it runs may leave the rest of
// ds unsubmitted; the Lambda runner closes after its last SubmitAll).
func (s *Session) SubmitAll(ds []Delivery) error {
	var kss [submitPiece]*keyQueue
	var slab []keyQueue
	for len(ds) > 0 {
		piece := ds[:min(len(ds), submitPiece)]
		ds = ds[len(piece):]
		if s.cfg.Mode == ModeLambda {
			s.keysMu.Lock()
			slab = s.keyQueuesOf(piece, kss[:len(piece)], slab, len(ds))
			s.keysMu.Unlock()
			s.mu.Lock()
		} else {
			s.mu.Lock()
			slab = s.keyQueuesOf(piece, kss[:len(piece)], slab, len(ds))
		}
		if s.closed {
			s.mu.Unlock()
			return errClosed
		}
		s.ready = slices.Grow(s.ready, len(piece))
		var known []*Delivery
		for i := range piece {
			d := &piece[i]
			d.sess = s
			d.firstAttempt, d.uncounted = d.msg().Attempt, 0
			if s.cfg.Mode == ModeLambda && s.e.written.take(d.msg()) {
				known = append(known, d)
				continue
			}
			s.enqueueInLocked(kss[i], d, false)
		}
		s.startLanesLocked()
		s.mu.Unlock()
		for _, d := range known {
			s.settleWritten(d)
		}
	}
	return nil
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

// submitPiece is the most deliveries SubmitAll queues under one lock.
const submitPiece = 256

// keyQueuesOf sets kss[i] to the key queue of ds[i], making the new ones
// from slab (allocated as needed, with room for the more deliveries to
// come); it returns what is left of slab. The caller holds the lock that
// guards keys (see Session).
func (s *Session) keyQueuesOf(ds []Delivery, kss []*keyQueue, slab []keyQueue, more int) []keyQueue {
	if s.keys == nil {
		s.keys = make(map[string]*keyQueue, min(len(ds)+more, 1024))
	}
	for i := range ds {
		k := ds[i].Msg.PartitionKey
		ks := s.keys[k]
		if ks == nil {
			if len(slab) == 0 {
				slab = make([]keyQueue, min(len(ds)-i+more, 256))
			}
			ks = &slab[0]
			slab = slab[1:]
			ks.key, ks.heapIdx = k, -1
			s.keys[k] = ks
		}
		kss[i] = ks
	}
	return slab
}

// Close refuses further Submits; the lanes end once every record submitted
// was handled. In long-running mode it also stops retries: a record that
// stays unsettled from now on is given up on.
func (s *Session) Close() {
	s.mu.Lock()
	s.closed = true
	s.startLanesLocked() // with nothing submitted they end at once
	if s.cfg.Mode == ModeLongRunning {
		s.stopping = true
		s.releaseParkedLocked(nil)
	}
	s.broadcastLocked()
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
	s.broadcastLocked()
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
// or running then.
func (s *Session) Wait() (cutOff bool) {
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
	s.closed = true
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

// enqueueLocked puts d into its key queue: last, or first when it waits for
// a retry (it keeps its place before the later records of its key).
func (s *Session) enqueueLocked(d *Delivery, first bool) *keyQueue {
	if s.cfg.Mode == ModeLambda {
		s.keysMu.Lock() // see Session.keys
		defer s.keysMu.Unlock()
	}
	k := d.msg().PartitionKey
	ks := s.keys[k]
	if ks == nil {
		if s.keys == nil {
			s.keys = map[string]*keyQueue{}
		}
		ks = s.newKeyLocked(k)
	}
	s.enqueueInLocked(ks, d, first)
	return ks
}

// newKeyLocked adds an empty queue for key k (a forgotten one again, when
// there is one) and returns it.
func (s *Session) newKeyLocked(k string) *keyQueue {
	var ks *keyQueue
	if n := len(s.freeKeys); n > 0 {
		ks = s.freeKeys[n-1]
		s.freeKeys[n-1] = nil
		s.freeKeys = s.freeKeys[:n-1]
	} else {
		ks = &keyQueue{}
	}
	*ks = keyQueue{key: k, heapIdx: -1}
	s.keys[k] = ks
	return ks
}

// maxFreeKeys bounds Session.freeKeys.
const maxFreeKeys = 1024

// forgetKeyLocked removes ks, which is empty, held by no lane, not ready
// and not parked, and keeps it for a new key.
func (s *Session) forgetKeyLocked(ks *keyQueue) {
	delete(s.keys, ks.key)
	if len(s.freeKeys) < maxFreeKeys {
		*ks = keyQueue{}
		s.freeKeys = append(s.freeKeys, ks)
	}
}

// enqueueInLocked is enqueueLocked into ks, the queue of d's key.
func (s *Session) enqueueInLocked(ks *keyQueue, d *Delivery, first bool) {
	if first {
		d.next = ks.head
		ks.head = d
		if ks.tail == nil {
			ks.tail = d
		}
	} else {
		d.next = nil
		if ks.tail == nil {
			ks.head = d
		} else {
			ks.tail.next = d
		}
		ks.tail = d
	}
	s.queued++
	s.readyLocked(ks)
}

// readyLocked makes ks ready for a lane if it has records, is not held and
// is not waiting for a retry.
func (s *Session) readyLocked(ks *keyQueue) {
	if ks.head == nil || ks.active || ks.inReady || !ks.parkedUntil.IsZero() {
		return
	}
	ks.inReady = true
	s.ready = append(s.ready, ks)
	if s.e.Batch() {
		s.broadcastLocked() // the batch lane waits as the others do
	} else {
		s.wakeLaneLocked()
	}
}

// popLocked takes the first record of ks.
func (s *Session) popLocked(ks *keyQueue) *Delivery {
	d := ks.head
	ks.head = d.next
	if ks.head == nil {
		ks.tail = nil
	}
	d.next = nil
	s.queued--
	if s.cfg.MaxQueued > 0 {
		s.broadcastLocked() // a Submit may go on
	}
	return d
}

// releaseLocked gives ks back after a lane held it. An empty key queue is
// forgotten in long-running mode (keys come and go for ever); a Lambda-mode
// session keeps it until the invocation ends, so that later records of the
// key (the runner submits an invocation a chunk at a time) find it: what
// the session allocates then does not depend on how fast the lanes ran.
func (s *Session) releaseLocked(ks *keyQueue) {
	ks.active = false
	s.running--
	if ks.head == nil && ks.parkedUntil.IsZero() {
		if s.cfg.Mode != ModeLambda {
			s.forgetKeyLocked(ks)
		}
	} else {
		s.readyLocked(ks)
	}
	s.broadcastLocked()
}

// waitLocked registers a waiter and returns the channel closed at the next
// change.
func (s *Session) waitLocked() <-chan struct{} { return s.changed.wait() }

// broadcastLocked wakes every waiter. The woken are no longer counted, so
// the next broadcasts (a SubmitAll readies many keys under one lock) cost
// nothing until someone waits again.
func (s *Session) broadcastLocked() {
	if s.closed {
		s.wakeAllLanesLocked() // they end once the session is empty
	}
	s.changed.wake()
}

// leaveLocked uncounts a waiter that stops waiting on ch before a
// broadcast closed it.
func (s *Session) leaveLocked(ch <-chan struct{}) { s.changed.leave(ch) }

// emptyLocked reports whether nothing is left for a lane to do.
func (s *Session) emptyLocked() bool {
	return s.queued == 0 && s.running == 0 && len(s.parked) == 0
}

// take waits for a ready key and holds it. It returns nil when the lane
// should end: the session is closed and empty, or its context ended. The
// lane waits on *wp, its own (see Session.idle), made when first needed.
//
// lb, the Lambda-mode lane's settlements, is handed to the watermarks before
// the lane waits.
func (s *Session) take(lb *laneSettles, wp **laneWake) *keyQueue {
	s.mu.Lock()
	defer s.mu.Unlock()
	flushed := false
	for {
		if s.ctx.Err() != nil {
			return nil
		}
		if ks := s.takeReadyLocked(); ks != nil {
			return ks
		}
		if s.closed && s.emptyLocked() {
			s.broadcastLocked() // the other lanes end too
			return nil
		}
		if lb != nil && !flushed {
			s.mu.Unlock()
			s.flushSettles(lb)
			s.mu.Lock()
			flushed = true
			continue // look again: the lock was let go
		}
		if *wp == nil {
			*wp = &laneWake{ch: make(chan struct{}, 1)}
		}
		w := *wp
		s.idle = append(s.idle, w)
		s.mu.Unlock()
		select {
		case <-w.ch:
		case <-s.ctx.Done(): // the cut-off (Lambda mode), or a cancellation
		}
		s.mu.Lock()
		if w.woken {
			w.woken = false
			s.waking--
			select {
			case <-w.ch: // woken, but the context's end came first
			default:
			}
		} else if i := slices.Index(s.idle, w); i >= 0 {
			s.idle = slices.Delete(s.idle, i, i+1)
		}
	}
}

// takeReadyLocked holds the first ready key and returns it, or nil when
// none is ready or the session's context ended.
func (s *Session) takeReadyLocked() *keyQueue {
	if len(s.ready) == 0 || s.ctx.Err() != nil {
		return nil
	}
	ks := s.ready[0]
	s.ready[0] = nil
	s.ready = s.ready[1:]
	ks.inReady = false
	ks.active = true
	s.running++
	if len(s.ready) > 0 {
		s.wakeLaneLocked() // one more lane may help
	}
	return ks
}

// lane handles keys until take says to end. lb, in Lambda mode, collects
// the lane's settlements.
func (s *Session) lane(lb *laneSettles) {
	var w *laneWake // made the first time the lane waits
	for {
		ks := s.take(lb, &w)
		if ks == nil {
			s.flushSettles(lb)
			return
		}
		s.runKey(ks, lb)
	}
}

// runKey handles the records of ks one after another, until its queue is
// empty, its head waits for a retry, the lane has had its turn, or the
// session's context ended; then it lets ks go and goes on with the next
// ready key, under the same lock, and returns once none is ready (the lane
// then waits in take).
func (s *Session) runKey(ks *keyQueue, lb *laneSettles) {
	if s.cfg.Mode == ModeLambda {
		s.runKeyLambda(ks, lb)
		return
	}
	// One lock per record: the lane lets a key go, takes the next ready
	// one and pops its first record under the same lock.
	s.mu.Lock()
	for turn := 0; ; turn++ {
		if ks.head == nil || !ks.parkedUntil.IsZero() || s.ctx.Err() != nil || (turn >= turnLimit && len(s.ready) > 0) {
			s.releaseLocked(ks)
			if ks = s.takeReadyLocked(); ks == nil {
				s.mu.Unlock()
				return
			}
			turn = 0
		}
		d := s.popLocked(ks)
		s.mu.Unlock()
		s.handle(d, nil)
		s.mu.Lock()
	}
}

// runKeyLambda is runKey in Lambda mode, where no record is ever put back
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
		if ks.head == nil || s.ctx.Err() != nil || (turn >= turnLimit && len(s.ready) > 0) {
			s.releaseLocked(ks)
			if ks = s.takeReadyLocked(); ks == nil {
				s.mu.Unlock()
				return
			}
			turn = 0
		}
		run := s.popRunLocked(ks, max(turnLimit-turn, 1))
		s.mu.Unlock()
		for d := run; d != nil; {
			if s.ctx.Err() != nil {
				s.mu.Lock()
				s.unpopRunLocked(ks, d)
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

// popRunLocked takes up to n (≥ 1) records from the head of ks, which has
// at least one, and returns the first; they stay linked through next.
func (s *Session) popRunLocked(ks *keyQueue, n int) *Delivery {
	first, last := ks.head, ks.head
	k := 1
	for ; k < n && last.next != nil; k++ {
		last = last.next
	}
	ks.head = last.next
	if ks.head == nil {
		ks.tail = nil
	}
	last.next = nil
	s.queued -= k
	if s.cfg.MaxQueued > 0 {
		s.broadcastLocked() // a Submit may go on
	}
	return first
}

// unpopRunLocked puts the records linked from d back at the head of ks.
func (s *Session) unpopRunLocked(ks *keyQueue, d *Delivery) {
	last := d
	s.queued++
	for last.next != nil {
		last = last.next
		s.queued++
	}
	last.next = ks.head
	ks.head = d
	if ks.tail == nil {
		ks.tail = last
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
// mode).
func (s *Session) deadKey(d *Delivery) bool {
	if s.cfg.Mode != ModeLambda || s.ndead.Load() == 0 {
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
	s.mu.Lock()
	k := d.msg().PartitionKey
	ks := s.keys[k]
	if ks == nil {
		if s.keys == nil {
			s.keys = map[string]*keyQueue{}
		}
		ks = s.newKeyLocked(k)
	}
	if ks.inReady {
		// Not ready any more: its new head waits for its retry.
		for i, r := range s.ready {
			if r == ks {
				s.ready = append(s.ready[:i], s.ready[i+1:]...)
				break
			}
		}
		ks.inReady = false
	}
	ks.parkedUntil = time.Now().Add(wait)
	s.enqueueLocked(d, true)
	if ks.heapIdx >= 0 {
		heap.Fix(&s.parked, ks.heapIdx)
	} else {
		heap.Push(&s.parked, ks)
	}
	s.mu.Unlock()
	select {
	case s.timerKick <- struct{}{}:
	default:
	}
}

// releaseParkedLocked gives up on the records waiting for a retry: those of
// sh, or every one when sh is nil.
func (s *Session) releaseParkedLocked(sh *Shard) {
	var given []*Delivery
	for i := 0; i < len(s.parked); {
		ks := s.parked[i]
		if sh != nil && ks.head.shard != sh {
			i++
			continue
		}
		heap.Remove(&s.parked, i)
		ks.parkedUntil = time.Time{}
		given = append(given, s.popLocked(ks))
		if ks.head == nil && !ks.active {
			s.forgetKeyLocked(ks)
		} else {
			s.readyLocked(ks)
		}
	}
	// Done outside the key bookkeeping, but under mu: cheap, and keeps the
	// given-up records from racing a retry timer.
	for _, d := range given {
		d.shard.block(d)
		s.done(d)
	}
}

// timer makes parked keys ready when their retry is due (long-running
// mode). It ends when the session ends.
func (s *Session) timer() {
	defer close(s.timerDone)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		s.mu.Lock()
		now := time.Now()
		var next time.Duration = -1
		for len(s.parked) > 0 {
			ks := s.parked[0]
			if wait := ks.parkedUntil.Sub(now); wait > 0 {
				next = wait
				break
			}
			heap.Pop(&s.parked)
			ks.parkedUntil = time.Time{}
			s.readyLocked(ks)
		}
		s.mu.Unlock()
		t.Stop()
		if next >= 0 {
			t.Reset(next)
		}
		select {
		case <-t.C:
		case <-s.timerKick:
		case <-s.quit:
			return
		}
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

func (ks *keyQueue) dueAt() time.Time { return ks.parkedUntil }
func (ks *keyQueue) setHeapIdx(i int) { ks.heapIdx = i }
