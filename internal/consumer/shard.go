package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/settle"
	"github.com/shardsettle/lambdaadapter/lease"
)

// shard is one shard this worker holds the lease of, from the take to the
// stop. It owns what works on the shard — its reader (and the reader's
// fetcher), its checkpointer, its fence timer and its place in the
// settlement engine — starts them in run, and stops them through one path,
// stop, for one of the stopReasons. It then reports the reason to its owner
// (Consumer.shardStopped), which forgets it; the shard itself never changes the
// Consumer's state. Its life:
//
//	reading ──stop asked (ended, gone, handed over, shut down)──▶ stopping ─▶ stopped
//	   │                                                              │
//	   └──lost or fenced: at once, from reading or stopping──────────▶┘
//
// While reading, its records go to the lanes only while its lease is fresh
// (the fence, see fenceMargin): a lease not renewed in time stops the shard
// at once, before any other worker may take it.
type shard struct {
	c  *Consumer
	id string
	es *engine.Shard
	ck *checkpointer

	// life ends, with an abortion as its cause, when the shard must stop
	// at once (lost, fenced): its reader and its handlers' contexts end
	// with it, and nothing more is written for it. work, derived from
	// life, is what the handlers get (the engine shard's fence): a graceful
	// stop past its timeout cancels it alone.
	life     context.Context
	abort    context.CancelCauseFunc
	work     context.Context
	stopWork context.CancelFunc

	stops chan stopRequest // graceful stops asked; the first one wins
	state atomic.Uint32    // a shardState
	done  chan struct{}    // closed once stopped and reported

	// wtok serialises the writes of the lease (renew, checkpoint, release,
	// transfer): each needs the counter the previous one returned. It is a
	// channel, not a mutex, so a writer waits in turn (FIFO) and can give up
	// with its context; lmu guards only the lease value and final, never
	// across a store call, so reading the lease never waits for the store.
	wtok  chan struct{}
	lmu   sync.Mutex
	lease lease.Lease
	final bool // the last write was made (or the lease lost): no more writes

	// rmu serialises starting and stopping the reader (seeks), so the shard
	// has one reader at a time, always; noReader is set, under rmu, once
	// the shard stops reading for good.
	rmu      sync.Mutex
	reader   *reader
	noReader bool

	// endEpoch is the watermark epoch in which the reader read the closed
	// shard to its end (0: not yet). The shard ends once every delivery of
	// that same epoch settled.
	endEpoch atomic.Uint64

	moved chan struct{} // signalled when the watermark moves (a paused reader looks again)

	flow flow // what its readers read, for the load this worker publishes
}

// shardState is where a shard is in its life (see shard).
type shardState uint32

const (
	shardReading  shardState = iota + 1 // reading and checkpointing
	shardStopping                       // a stop is under way
	shardStopped                        // nothing of it runs, nothing is written for it
)

// stopReason is why a shard stops. Lost and fenced stop it at once and
// write nothing; the others are graceful: reading stops, the records in
// flight settle (at most ShutdownTimeout), and the lease's last write takes
// the last checkpoint along.
type stopReason uint8

const (
	stopNone stopReason = iota
	// stopLost: another worker holds the lease now (a write of it was
	// refused, or the table names another owner).
	stopLost
	// stopFenced: the lease was not renewed in time (see fenceMargin);
	// another worker may take it soon.
	stopFenced
	// stopEnded: the closed shard was read to its end and every record
	// settled: SHARD_END is written with the lease's release, so its
	// children may start.
	stopEnded
	// stopGone: the shard no longer exists (trimmed away): the lease is
	// released, and balancing deletes its row.
	stopGone
	// stopHandedOver: another worker asked for the lease: it is transferred
	// to it with the last checkpoint, so that a planned move re-delivers
	// nothing that settled.
	stopHandedOver
	// stopShutdown: Run stops: the lease is released with the last
	// checkpoint, so that other workers take it at once.
	stopShutdown
)

// abrupt reports whether the reason stops the shard at once, writing
// nothing.
func (r stopReason) abrupt() bool { return r == stopLost || r == stopFenced }

func (r stopReason) String() string {
	switch r {
	case stopLost:
		return "lost"
	case stopFenced:
		return "fenced"
	case stopEnded:
		return "ended"
	case stopGone:
		return "gone"
	case stopHandedOver:
		return "handed over"
	case stopShutdown:
		return "shut down"
	}
	return "none"
}

// stopRequest is a graceful stop asked of a shard.
type stopRequest struct {
	reason stopReason
	to     string          // stopHandedOver: the worker that asked
	ctx    context.Context // bounds the wait for the records in flight, besides ShutdownTimeout; nil: none
}

// abortion is the cause of a shard's life ending: an abrupt stopReason.
type abortion struct{ reason stopReason }

func (a abortion) Error() string { return "consumer: shard stopped: lease " + a.reason.String() }

// fenceMargin is how long before another worker may count a lease expired
// this worker stops handing its records out: a lease whose last successful
// write started longer than LeaseDuration - fenceMargin ago (on this
// process's monotonic clock) is dropped locally. Another worker counts the
// lease expired at the earliest LeaseDuration after it read the counter that
// write produced, which it read after the write started; the margin covers
// a lane that checked the fence just before a pause, a write that left just
// before the deadline and is still on the wire, and the rate at which two
// machines' clocks differ.
func fenceMargin(leaseDuration time.Duration) time.Duration { return leaseDuration / 10 }

// newShard returns the shard of the lease held, which this worker took or
// was handed when the write that made it its own started at since. It does
// not start it (run).
func (c *Consumer) newShard(held lease.Lease, since time.Time) *shard {
	s := &shard{c: c, id: held.Key.ShardID, lease: held, wtok: make(chan struct{}, 1), moved: make(chan struct{}, 1),
		stops: make(chan stopRequest, 1), done: make(chan struct{})}
	s.life, s.abort = context.WithCancelCause(c.sess.Context())
	s.work, s.stopWork = context.WithCancel(s.life)
	s.es = engine.NewShard(s.id, engine.Hooks{
		Moved: func(pos settle.Position) {
			s.ck.update(pos)
			select {
			case s.moved <- struct{}{}:
			default:
			}
		},
		Settled:  s.maybeEnd,
		TrackAge: c.obs.WantsInFlight(),
		Lapsed:   func() { s.stopAt(stopFenced) },
	})
	s.es.Fence(s.work)
	s.es.Extend(s.fenceFrom(since))
	s.ck = newCheckpointer(s)
	s.state.Store(uint32(shardReading))
	return s
}

// fenceFrom is the fence's deadline after a write of the lease that started
// at since.
func (s *shard) fenceFrom(since time.Time) time.Time {
	d := s.c.cfg.LeaseDuration
	return since.Add(d - fenceMargin(d))
}

// run is the shard's life: it starts the checkpointer and the reader at
// pos, watches the fence, and on the first stop (asked, or abrupt) stops
// everything and reports to the owner. It returns once everything it
// started has ended.
func (s *shard) run(pos Position) {
	defer close(s.done)
	ckDone := make(chan struct{})
	go func() {
		defer close(ckDone)
		s.ck.loop()
	}()
	s.rmu.Lock()
	s.startReaderLocked(pos, s.es.Watermark().Epoch())
	s.rmu.Unlock()
	fence := time.NewTimer(s.untilFence())
	defer fence.Stop()
	var req stopRequest
	for req.reason == stopNone {
		select {
		case <-s.life.Done():
			req.reason = s.abortReason()
		case req = <-s.stops:
		case <-fence.C:
			s.watchFence(fence)
		}
	}
	s.state.Store(uint32(shardStopping))
	r, err := s.stop(req, fence)
	<-ckDone
	s.state.Store(uint32(shardStopped))
	s.c.shardStopped(s, r, req.to, err)
}

// untilFence is how long until the fence's deadline (newShard sets one).
func (s *shard) untilFence() time.Duration {
	u, ok := s.es.Deadline()
	if !ok {
		return s.c.cfg.LeaseDuration
	}
	return max(time.Until(u), 0)
}

// watchFence handles the fence timer: the shard stops at once when its
// fence lapsed, else the timer is set to the deadline as renewals moved it.
func (s *shard) watchFence(t *time.Timer) {
	if s.es.Lapsed() {
		s.stopAt(stopFenced)
		return
	}
	t.Reset(s.untilFence())
}

// stopAt stops the shard at once for r (lost or fenced): its life ends, so
// its reader and handlers' contexts do, and no record of it starts any
// more. The rest of the stop happens in run. It does not block; the first
// reason wins.
func (s *shard) stopAt(r stopReason) { s.abort(abortion{r}) }

// abortReason is the reason the shard's life ended with.
func (s *shard) abortReason() stopReason {
	var a abortion
	if errors.As(context.Cause(s.life), &a) {
		return a.reason
	}
	return stopLost
}

// stopGracefully asks the shard to stop for r, a graceful reason, unless
// a stop was asked already. It does not block.
func (s *shard) stopGracefully(req stopRequest) {
	select {
	case s.stops <- req:
	default: // a stop was asked already: it wins
	}
}

// stopping reports whether a stop is under way or done.
func (s *shard) stopping() bool { return shardState(s.state.Load()) != shardReading }

// stop is the one way a shard stops, from run: abrupt (lost, fenced) or
// graceful, when a graceful stop turns abrupt meanwhile (the lease lost or
// fenced while records settle) the rest goes as that. It returns the reason
// the shard stopped for, and the error of its last lease write.
func (s *shard) stop(req stopRequest, fence *time.Timer) (stopReason, error) {
	r := req.reason
	if !r.abrupt() {
		r = s.drain(req, fence)
	}
	if r.abrupt() {
		s.stopAt(r)
		s.stopReading()
		s.es.Reset("") // whatever is in flight is stale now: it changes nothing
		s.ck.abandon()
		s.finish()
		return r, nil
	}
	s.stopWork()   // a handler still running (past the timeout) changes nothing now
	s.es.Reset("") // ... nor does what it returns
	var err error
	switch r {
	case stopEnded:
		s.ck.update(settle.Position{Seq: lease.ShardEnd})
		_, err = s.ck.finish(context.Background(), s.c.cfg.Store.Release)
	case stopHandedOver:
		_, err = s.ck.finish(context.Background(), func(ctx context.Context, held lease.Lease) (lease.Lease, error) {
			return s.c.cfg.Store.Transfer(ctx, held, req.to)
		})
		if err != nil && !lost(err) {
			s.c.log.LogAttrs(context.Background(), slog.LevelWarn, "consumer: handing a lease over failed; releasing it",
				slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
			r = stopShutdown
			_, err = s.ck.finish(context.Background(), s.c.cfg.Store.Release)
		}
	default: // gone, shut down
		_, err = s.ck.finish(context.Background(), s.c.cfg.Store.Release)
	}
	s.finish()
	return r, err
}

// drain stops reading for good, gives up the records waiting for a retry
// (they come again from the checkpoint, to the lease's next holder) and
// waits for the records in flight to settle: at most ShutdownTimeout (or
// until req.ctx ends). A planned hand-over then waits longer, up to
// handOverPatience more, with its handlers running and the lease renewed,
// for the records still in flight (a slow handler, a write made again) to
// settle, so that the move re-delivers nothing; it stops waiting when Run's
// graceful stop begins. Past that, with the handlers' contexts cancelled
// (nothing more starts), it waits for the handlers to return and the
// writes under way to end, at most ShutdownTimeout or a write round
// (writeTimeout), whichever is longer: a copy or dead letter under way
// must not land after the lease's last write, whose checkpoint is before
// its record. It returns req.reason, or the abrupt reason that cut it
// short.
func (s *shard) drain(req stopRequest, fence *time.Timer) stopReason {
	c := s.c
	s.stopReading()
	c.sess.Quiesce(s.es)
	var ended <-chan struct{}
	if req.ctx != nil {
		ended = req.ctx.Done()
	}
	idle, cut := s.waitIdle(ended, c.cfg.ShutdownTimeout, fence)
	if !idle && !cut && req.reason == stopHandedOver {
		c.log.LogAttrs(context.Background(), slog.LevelInfo, "consumer: records still in flight after the shutdown timeout; the hand-over waits for them, the lease held",
			slog.String(attrShardID, s.id), slog.Int("in_flight", s.es.Inflight()), slog.Duration("at_most", handOverPatience))
		idle, cut = s.waitIdle(c.leaving, handOverPatience, fence)
	}
	if cut {
		return s.abortReason()
	}
	if idle {
		return req.reason
	}
	c.log.LogAttrs(context.Background(), slog.LevelWarn, "consumer: records still in flight after the shutdown timeout; their handlers' contexts are cancelled",
		slog.String(attrShardID, s.id), slog.String("stop", req.reason.String()), slog.Int("in_flight", s.es.Inflight()))
	s.stopWork()
	c.sess.FenceEnded()
	idle, cut = s.waitIdle(nil, max(c.cfg.ShutdownTimeout, writeTimeout), fence)
	if cut {
		return s.abortReason()
	}
	if !idle {
		c.log.LogAttrs(context.Background(), slog.LevelError, "consumer: records still in flight after their handlers' contexts were cancelled; they come again from the checkpoint, and a copy or dead letter still being written may land as well (a second one)",
			slog.String(attrShardID, s.id), slog.Int("in_flight", s.es.Inflight()))
	}
	return req.reason
}

// handOverPatience is how much longer than ShutdownTimeout a planned
// hand-over waits for its records in flight before it cancels their
// handlers (see drain).
const handOverPatience = 5 * time.Minute

// waitIdle waits until no record of the shard is in flight (idle), for at
// most d or until ended (may be nil) is closed, or until the shard must stop
// at once (cut: lost, or its fence lapsed meanwhile).
func (s *shard) waitIdle(ended <-chan struct{}, d time.Duration, fence *time.Timer) (idle, cut bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-s.es.Idle():
			return true, false
		case <-s.life.Done():
			return false, true
		case <-fence.C:
			s.watchFence(fence)
		case <-t.C:
			return false, false
		case <-ended:
			return false, false
		}
	}
}

// finish marks the lease's last write made: nothing more is written for
// it (a renewal in flight finds it so).
func (s *shard) finish() {
	s.lmu.Lock()
	s.final = true
	s.lmu.Unlock()
}

// held returns the lease as last written.
func (s *shard) held() lease.Lease {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	return s.lease
}

// setLease adopts a lease row that is newer than the one held (read back
// with a handoff request).
func (s *shard) setLease(l lease.Lease) {
	s.lmu.Lock()
	if l.Counter >= s.lease.Counter {
		s.lease = l
	}
	s.lmu.Unlock()
}

// errStopped is the error of a lease write after the shard's last one.
var errStopped = errors.New("consumer: shard stopped")

// write performs one fenced write of the lease, with a deadline, and keeps
// the row it returns. A write that succeeded extends the shard's fence from
// when it started: it bumped the counter that other workers watch. After
// the shard's last write it writes nothing and returns errStopped.
func (s *shard) write(ctx context.Context, op func(context.Context, lease.Lease) (lease.Lease, error)) (lease.Lease, error) {
	select {
	case s.wtok <- struct{}{}:
	case <-ctx.Done():
		return lease.Lease{}, ctx.Err()
	}
	defer func() { <-s.wtok }()
	s.lmu.Lock()
	held, final := s.lease, s.final
	s.lmu.Unlock()
	if final {
		return lease.Lease{}, errStopped
	}
	ctx, cancel := s.c.storeContext(ctx)
	defer cancel()
	start := time.Now()
	l, err := op(ctx, held)
	if err == nil {
		s.lmu.Lock()
		s.lease = l
		s.lmu.Unlock()
		s.es.Extend(s.fenceFrom(start))
	}
	return l, err
}

// renew renews the lease: a lease lost stops the shard at once.
func (s *shard) renew(ctx context.Context) (lease.Lease, error) {
	l, err := s.write(ctx, s.c.cfg.Store.Renew)
	if lost(err) {
		s.stopAt(stopLost)
	}
	return l, err
}

// startReaderLocked starts a reader at pos in epoch e, after stopping the
// current one; s.rmu must be held. It starts none once the shard stopped
// reading for good.
func (s *shard) startReaderLocked(pos Position, e settle.Epoch) {
	s.stopReaderLocked()
	if s.noReader {
		return
	}
	s.reader = s.startReader(pos, e)
}

// stopReaderLocked stops the reader and waits for it to exit; s.rmu must be
// held.
func (s *shard) stopReaderLocked() {
	if s.reader != nil {
		s.reader.stop()
		s.reader = nil
	}
}

// stopReading stops the reader for good.
func (s *shard) stopReading() {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.noReader = true
	s.stopReaderLocked()
}

// maybeEnd asks the shard to stop as ended once the reader read the closed
// shard to its end and every delivery of that epoch settled. Ending is
// conditional on the epoch (settle.Watermark.EndIn), so a seek that starts
// a new epoch at the same moment can never see its new, empty epoch ended.
func (s *shard) maybeEnd() {
	e := settle.Epoch(s.endEpoch.Load())
	wm := s.es.Watermark()
	if e == 0 || wm.Pending() != 0 {
		return
	}
	if err := wm.EndIn(e); err != nil {
		return // not all settled, or sought since
	}
	s.stopGracefully(stopRequest{reason: stopEnded})
}

// errLeaseGone matches the error of a lease write after the lease was lost.
var errLeaseGone = lease.ErrLeaseLost

// lost reports whether err says the lease is no longer held.
func lost(err error) bool { return errors.Is(err, errLeaseGone) }
