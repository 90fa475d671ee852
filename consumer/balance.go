package consumer

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/settle"
)

// heartbeat bumps this worker's row in the lease table, so other workers
// count it when they balance.
func (c *Consumer) heartbeat(ctx context.Context) error {
	sctx, cancel := c.storeContext(ctx)
	defer cancel()
	w, err := c.cfg.Store.Heartbeat(sctx, c.cfg.Stream, c.cfg.Owner)
	if err != nil {
		w = lease.Worker{}
	}
	c.mu.Lock()
	c.self = w
	c.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: heartbeat failed; will retry", slog.String(attrError, err.Error()))
	}
	return err
}

// unregister removes this worker's row at the end of Run, after the last
// heartbeat: with the row the last heartbeat returned, or, when that is
// unknown or stale (a failed heartbeat may have been applied), as the
// table has it now.
func (c *Consumer) unregister() {
	ctx, cancel := c.storeContext(context.Background())
	defer cancel()
	c.mu.Lock()
	w := c.self
	c.mu.Unlock()
	if w.Owner != "" {
		err := c.cfg.Store.RemoveWorker(ctx, w)
		if err == nil || !errors.Is(err, lease.ErrLeaseLost) {
			return
		}
	}
	snap, err := c.cfg.Store.Snapshot(ctx, c.cfg.Stream)
	if err != nil {
		return
	}
	for _, w := range snap.Workers {
		if w.Owner == c.cfg.Owner {
			_ = c.cfg.Store.RemoveWorker(ctx, w)
		}
	}
}

// renew heartbeats and renews every held lease, concurrently: a lease that
// was lost stops its shard at once, and a lease another worker asked for is
// handed over.
func (c *Consumer) renew(ctx context.Context) {
	_ = c.heartbeat(ctx)
	c.mu.Lock()
	held := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		held = append(held, s)
	}
	c.mu.Unlock()
	_ = concurrently(held, func(s *shard) error {
		l, err := s.renew(ctx)
		switch {
		case lost(err):
			c.lose(s, "lease lost at renewal")
		case err != nil:
			if ctx.Err() == nil {
				c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: renewing a lease failed; will retry", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
			}
		case l.Handoff != "" && l.Handoff != c.cfg.Owner:
			c.handOff(s, l.Handoff)
		}
		return nil
	})
}

// balance reads the stream's rows and balances on them.
func (c *Consumer) balance(ctx context.Context) {
	sctx, cancel := c.storeContext(ctx)
	snap, err := c.cfg.Store.Snapshot(sctx, c.cfg.Stream)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: reading the lease table failed; will retry", slog.String(attrError, err.Error()))
		}
		return
	}
	c.balanceWith(ctx, snap)
}

// balanceWith balances on the stream's rows as just read. Each live worker
// (registered with a recent heartbeat, or holding a lease that is not
// expired) aims at ceil(shards / workers) leases: this worker takes free and
// expired leases up to that share, and, when none is free, asks busier
// workers to hand leases over (RequestHandoff): the owner stops reading the
// shard, settles what it has in flight, checkpoints and transfers the lease,
// and only then this worker reads it, so a planned move re-delivers
// nothing. A lease whose owner died expires and is taken as before.
//
// It also stops shards whose lease another worker holds now, hands over
// leases other workers asked for, starts leases handed over to it, and
// removes the rows of shards trimmed away and of workers that died.
func (c *Consumer) balanceWith(ctx context.Context, snap lease.Snapshot) {
	me := c.cfg.Owner
	c.mu.Lock()
	if c.stopped || c.listed == nil {
		c.mu.Unlock()
		return
	}
	c.tracker.Observe(snap.Leases)
	c.tracker.ObserveWorkers(snap.Workers)
	v := view{listed: c.listed, maxListed: c.maxListed, byID: make(map[string]lease.Lease, len(snap.Leases))}
	for _, l := range snap.Leases {
		v.byID[l.Key.ShardID] = l
	}
	var (
		lostShards []*shard
		handoffs   []handoff
		adopt      []lease.Lease
		eligible   []lease.Lease
		available  []lease.Lease
		cleanup    []lease.Lease
		deadRows   []lease.Worker
		mine       int
		requested  int
	)
	for id, s := range c.shards {
		l, ok := v.byID[id]
		switch {
		case !ok || l.Owner != me:
			lostShards = append(lostShards, s)
		case l.Handoff != "" && l.Handoff != me:
			s.setLease(l)
			handoffs = append(handoffs, handoff{s, l.Handoff})
		}
	}
	live := map[string]int{me: 0}
	for _, w := range snap.Workers {
		switch {
		case w.Owner == me:
		case c.tracker.WorkerExpired(w):
			deadRows = append(deadRows, w)
		default:
			live[w.Owner] = 0
		}
	}
	for _, l := range snap.Leases {
		id := l.Key.ShardID
		if v.trimmed(id) {
			if c.cleanable(l, v, snap.Leases) {
				cleanup = append(cleanup, l)
			}
			continue
		}
		if _, ok := v.listed[id]; !ok || l.Checkpoint == lease.ShardEnd || !v.parentsDone(l) {
			continue // newer than the listing, finished, or waiting for its parents
		}
		eligible = append(eligible, l)
		if l.Handoff == me {
			requested++
		}
		switch {
		case l.Owner == me:
			mine++
			if c.shards[id] == nil && !c.lettingGo[id] {
				adopt = append(adopt, l)
			}
		case l.Owner == "" || c.tracker.Expired(l):
			available = append(available, l)
		default:
			live[l.Owner]++
		}
	}
	c.mu.Unlock()

	for _, s := range lostShards {
		c.lose(s, "lease taken by another worker")
	}
	for _, h := range handoffs {
		c.handOff(h.s, h.to)
	}
	for _, l := range adopt {
		c.adopt(ctx, l, v)
	}
	c.cleanUp(ctx, cleanup, deadRows)
	if len(eligible) == 0 {
		return
	}
	target := (len(eligible) + len(live) - 1) / len(live)
	// Free and expired leases up to the share, taken concurrently; a lease
	// another worker took first is replaced by the next one.
	for len(available) > 0 && mine < target {
		n := min(target-mine, len(available))
		var took atomic.Int64
		_ = concurrently(available[:n], func(l lease.Lease) error {
			if c.take(ctx, l, v) {
				took.Add(1)
			}
			return nil
		})
		mine += int(took.Load())
		available = available[n:]
	}
	if mine+requested >= target {
		return
	}
	c.request(ctx, eligible, live, target, mine+requested)
}

// handoff is a lease another worker asked this worker for.
type handoff struct {
	s  *shard
	to string
}

// request asks the busiest workers for leases until this worker (holding
// or having asked for have) reaches target: from a worker above the share,
// or at the share while this worker is at least two below it (6 shards, 4
// workers: 2, 2, 1, 1). One request per lease; a lease already asked for
// by another worker is left alone.
func (c *Consumer) request(ctx context.Context, eligible []lease.Lease, live map[string]int, target, have int) {
	me := c.cfg.Owner
	owners := make([]string, 0, len(live))
	for o := range live {
		if o != me {
			owners = append(owners, o)
		}
	}
	slices.SortFunc(owners, func(a, b string) int { return live[b] - live[a] })
	for _, o := range owners {
		for _, l := range eligible {
			if have >= target {
				return
			}
			n := live[o]
			if !(n > target || (n == target && have < target-1)) {
				break
			}
			if l.Owner != o || l.Handoff != "" || c.tracker.Expired(l) {
				continue
			}
			sctx, cancel := c.storeContext(ctx)
			_, err := c.cfg.Store.RequestHandoff(sctx, l, me)
			cancel()
			if err != nil {
				if !lost(err) && ctx.Err() == nil {
					c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: asking for a lease failed", slog.String(attrShardID, l.Key.ShardID), slog.String(attrError, err.Error()))
				}
				continue
			}
			c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: asked for a lease", slog.String(attrShardID, l.Key.ShardID), slog.String("from", o))
			live[o]--
			have++
		}
	}
}

// view is what balancing knows of the stream: the last complete listing
// and the lease rows.
type view struct {
	listed    map[string]kinesistypes.Shard
	maxListed string // the highest shard id listed
	byID      map[string]lease.Lease
}

// trimmed reports whether the shard id is gone from the stream: not listed,
// though a shard created after it is (a shard created after the listing has
// a higher id than every listed one, so it never counts as trimmed).
func (v view) trimmed(id string) bool {
	_, ok := v.listed[id]
	return !ok && id < v.maxListed
}

// parentsDone reports whether every parent of l is SHARD_END, gone from the
// stream (trimmed away, its row deleted or not), or an ancestor from before
// this consumer's time (listed, but given no lease row).
func (v view) parentsDone(l lease.Lease) bool {
	for _, p := range l.ParentShardIDs {
		pl, hasRow := v.byID[p]
		if !hasRow || pl.Checkpoint == lease.ShardEnd || v.trimmed(p) {
			continue
		}
		return false
	}
	return true
}

// cleanable reports whether the row l of a trimmed shard may be deleted
// now: it is free, expired or this worker's without a reader, and nothing
// needs it any more (it is SHARD_END, or every child has a checkpoint of its
// own, so no child would start from the configured position instead of
// continuing after it). c.mu must be held.
func (c *Consumer) cleanable(l lease.Lease, v view, all []lease.Lease) bool {
	switch {
	case l.Owner == "" || c.tracker.Expired(l):
	case l.Owner == c.cfg.Owner && c.shards[l.Key.ShardID] == nil:
	default:
		return false
	}
	if l.Checkpoint == lease.ShardEnd {
		return true
	}
	for _, child := range all {
		if slices.Contains(child.ParentShardIDs, l.Key.ShardID) && child.Checkpoint == "" {
			return false
		}
	}
	return true
}

// cleanUp deletes the rows of trimmed shards and of dead workers. Every
// delete is fenced by the counter observed, so a row that changed since is
// left alone.
func (c *Consumer) cleanUp(ctx context.Context, trimmed []lease.Lease, dead []lease.Worker) {
	_ = concurrently(trimmed, func(l lease.Lease) error {
		sctx, cancel := c.storeContext(ctx)
		defer cancel()
		if err := c.cfg.Store.Delete(sctx, l); err != nil {
			if !lost(err) && ctx.Err() == nil {
				c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: deleting the lease of a trimmed shard failed; will retry", slog.String(attrShardID, l.Key.ShardID), slog.String(attrError, err.Error()))
			}
			return nil
		}
		if l.Checkpoint != lease.ShardEnd {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: shard trimmed away before it was read to its end; records after its checkpoint were lost to the stream's retention",
				slog.String(attrShardID, l.Key.ShardID), slog.String("checkpoint", l.Checkpoint))
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: lease of a trimmed shard deleted", slog.String(attrShardID, l.Key.ShardID))
		c.mu.Lock()
		c.tracker.Forget(l.Key)
		c.mu.Unlock()
		return nil
	})
	_ = concurrently(dead, func(w lease.Worker) error {
		sctx, cancel := c.storeContext(ctx)
		defer cancel()
		if err := c.cfg.Store.RemoveWorker(sctx, w); err == nil {
			c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: row of a dead worker removed", slog.String("worker", w.Owner))
			c.mu.Lock()
			c.tracker.ForgetWorker(w.Stream, w.Owner)
			c.mu.Unlock()
		}
		return nil
	})
}

// adopt starts the shard of l, a lease handed over to this worker, after
// renewing it: the renewal is conditional on l's counter, so a snapshot
// older than a change of the row (this worker's own hand-over of it
// finishing meanwhile) starts nothing.
func (c *Consumer) adopt(ctx context.Context, l lease.Lease, v view) {
	c.claim(ctx, l, v, "renewing a lease handed over", c.cfg.Store.Renew, "handed over")
}

// take takes the lease l (free or expired) and starts its shard.
func (c *Consumer) take(ctx context.Context, l lease.Lease, v view) bool {
	from := "free"
	if l.Owner != "" {
		from = "expired lease of " + l.Owner
	}
	return c.claim(ctx, l, v, "taking a lease", func(ctx context.Context, l lease.Lease) (lease.Lease, error) {
		return c.cfg.Store.Take(ctx, l, c.cfg.Owner)
	}, from)
}

// claim writes l with write, a store call conditional on l's counter, and
// starts its shard from the row written; what a failed write means (one
// that lost the race is not worth a warning) is logged as doing.
func (c *Consumer) claim(ctx context.Context, l lease.Lease, v view, doing string,
	write func(context.Context, lease.Lease) (lease.Lease, error), from string) bool {
	sctx, cancel := c.storeContext(ctx)
	held, err := write(sctx, l)
	cancel()
	if err != nil {
		if !lost(err) && ctx.Err() == nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: "+doing+" failed", slog.String(attrShardID, l.Key.ShardID), slog.String(attrError, err.Error()))
		}
		return false
	}
	return c.start(ctx, held, v, from)
}

// start starts reading the shard of the lease held, which this worker now
// owns.
func (c *Consumer) start(ctx context.Context, held lease.Lease, v view, from string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	if s := c.shards[held.Key.ShardID]; s != nil {
		s.setLease(held)
		return true
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: lease taken", slog.String(attrShardID, held.Key.ShardID),
		slog.String("from", from), slog.String("checkpoint", held.Checkpoint), slog.Int64("counter", held.Counter))
	s := c.newShard(held)
	kind := observe.LeaseTaken
	switch {
	case from == "handed over":
		kind = observe.LeaseReceived
	case from != "free":
		kind = observe.LeaseStolen
	}
	c.obs.Lease(observe.Lease{Stream: c.cfg.Stream, ShardID: held.Key.ShardID, Kind: kind, Held: len(c.shards) + 1})
	if cp := held.Checkpoint; cp != "" && cp != lease.ShardEnd && settle.ValidSequence(cp) && held.SubSequence == 0 {
		s.es.Reset(cp)
	}
	c.shards[s.id] = s
	pos := c.startFor(held, v)
	if held.Checkpoint == "" && pos.inherited {
		// A child starting where its parents left off: say so in its row, so
		// it starts there again once the parents' rows are deleted.
		s.ck.update(settle.Position{Seq: pos.sentinel()})
	}
	s.rmu.Lock()
	s.startReaderLocked(pos, s.es.Watermark().Epoch())
	s.rmu.Unlock()
	return true
}

// startFor is where a newly held shard starts: after its checkpoint; for a
// child of a split or merge whose parents this consumer tracked, from its
// first record (TRIM_HORIZON), or from the configured timestamp when the
// start is one (every record of a child came after its parents' last one);
// else at Config.Start.
func (c *Consumer) startFor(l lease.Lease, v view) Position {
	inherit := func() Position {
		p := TrimHorizon()
		if c.cfg.Start.kind == posTimestamp {
			p = c.cfg.Start
		}
		p.inherited = true
		return p
	}
	switch l.Checkpoint {
	case "":
	case lease.TrimHorizon, lease.AtTimestamp:
		return inherit()
	case lease.ShardEnd:
		return c.cfg.Start // not started: finished shards are never taken
	default:
		if l.SubSequence > 0 {
			// Inside a KPL aggregate: read it again, skipping the user
			// records that settled.
			return Position{kind: posAtSequence, shard: l.Key.ShardID, seq: l.Checkpoint, skip: l.SubSequence}
		}
		return Position{kind: posSequence, shard: l.Key.ShardID, seq: l.Checkpoint}
	}
	for _, p := range l.ParentShardIDs {
		if _, tracked := v.byID[p]; tracked {
			return inherit()
		}
	}
	return c.cfg.Start
}

// handOff hands the lease of s over to the worker to that asked for it:
// reading stops, the records in flight settle (records waiting for a retry
// are left to the new owner), and the lease is transferred to to with the
// final checkpoint, in one conditional write; to reads on from that
// checkpoint: a planned move re-delivers nothing that settled. It runs in
// a goroutine of its own.
func (c *Consumer) handOff(s *shard, to string) {
	if !s.handing.CompareAndSwap(false, true) {
		return
	}
	c.spawn(func() {
		ctx := context.Background()
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: handing a lease over", slog.String(attrShardID, s.id), slog.String("to", to))
		c.stopShard(s)
		if !c.forgetLettingGo(s) {
			return // lost, ended or shut down meanwhile
		}
		defer c.letGo(s.id)
		s.es.Reset("")
		l, err := s.ck.finish(ctx, func(ctx context.Context, held lease.Lease) (lease.Lease, error) {
			return c.cfg.Store.Transfer(ctx, held, to)
		})
		if err != nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: handing a lease over failed; releasing it", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()))
			s.release(ctx)
			return
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: lease handed over", slog.String(attrShardID, s.id), slog.String("to", to), slog.String("checkpoint", l.Checkpoint))
		c.leaseEvent(s.id, observe.LeaseHandedOn)
	})
}

// gone gives up a shard that no longer exists (trimmed away): its lease is
// released, and balancing deletes its row once it is no longer listed.
func (c *Consumer) gone(s *shard) {
	ctx := context.Background()
	c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: shard no longer exists (trimmed away); releasing its lease", slog.String(attrShardID, s.id))
	c.stopShard(s)
	if !c.forgetLettingGo(s) {
		return
	}
	defer c.kickEnded() // after letGo: the children may start
	defer c.letGo(s.id)
	s.es.Reset("")
	s.release(ctx)
}

// endedGap is the least time between two listings for ended shards (see
// afterEnded).
const endedGap = time.Second

// afterEnded lists the shards and balances, for a shard that ended or
// disappeared: its children may start now. They get rows if they were not
// listed yet, and are taken. It returns when it started.
func (c *Consumer) afterEnded(ctx context.Context) time.Time {
	now := time.Now()
	snap, err := c.discover(ctx)
	switch {
	case err == nil:
		c.balanceWith(ctx, snap)
	case ctx.Err() == nil:
		c.listFailed(ctx, err)
		c.balance(ctx)
	}
	return now
}

// kickEnded tells Run that a shard ended or disappeared, so that it lists
// the shards and balances soon (see Consumer.ended).
func (c *Consumer) kickEnded() {
	select {
	case c.ended <- struct{}{}:
	default: // a kick is pending already
	}
}

// stopShard stops reading s, gives up its retries, waits (at most
// ShutdownTimeout) for its records in flight, and stops its periodic
// checkpoints: the last one goes with the Transfer or Release that follows
// (checkpointer.finish).
func (c *Consumer) stopShard(s *shard) {
	s.stopReading()
	c.sess.Quiesce(s.es)
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ShutdownTimeout)
	defer cancel()
	if !s.es.WaitIdle(ctx) {
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: records still in flight after the shutdown timeout; they come again from the checkpoint",
			slog.String(attrShardID, s.id), slog.Int("in_flight", s.es.Inflight()))
	}
	s.ck.halt()
}
