package consumer

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/shardsettle/lambdaadapter/lease"
)

// Who plans. One worker of the stream, the leader, holds the stream's
// leader row (lease.LeaderKey), a lease like the shards' that it renews with
// them: it reads the whole table every balancing round and plans for every
// worker (planAssignment). It takes free and expired leases on behalf of
// the worker it gives them to, and asks owners to hand leases over to
// another worker (RequestHandoff, the graceful move). Every other worker
// only renews its leases, heartbeats with its load, reads the leader row,
// and finds the leases given to it by a query of the table's owner index
// (lease.Store.Owned): its reads do not grow with the number of shards, and
// the table's with the number of workers (see doc.go).
//
// The leader writes in its row's checkpoint how the fleet balances: led
// (it plans for all) or self (each worker plans for itself from a Scan, as
// before the leader existed). It says self while any live worker runs an
// older version (its row carries no load) or the table has no owner index,
// so that a fleet in the middle of a rolling deployment, or on a table not
// migrated yet, balances as it did.
const (
	fleetLed  = "plan:leader"
	fleetSelf = "plan:self"
)

// role is what a worker does in one balancing round.
type role uint8

const (
	roleSelf      role = iota // plan for itself from a Scan (planBalance)
	roleLeading               // plan for all (lead)
	roleFollowing             // adopt the leases the leader gave it (follow)
)

func (r role) String() string {
	switch r {
	case roleLeading:
		return "leading"
	case roleFollowing:
		return "following"
	}
	return "self"
}

// leadership is this worker's view of the leader row, guarded by
// Consumer.mu.
type leadership struct {
	row     lease.Lease // as last read or written
	held    bool        // this worker owns row (the last write of it succeeded)
	renewed time.Time   // when that write started
	role    role        // the role of the last balancing round
	noIndex bool        // the last Owned said the table has no owner index
	ended   int         // SHARD_END leases in the leader's last read
}

// leading reports whether this worker holds the leader row, renewed within
// the fence (as for a shard's lease: see fenceMargin).
func (c *Consumer) leading() bool {
	return c.leader.held && time.Since(c.leader.renewed) < c.cfg.LeaseDuration-fenceMargin(c.cfg.LeaseDuration)
}

// following reports whether the last balancing round followed the leader:
// such a worker neither lists the shards nor reads the table.
func (c *Consumer) following() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader.role == roleFollowing
}

// roleFor reads the leader row and decides this round's role: it takes
// the row when it is free or expired (or still its own), becoming the
// leader.
func (c *Consumer) roleFor(ctx context.Context) role {
	c.mu.Lock()
	if c.leading() {
		c.mu.Unlock()
		return roleLeading
	}
	c.mu.Unlock()
	key := lease.LeaderKey(c.cfg.Stream)
	sctx, cancel := c.storeContext(ctx)
	defer cancel()
	row, err := c.cfg.Store.Get(sctx, key)
	if errors.Is(err, lease.ErrNotFound) {
		row, err = c.cfg.Store.Ensure(sctx, key, nil)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: reading the leader row failed; balancing for this worker alone", slog.String(attrError, err.Error()))
		}
		return roleSelf
	}
	c.mu.Lock()
	c.tracker.Observe([]lease.Lease{row})
	claim := row.Owner == "" || row.Owner == c.cfg.Owner || c.tracker.Expired(row)
	c.leader.row, c.leader.held = row, false
	c.mu.Unlock()
	if claim {
		since := time.Now()
		write := func(ctx context.Context, l lease.Lease) (lease.Lease, error) {
			return c.cfg.Store.Take(ctx, l, c.cfg.Owner)
		}
		if row.Owner == c.cfg.Owner {
			write = c.cfg.Store.Renew
		}
		if got, err := write(sctx, row); err == nil {
			c.mu.Lock()
			c.leader = leadership{row: got, held: true, renewed: since, role: c.leader.role, noIndex: c.leader.noIndex, ended: -1}
			c.mu.Unlock()
			if row.Owner != c.cfg.Owner {
				c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: leading the stream's balancing", slog.String("from", row.Owner))
			}
			return roleLeading
		}
	}
	if row.Checkpoint == fleetLed {
		return roleFollowing
	}
	return roleSelf
}

// renewLeadership renews the leader row with the leases (renew); a row
// another worker took since ends the leadership at once.
func (c *Consumer) renewLeadership(ctx context.Context) {
	c.mu.Lock()
	row, held := c.leader.row, c.leader.held
	c.mu.Unlock()
	if !held {
		return
	}
	since := time.Now()
	sctx, cancel := c.storeContext(ctx)
	got, err := c.cfg.Store.Renew(sctx, row)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader.row.Counter != row.Counter || !c.leader.held {
		return // changed meanwhile (given up at the stop, say)
	}
	switch {
	case err == nil:
		c.leader.row, c.leader.renewed = got, since
	case lost(err):
		c.leader.held = false
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: no longer leading the stream's balancing")
	}
}

// resign releases the leader row at the end of Run, so that another
// worker leads at once.
func (c *Consumer) resign() {
	c.mu.Lock()
	row, held := c.leader.row, c.leader.held
	c.leader.held = false
	c.mu.Unlock()
	if !held {
		return
	}
	ctx, cancel := c.storeContext(context.Background())
	defer cancel()
	_, _ = c.cfg.Store.Release(ctx, row)
}

// setFleet writes how the fleet balances in the leader row, when it
// changed.
func (c *Consumer) setFleet(ctx context.Context, fleet string) {
	c.mu.Lock()
	row, held := c.leader.row, c.leader.held
	c.mu.Unlock()
	if !held || row.Checkpoint == fleet {
		return
	}
	since := time.Now()
	sctx, cancel := c.storeContext(ctx)
	got, err := c.cfg.Store.Checkpoint(sctx, row, fleet, 0)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.leader.row, c.leader.renewed = got, since
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: the fleet balances", slog.String("how", fleet))
	case lost(err):
		c.leader.held = false
	}
}

// lead is the leader's balancing round on the stream's rows as just read:
// it decides how the fleet balances, then either plans for itself alone
// (self) or for every worker: its own shards as planBalance says (lost,
// handed over, adopted; rows of trimmed shards and dead workers removed),
// and the leases of all by planAssignment, carried out with takes on
// behalf of the worker given a free or expired lease and hand-over
// requests in its name.
func (c *Consumer) lead(ctx context.Context, snap lease.Snapshot) {
	fleet := fleetLed
	sctx, cancel := c.storeContext(ctx)
	_, err := c.cfg.Store.Owned(sctx, c.cfg.Owner)
	cancel()
	if errors.Is(err, lease.ErrNoOwnerIndex) {
		c.mu.Lock()
		if !c.leader.noIndex {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: the lease table has no owner index, so every worker reads the whole table to balance; bootstrap leases init adds it")
		}
		c.leader.noIndex = true
		c.mu.Unlock()
		fleet = fleetSelf
	} else if err == nil {
		c.mu.Lock()
		c.leader.noIndex = false
		c.mu.Unlock()
	}
	c.mu.Lock()
	ended := 0
	for _, l := range snap.Leases {
		if l.Checkpoint == lease.ShardEnd {
			ended++
		}
	}
	newlyEnded := ended > c.leader.ended && c.leader.ended >= 0
	c.leader.ended = ended
	c.mu.Unlock()
	if newlyEnded {
		// A shard ended since the last read: its children get rows now,
		// not at the next listing.
		if s, err := c.discover(ctx); err == nil {
			snap = s
		}
	}
	c.mu.Lock()
	in, held, ok := c.planInput(snap)
	c.mu.Unlock()
	if !ok {
		return
	}
	for _, w := range snap.Workers {
		if w.Load == nil && !in.dead[w.Owner] && w.Owner != c.cfg.Owner {
			fleet = fleetSelf // an older worker: it plans for itself
		}
	}
	c.setFleet(ctx, fleet)
	p := planBalance(in)
	if fleet == fleetSelf {
		c.act(ctx, p, held, in.view)
		return
	}
	a := planAssignment(c.assignInput(in, p, snap))
	p.take, p.want, p.asks = nil, 0, askPlan{} // the assignment plans these
	c.act(ctx, p, held, in.view)
	_ = concurrently(a.takes, func(m move) error {
		if m.to == c.cfg.Owner {
			c.take(ctx, m.lease, in.view)
			return nil
		}
		sctx, cancel := c.storeContext(ctx)
		defer cancel()
		if _, err := c.cfg.Store.Take(sctx, m.lease, m.to); err != nil {
			if !lost(err) && ctx.Err() == nil {
				c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: giving a lease failed", slog.String(attrShardID, m.lease.Key.ShardID), slog.String("to", m.to), slog.String(attrError, err.Error()))
			}
			return nil
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: lease given", slog.String(attrShardID, m.lease.Key.ShardID), slog.String("to", m.to))
		return nil
	})
	_ = concurrently(a.moves, func(m move) error {
		sctx, cancel := c.storeContext(ctx)
		defer cancel()
		if _, err := c.cfg.Store.RequestHandoff(sctx, m.lease, m.to); err != nil {
			if !lost(err) && ctx.Err() == nil {
				c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: asking for a hand-over failed", slog.String(attrShardID, m.lease.Key.ShardID), slog.String(attrError, err.Error()))
			}
			return nil
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: hand-over asked", slog.String(attrShardID, m.lease.Key.ShardID), slog.String("from", m.lease.Owner), slog.String("to", m.to))
		return nil
	})
}

// assignInput is what planAssignment plans from: the eligible leases as
// planBalance found them, and every live worker with the load it
// published (this worker's own as its last heartbeat measured it).
func (c *Consumer) assignInput(in planInput, p plan, snap lease.Snapshot) assignInput {
	a := assignInput{
		leases:    p.asks.eligible,
		expired:   p.asks.expired,
		byCount:   c.cfg.Assignment == AssignByCount,
		maxMoves:  c.cfg.MaxMoves,
		tolerance: assignTolerance,
	}
	loads := map[string]*lease.Load{}
	for _, w := range snap.Workers {
		loads[w.Owner] = w.Load
	}
	c.mu.Lock()
	loads[c.cfg.Owner] = c.lastLoad
	c.mu.Unlock()
	// The workers with a live row receive leases; an owner whose row is
	// gone (a dead worker's, removed before its leases expired) only
	// counts with the leases it holds (planAssignment).
	for _, w := range snap.Workers {
		if w.Owner != c.cfg.Owner && !in.dead[w.Owner] {
			a.workers = append(a.workers, workerLoadOf(w.Owner, loads[w.Owner]))
		}
	}
	a.workers = append(a.workers, workerLoadOf(c.cfg.Owner, loads[c.cfg.Owner]))
	return a
}

// assignTolerance is the hysteresis of load-aware assignment: the plan
// moves leases only while the busiest worker's load exceeds the mean by
// more than this fraction.
const assignTolerance = 0.15

// workerLoadOf is the planner's view of the load a worker published (nil:
// none yet).
func workerLoadOf(owner string, l *lease.Load) workerLoad {
	w := workerLoad{owner: owner, cpu: -1}
	if l == nil {
		return w
	}
	w.cpu = l.CPU
	w.shards = make(map[string]throughput, len(l.Shards))
	for id, t := range l.Shards {
		w.shards[id] = throughput{records: t.Records, bytes: t.Bytes}
	}
	return w
}

// follow is a follower's balancing round: it finds the leases the leader
// gave it (the owner index; eventually consistent, so each is read again
// before it is adopted) and starts them. Losing a lease and being asked to
// hand one over are seen by the renewals. A table without the index makes
// the worker balance for itself (roleSelf) until it has one.
func (c *Consumer) follow(ctx context.Context) {
	sctx, cancel := c.storeContext(ctx)
	keys, err := c.cfg.Store.Owned(sctx, c.cfg.Owner)
	cancel()
	if err != nil {
		if errors.Is(err, lease.ErrNoOwnerIndex) {
			// The leader saw the index, this worker does not (yet): it
			// balances for itself this round.
			c.selfBalance(ctx)
		} else if ctx.Err() == nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: reading this worker's leases failed; will retry", slog.String(attrError, err.Error()))
		}
		return
	}
	for _, k := range keys {
		if k.Stream != c.cfg.Stream {
			continue
		}
		c.mu.Lock()
		_, held := c.shards[k.ShardID]
		stopped := c.stopped
		c.mu.Unlock()
		if held || stopped {
			continue
		}
		sctx, cancel := c.storeContext(ctx)
		l, err := c.cfg.Store.Get(sctx, k)
		cancel()
		if err != nil || l.Owner != c.cfg.Owner || l.Checkpoint == lease.ShardEnd {
			continue // moved on since the index was read
		}
		c.adopt(ctx, l, c.parentsView(ctx, l))
	}
}

// parentsView is the view a follower starts the lease l with: the rows of
// its parents (startFor continues a child where its parents left off when
// this consumer tracked them).
func (c *Consumer) parentsView(ctx context.Context, l lease.Lease) view {
	c.mu.Lock()
	v := view{listed: c.listed, maxListed: c.maxListed, byID: map[string]lease.Lease{}}
	c.mu.Unlock()
	if l.Checkpoint != "" {
		return v
	}
	for _, p := range l.ParentShardIDs {
		sctx, cancel := c.storeContext(ctx)
		pl, err := c.cfg.Store.Get(sctx, lease.Key{Stream: c.cfg.Stream, ShardID: p})
		cancel()
		if err == nil {
			v.byID[p] = pl
		}
	}
	return v
}
