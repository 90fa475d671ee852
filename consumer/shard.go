package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/settle"
)

// shard is one shard this worker holds: its lease, its place in the
// settlement engine (watermark and deliveries), its reader and its
// checkpointer.
type shard struct {
	c  *Consumer
	id string
	es *engine.Shard
	ck *checkpointer

	// wtok serialises the writes of the lease (renew, checkpoint, release,
	// transfer): each needs the counter the previous one returned. It is a
	// channel, not a mutex, so a writer waits in turn (FIFO) and can give up
	// with its context; lmu guards only the lease value, never across a
	// store call, so reading the lease never waits for the store.
	wtok  chan struct{}
	lmu   sync.Mutex
	lease lease.Lease

	// rmu serialises starting and stopping the reader (seeks), so the shard
	// has one reader at a time, always.
	rmu    sync.Mutex
	reader *reader

	// endEpoch is the watermark epoch in which the reader read the closed
	// shard to its end (0: not yet). The shard ends once every delivery of
	// that same epoch settled.
	endEpoch atomic.Uint64
	finished atomic.Bool // SHARD_END written (or being written)
	leaving  atomic.Bool // handed over, lost or stopped: no new reader
	handing  atomic.Bool // being handed over to another worker

	moved chan struct{} // signalled when the watermark moves (a paused reader looks again)
}

func (c *Consumer) newShard(l lease.Lease) *shard {
	s := &shard{c: c, id: l.Key.ShardID, lease: l, wtok: make(chan struct{}, 1), moved: make(chan struct{}, 1)}
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
	})
	s.ck = newCheckpointer(s)
	return s
}

// held returns the lease as last written.
func (s *shard) held() lease.Lease {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	return s.lease
}

// setLease adopts a lease row that is newer than the one held (taken again,
// or read back with a handoff request).
func (s *shard) setLease(l lease.Lease) {
	s.lmu.Lock()
	if l.Counter >= s.lease.Counter {
		s.lease = l
	}
	s.lmu.Unlock()
}

// write performs one fenced write of the lease, with a deadline, and keeps
// the row it returns.
func (s *shard) write(ctx context.Context, op func(context.Context, lease.Lease) (lease.Lease, error)) (lease.Lease, error) {
	select {
	case s.wtok <- struct{}{}:
	case <-ctx.Done():
		return lease.Lease{}, ctx.Err()
	}
	defer func() { <-s.wtok }()
	ctx, cancel := s.c.storeContext(ctx)
	defer cancel()
	l, err := op(ctx, s.held())
	if err == nil {
		s.lmu.Lock()
		s.lease = l
		s.lmu.Unlock()
	}
	return l, err
}

// renew renews the lease.
func (s *shard) renew(ctx context.Context) (lease.Lease, error) {
	return s.write(ctx, s.c.cfg.Store.Renew)
}

// release frees the lease with the final checkpoint, in one conditional
// write (checkpointer.finish).
func (s *shard) release(ctx context.Context) {
	if _, err := s.ck.finish(ctx, s.c.cfg.Store.Release); err != nil {
		s.c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: releasing a lease failed; it expires instead", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
		return
	}
	s.c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: lease released", slog.String(attrShardID, s.id))
	s.c.leaseEvent(s.id, observe.LeaseReleased)
}

// startReader starts a reader at pos in epoch e, after stopping the current
// one; s.rmu must be held.
func (s *shard) startReaderLocked(pos Position, e settle.Epoch) {
	s.stopReaderLocked()
	if s.leaving.Load() {
		return
	}
	s.reader = s.c.startReader(s, pos, e)
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
	s.leaving.Store(true)
	s.stopReaderLocked()
}

// maybeEnd checkpoints SHARD_END once the reader read the closed shard to
// its end and every delivery of that epoch settled. Ending is conditional
// on the epoch (settle.Watermark.EndIn), so a seek that starts a new epoch
// at the same moment can never see its new, empty epoch ended.
func (s *shard) maybeEnd() {
	e := settle.Epoch(s.endEpoch.Load())
	wm := s.es.Watermark()
	if e == 0 || wm.Pending() != 0 {
		return
	}
	if err := wm.EndIn(e); err != nil {
		return // not all settled, or sought since
	}
	if s.finished.CompareAndSwap(false, true) {
		s.c.spawn(s.end)
	}
}

// end writes SHARD_END, then gives the shard up: its children may start.
func (s *shard) end() {
	c := s.c
	ctx := context.Background()
	s.ck.update(settle.Position{Seq: lease.ShardEnd})
	s.ck.stop(ctx)
	if s.ck.written().Seq != lease.ShardEnd {
		// The lease was lost (or the store kept failing): whoever holds it
		// next reads the shard to its end again.
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: shard end not checkpointed", slog.String(attrShardID, s.id))
		c.forget(s)
		return
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: shard ended", slog.String(attrShardID, s.id))
	s.stopReading()
	c.forget(s)
	s.release(ctx)
	c.kickEnded()
}

// errLeaseGone matches the error of a lease write after the lease was lost.
var errLeaseGone = lease.ErrLeaseLost

// lost reports whether err says the lease is no longer held.
func lost(err error) bool { return errors.Is(err, errLeaseGone) }
