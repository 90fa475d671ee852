package consumer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/settle"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
)

// checkpointer writes a shard's checkpoint: only when the watermark moved,
// only while the lease is held, at most one write in flight (the newest
// value wins), at most one write per CheckpointInterval — the take of the
// lease counting as the first, so a worker that just took a lease does not
// write it again at once — each write with a deadline, and always a last
// one on hand-over, shard end and shutdown. Its loop is one goroutine,
// owned by the shard (shard.run), and it writes only while the shard's
// lease is fresh (its fence, see fenceMargin).
type checkpointer struct {
	s *shard

	wmu sync.Mutex // at most one write in flight

	mu   sync.Mutex
	want settle.Position // newest checkpoint to write
	have settle.Position // last written
	dead bool            // lease lost or shard stopped: write nothing more
	last time.Time

	kick chan struct{}
	quit chan struct{}
	once sync.Once
	exit chan struct{}
}

func newCheckpointer(s *shard) *checkpointer {
	return &checkpointer{s: s, have: settle.Position{Seq: s.lease.Checkpoint, Parts: s.lease.SubSequence}, last: time.Now(),
		kick: make(chan struct{}, 1), quit: make(chan struct{}), exit: make(chan struct{})}
}

// update asks for pos to be written (a sequence number with, inside a KPL
// aggregate, the number of its user records that settled; or a sentinel
// such as ShardEnd with Parts 0).
func (k *checkpointer) update(pos settle.Position) {
	k.mu.Lock()
	k.want = pos
	k.mu.Unlock()
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// written returns the last checkpoint written.
func (k *checkpointer) written() settle.Position {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.have
}

func (k *checkpointer) loop() {
	defer close(k.exit)
	interval := k.s.c.cfg.CheckpointInterval
	t := time.NewTimer(interval)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-k.quit:
			return
		case <-k.kick:
		}
		k.mu.Lock()
		wait := interval - time.Since(k.last)
		k.mu.Unlock()
		if wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-k.quit:
				return
			}
		}
		if retry := !k.flush(context.Background()); retry {
			select {
			case k.kick <- struct{}{}:
			default:
			}
		}
	}
}

// flush writes the newest wanted checkpoint if it was not written yet. It
// reports false when the write failed and should be tried again. Writes are
// serialised by wmu; k.mu is never held across the store call, so lanes
// settling the shard do not wait for the store.
func (k *checkpointer) flush(ctx context.Context) bool {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.mu.Lock()
	if k.dead || k.want.Seq == "" || k.want == k.have || !k.s.es.Live() {
		// Nothing to write, or the lease is being given up or was not
		// renewed in time: the shard stops, and writes nothing.
		k.mu.Unlock()
		return true
	}
	want := k.want
	k.mu.Unlock()

	s := k.s
	_, err := s.write(ctx, func(ctx context.Context, l lease.Lease) (lease.Lease, error) {
		return s.c.cfg.Store.Checkpoint(ctx, l, want.Seq, want.Parts)
	})
	s.c.obs.Checkpoint(observe.Checkpoint{Stream: s.c.cfg.Stream, ShardID: s.id, Checkpoint: want.Seq, SubSequence: want.Parts, Err: err})
	k.mu.Lock()
	k.last = time.Now()
	switch {
	case err == nil:
		k.have = want
	case lost(err):
		k.dead = true
	}
	k.mu.Unlock()
	switch {
	case err == nil:
		return true
	case lost(err):
		s.c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: checkpoint refused: lease lost", slog.String(attrShardID, s.id))
		s.stopAt(stopLost)
		return true
	default:
		s.c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: checkpoint write failed; will retry", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
		return false
	}
}

// halt stops the loop and waits for it.
func (k *checkpointer) halt() {
	k.once.Do(func() { close(k.quit) })
	<-k.exit
}

// finish stops the loop and performs op, a Release or a Transfer of the
// lease, with the newest checkpoint not yet written set in the held lease:
// the store writes it with the release or transfer, in one conditional
// write (see lease.Store). Nothing more is written by the checkpointer
// afterwards.
func (k *checkpointer) finish(ctx context.Context, op func(context.Context, lease.Lease) (lease.Lease, error)) (lease.Lease, error) {
	k.halt()
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.mu.Lock()
	want := k.want
	pending := !k.dead && want.Seq != "" && want != k.have
	k.mu.Unlock()
	s := k.s
	l, err := s.write(ctx, func(ctx context.Context, held lease.Lease) (lease.Lease, error) {
		if pending {
			held.Checkpoint, held.SubSequence = want.Seq, want.Parts
		}
		return op(ctx, held)
	})
	if pending {
		s.c.obs.Checkpoint(observe.Checkpoint{Stream: s.c.cfg.Stream, ShardID: s.id, Checkpoint: want.Seq, SubSequence: want.Parts, Err: err})
	}
	if err != nil {
		return l, err
	}
	k.mu.Lock()
	if pending {
		k.have = settle.Position{Seq: l.Checkpoint, Parts: l.SubSequence}
	}
	k.dead = true // the lease is not this worker's any more
	k.mu.Unlock()
	if pending && (l.Checkpoint != want.Seq || l.SubSequence != want.Parts) {
		// A Store of the user's own that keeps the row's checkpoint, as
		// lease.Store did not require before: nothing is lost, but what
		// settled after that checkpoint comes again.
		s.c.log.LogAttrs(ctx, slog.LevelError, "consumer: the lease store did not write the last checkpoint with the lease (lease.Store requires Release and Transfer to write the held lease's checkpoint); the records after the checkpoint it kept come again",
			slog.String(attrShardID, s.id), slog.String("checkpoint", want.Seq), slog.String("kept", l.Checkpoint))
	}
	return l, nil
}

// stop stops the loop and writes the newest checkpoint (ctx bounds it).
func (k *checkpointer) stop(ctx context.Context) {
	k.halt()
	k.flush(ctx)
}

// abandon stops the loop without writing: the lease is gone.
func (k *checkpointer) abandon() {
	k.mu.Lock()
	k.dead = true
	k.mu.Unlock()
	k.halt()
}
