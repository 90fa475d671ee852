package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/shardsettle/lambdaadapter/lease"
)

// Group is the consumers of one process that read several streams from
// one lease table (a service with several streams, as the KCL's
// multi-stream mode): one Consumer per stream, each with its own readers,
// engine and worker row, under one owner id. Balancing spans the streams:
// the group's first consumer (its primary) alone competes for the leader
// row of the group, named after the primary's stream, and while it leads
// it plans the leases of every stream of the group for every worker at
// once, from the load each worker publishes in each stream's row (the same
// process CPU, and the throughput of the shards it holds in that stream).
// A worker receives leases only of the streams it reads (it has a live row
// in them), so workers whose lists differ for a while (a stream added in a
// rolling deployment) share what they have in common.
//
// The leader row says which streams the leader plans for
// (fleetCovers): a worker reading a stream the leader does not plan
// balances that stream for itself, as a single-stream worker of an older
// version would. So a stream can be added to or removed from the list with
// no migration: its rows are keyed by its name, and the first stream, which
// names the group, should stay first (another first stream makes another
// leader row: while workers with both lists run, two leaders plan the
// streams both name, whose takes and requests are fenced like any other).
//
// A consumer alone is a group of one, named after its stream.
type Group struct {
	name    string      // the leader row's name (lease.LeaderKey): the primary's stream
	members []*Consumer // in the order given; members[0] is the primary
	shared  sharedReads
}

// sharedReads are the primary's last reads of the leader row and of the
// owner index (which names this worker's leases of every stream), which
// the other members use instead of reading both themselves every round:
// a worker of N streams reads them once a round, not N times (the
// follower's part of the cost, doc.go). A member reads them itself when
// the primary's are older than sharedFor (the primary leads, or its reads
// fail or hang).
type sharedReads struct {
	mu     sync.Mutex
	row    lease.Lease
	rowAt  time.Time
	keys   []lease.Key
	keysAt time.Time
}

// sharedFor is how long a member uses the primary's reads: a balancing
// round (D/2) and half of one more, so that a member whose round comes
// just before the primary's uses the last round's.
func sharedFor(leaseDuration time.Duration) time.Duration { return 3 * leaseDuration / 4 }

// readRow records the primary's read of the leader row, for the members.
func (g *Group) readRow(row lease.Lease) {
	if len(g.members) == 1 {
		return
	}
	g.shared.mu.Lock()
	g.shared.row, g.shared.rowAt = row, time.Now()
	g.shared.mu.Unlock()
}

// recentRow returns the primary's last read of the leader row, if it is
// younger than within.
func (g *Group) recentRow(within time.Duration) (lease.Lease, bool) {
	g.shared.mu.Lock()
	defer g.shared.mu.Unlock()
	return g.shared.row, recent(g.shared.rowAt, within)
}

// recent reports whether a read made at (zero: never) is younger than
// within.
func recent(at time.Time, within time.Duration) bool {
	return !at.IsZero() && time.Since(at) < within
}

// queried records the primary's query of the owner index, for the
// members, and starts a balancing round of each member with a lease of
// its stream there that it does not hold yet, so that it adopts it now,
// not at its own next round.
func (g *Group) queried(keys []lease.Key) {
	if len(g.members) == 1 {
		return
	}
	g.shared.mu.Lock()
	g.shared.keys, g.shared.keysAt = keys, time.Now()
	g.shared.mu.Unlock()
	for _, m := range g.members[1:] {
		for _, k := range keys {
			if k.Stream == m.cfg.Stream && !m.holds(k.ShardID) {
				m.kick()
				break
			}
		}
	}
}

// recentKeys returns the primary's last query of the owner index, if it
// is younger than within.
func (g *Group) recentKeys(within time.Duration) ([]lease.Key, bool) {
	g.shared.mu.Lock()
	defer g.shared.mu.Unlock()
	return g.shared.keys, recent(g.shared.keysAt, within)
}

// NewGroup makes the consumers cs one group, cs[0] its primary. They must
// read distinct streams, from one lease store, under one owner id, and
// none may have been run yet or belong to another group of several.
func NewGroup(cs ...*Consumer) (*Group, error) {
	if len(cs) == 0 {
		return nil, errors.New("consumer: a group needs at least one consumer")
	}
	seen := map[string]bool{}
	for _, c := range cs {
		switch {
		case c.started.Load():
			return nil, errors.New("consumer: a group's consumers must not have run yet")
		case len(c.grp.members) > 1:
			return nil, fmt.Errorf("consumer: the consumer of stream %s is in a group already", c.cfg.Stream)
		case seen[c.cfg.Stream]:
			return nil, fmt.Errorf("consumer: stream %s is twice in the group", c.cfg.Stream)
		case c.cfg.Owner != cs[0].cfg.Owner:
			return nil, fmt.Errorf("consumer: a group's consumers share one owner id (%s and %s)", cs[0].cfg.Owner, c.cfg.Owner)
		case c.cfg.Store != cs[0].cfg.Store:
			return nil, errors.New("consumer: a group's consumers share one lease store")
		}
		seen[c.cfg.Stream] = true
	}
	g := &Group{name: cs[0].cfg.Stream, members: cs}
	for _, c := range cs {
		c.grp = g
	}
	return g, nil
}

// soloGroup is the group of c alone.
func soloGroup(c *Consumer) *Group {
	return &Group{name: c.cfg.Stream, members: []*Consumer{c}}
}

// primary is the member that competes for the group's leader row.
func (g *Group) primary() *Consumer { return g.members[0] }

// Streams returns the members' streams, in the group's order.
func (g *Group) Streams() []string {
	s := make([]string, len(g.members))
	for i, c := range g.members {
		s[i] = c.cfg.Stream
	}
	return s
}

// isPrimary reports whether c competes for its group's leader row.
func (c *Consumer) isPrimary() bool { return c.grp.primary() == c }

// ledHere returns the fleet mode the group's primary wrote in the leader
// row while it leads, or "" when it does not lead. The caller must not
// hold the primary's lock.
func (g *Group) ledHere() string {
	p := g.primary()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leading() {
		return ""
	}
	return p.leader.row.Checkpoint
}

// fleetLed is the mode the leader of g writes while it plans for every
// worker: "plan:leader" for a group of one (as a single-stream leader
// writes it), else "plan:leader:" and the streams it plans, comma-separated
// (stream names have no comma).
func (g *Group) fleetLed() string {
	if len(g.members) == 1 {
		return fleetLed
	}
	return fleetLed + ":" + strings.Join(g.Streams(), ",")
}

// fleetCovers reports whether the fleet mode fleet, as read in the leader
// row of the group named group, says the leader plans stream for every
// worker: a single-stream leader plans its own stream, a group's leader
// the streams it names.
func fleetCovers(fleet, group, stream string) bool {
	if fleet == fleetLed {
		return stream == group
	}
	list, ok := strings.CutPrefix(fleet, fleetLed+":")
	if !ok {
		return false
	}
	for s := range strings.SplitSeq(list, ",") {
		if s == stream {
			return true
		}
	}
	return false
}

// leaderKey is the key of the group's leader row.
func (c *Consumer) leaderKey() lease.Key { return lease.LeaderKey(c.grp.name) }

// member is the group's consumer of stream, or nil.
func (g *Group) member(stream string) *Consumer {
	for _, c := range g.members {
		if c.cfg.Stream == stream {
			return c
		}
	}
	return nil
}

// give hands c the lease l, which the group's primary took in this
// worker's name: c starts it in a balancing round it runs now, on its own
// goroutine (follow), as it would once the owner index listed it. A c that
// stops (the members stop together, and the primary's round in flight
// finishes its writes) never starts it: it releases it at once, so that
// no worker waits for its expiry.
func (c *Consumer) give(l lease.Lease) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		c.giveBack([]lease.Lease{l})
		return
	}
	c.gifts = append(c.gifts, l)
	c.mu.Unlock()
	c.kick()
}

// kick asks c for a balancing round now.
func (c *Consumer) kick() {
	select {
	case c.balanceNow <- struct{}{}:
	default: // a round is pending already
	}
}

// holds reports whether c reads the shard id now.
func (c *Consumer) holds(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, held := c.shards[id]
	return held
}

// giveBack releases the leases given to c that it will not start: it
// stops.
func (c *Consumer) giveBack(ls []lease.Lease) {
	for _, l := range ls {
		ctx, cancel := c.storeContext(context.Background())
		_, err := c.cfg.Store.Release(ctx, l)
		cancel()
		if err != nil && !lost(err) {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: releasing a lease given while stopping failed; it expires instead",
				slog.String(attrShardID, l.Key.ShardID), slog.String(attrError, err.Error()))
		}
	}
}

// takeGifts returns the leases given to c since the last call.
func (c *Consumer) takeGifts() []lease.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.gifts
	c.gifts = nil
	return g
}

// Run runs every member (Consumer.Run) until ctx ends, then stops them
// gracefully, together. A member that cannot start stops the others and
// Run returns its error.
func (g *Group) Run(ctx context.Context) error {
	if len(g.members) == 1 {
		return g.members[0].Run(ctx)
	}
	eg, ectx := errgroup.WithContext(ctx)
	for _, c := range g.members {
		eg.Go(func() error { return c.Run(ectx) })
	}
	return eg.Wait()
}

// Seek moves the readers of every member (Consumer.Seek). AtSequence names
// its shard by id, or as "stream:shardId" (Key.String) in a group of
// several: the id alone is that shard of whichever stream holds it, and an
// error when several streams' shards of that id are held here (the
// streams' shard ids are alike, a sequence number is of one stream), which
// moves nothing.
func (g *Group) Seek(ctx context.Context, pos Position) error {
	if len(g.members) == 1 {
		return g.members[0].Seek(ctx, pos)
	}
	if err := pos.checkSeek(); err != nil {
		return err
	}
	if stream, _, ok := strings.Cut(pos.shard, ":"); pos.kind == posSequence && ok && g.member(stream) == nil {
		return fmt.Errorf("consumer: seek: stream %s is not one of the streams read (%s)", stream, strings.Join(g.Streams(), ", "))
	}
	if pos.kind == posSequence && !strings.Contains(pos.shard, ":") {
		var holders []string
		for _, c := range g.members {
			if slices.Contains(c.Owned(), pos.shard) {
				holders = append(holders, c.cfg.Stream)
			}
		}
		if len(holders) > 1 {
			return fmt.Errorf("consumer: seek: shard %s is held in streams %s: name it as stream:shardId", pos.shard, strings.Join(holders, ", "))
		}
	}
	var errs, refused []error
	for _, c := range g.members {
		if err := c.Seek(ctx, pos); err != nil {
			errs = append(errs, err)
			if _, notHeld := errors.AsType[notHeldError](err); !notHeld {
				refused = append(refused, err)
			}
		}
	}
	switch {
	case pos.kind != posSequence:
		return errors.Join(errs...)
	case len(refused) > 0:
		return errors.Join(refused...) // the holder refused the position
	case len(errs) < len(g.members):
		return nil // the others do not hold the shard
	}
	return errs[0] // held by none: each member says so alike
}

// Owned returns the shards the members hold, sorted: their ids in a group
// of one, else their keys ("stream:shardId").
func (g *Group) Owned() []string {
	if len(g.members) == 1 {
		return g.members[0].Owned()
	}
	var ids []string
	for _, c := range g.members {
		for _, id := range c.Owned() {
			ids = append(ids, lease.Key{Stream: c.cfg.Stream, ShardID: id}.String())
		}
	}
	slices.Sort(ids)
	return ids
}

// Owner returns the members' owner id.
func (g *Group) Owner() string { return g.primary().Owner() }
