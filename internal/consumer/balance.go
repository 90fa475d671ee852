package consumer

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/internal/settle"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
)

// heartbeat bumps this worker's row in the lease table, so other workers
// count it when they balance.
func (c *Consumer) heartbeat(ctx context.Context) error {
	// One at a time with unregister: a heartbeat under way when the stop
	// removes the row would write it back.
	c.hbTurn <- struct{}{}
	defer func() { <-c.hbTurn }()
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return nil // leaving: its row is removed (stopShards)
	}
	load := c.meter.measure(time.Now(), c.heldShards())
	sctx, cancel := c.storeContext(ctx)
	defer cancel()
	w, err := c.cfg.Store.Heartbeat(sctx, c.cfg.Stream, c.cfg.Owner, load)
	if err != nil {
		w = lease.Worker{}
	}
	c.mu.Lock()
	c.self, c.lastLoad = w, load
	if c.stopped {
		c.unregistered = false // written after the stop removed the row: removed again at the end of Run
	}
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
	c.hbTurn <- struct{}{} // after a heartbeat under way (see heartbeat)
	defer func() { <-c.hbTurn }()
	ctx, cancel := c.storeContext(context.Background())
	defer cancel()
	c.mu.Lock()
	w, gone := c.self, c.unregistered
	c.mu.Unlock()
	if gone {
		return
	}
	if w.Owner != "" {
		err := c.cfg.Store.RemoveWorker(ctx, w)
		if err == nil || !errors.Is(err, lease.ErrLeaseLost) {
			c.mu.Lock()
			c.unregistered = err == nil && c.self == w
			c.mu.Unlock()
			return
		}
	}
	snap, err := c.cfg.Store.Snapshot(ctx, c.cfg.Stream)
	if err != nil {
		return
	}
	removed := true
	for _, row := range snap.Workers {
		if row.Owner == c.cfg.Owner {
			removed = c.cfg.Store.RemoveWorker(ctx, row) == nil
		}
	}
	c.mu.Lock()
	c.unregistered = removed && c.self == w
	c.mu.Unlock()
}

// renew heartbeats and renews every held lease, concurrently. A lease that
// was lost stops its shard at once (shard.renew); a lease another worker
// asked for is handed over; one that fails otherwise is tried again at the
// next round, which comes sooner (see renewer), and its shard stops on its
// own once its fence lapses (see fenceMargin). It reports whether a renewal
// failed that way.
func (c *Consumer) renew(ctx context.Context) bool {
	_ = c.heartbeat(ctx)
	c.renewLeadership(ctx)
	var nfailed atomic.Int32
	_ = concurrently(c.heldShards(), func(s *shard) error {
		l, err := s.renew(ctx)
		switch {
		case err == nil:
			if l.Handoff != "" && l.Handoff != c.cfg.Owner {
				c.handOver(ctx, s, l.Handoff)
			}
		case !lost(err) && !errors.Is(err, errStopped) && ctx.Err() == nil:
			nfailed.Add(1)
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: renewing a lease failed; will retry", slog.String(attrShardID, s.id), slog.String(attrError, err.Error()),
				slog.Duration("fenced_in", s.untilFence()))
		}
		return nil
	})
	return nfailed.Load() > 0
}

// handOver asks s to stop and hand its lease over to the worker to, which
// asked for it (seen in a renewal's answer or a read of the table).
func (c *Consumer) handOver(ctx context.Context, s *shard, to string) {
	if !s.stopping() {
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: handing a lease over", slog.String(attrShardID, s.id), slog.String("to", to))
	}
	s.stopGracefully(stopRequest{reason: stopHandedOver, to: to})
}

// balance is one balancing round: it reads the leader row to learn its
// role (lead.go), then follows the leader, or reads the stream's rows and
// leads or balances for itself.
func (c *Consumer) balance(ctx context.Context) {
	r := c.roleFor(ctx)
	c.mu.Lock()
	c.setRole(r)
	c.mu.Unlock()
	if r == roleFollowing {
		c.follow(ctx)
		return
	}
	c.selfBalance(ctx)
}

// selfBalance reads the stream's rows and balances on them (balanceWith);
// the leader of a group of several reads every stream's rows at once.
func (c *Consumer) selfBalance(ctx context.Context) {
	streams := []string{c.cfg.Stream}
	c.mu.Lock()
	if c.leader.role == roleLeading && c.leading() {
		streams = c.grp.Streams()
	}
	c.mu.Unlock()
	snaps := c.snapshots(ctx, streams)
	snap, ok := snaps[c.cfg.Stream]
	switch {
	case ok:
		c.balanceWithAll(ctx, &snap, snaps)
	case len(snaps) > 0:
		// The leader's own stream was not read: it plans the others.
		c.balanceWithAll(ctx, nil, snaps)
	}
}

// snapshots reads the rows of streams: with one Scan when the store can
// (lease.DynamoDB.SnapshotStreams), else one per stream. A stream whose
// rows could not be read is missing from the result (logged).
func (c *Consumer) snapshots(ctx context.Context, streams []string) map[string]lease.Snapshot {
	sctx, cancel := c.storeContext(ctx)
	defer cancel()
	fail := func(err error) {
		if ctx.Err() == nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: reading the lease table failed; will retry", slog.String(attrError, err.Error()))
		}
	}
	if m, ok := c.cfg.Store.(streamsSnapshotter); ok && len(streams) > 1 {
		snaps, err := m.SnapshotStreams(sctx, streams...)
		if err != nil {
			fail(err)
		}
		for s, snap := range snaps {
			c.noteMalformed(ctx, s, snap)
		}
		return snaps
	}
	snaps := make(map[string]lease.Snapshot, len(streams))
	for _, s := range streams {
		snap, err := c.cfg.Store.Snapshot(sctx, s)
		if err != nil {
			fail(err)
			continue
		}
		c.noteMalformed(ctx, s, snap)
		snaps[s] = snap
	}
	return snaps
}

// noteMalformed logs the rows of stream that its read snap could not
// decode (lease.Snapshot.Malformed), each once while it stays so: a
// warning naming its key and what is wrong, with the number of the
// stream's rows in that state. Such a row is left out of balancing; a
// lease row's shard is neither read nor given a new row (discover) until
// the row is repaired or deleted. The state is kept by the group's member
// of stream, whichever member read it.
func (c *Consumer) noteMalformed(ctx context.Context, stream string, snap lease.Snapshot) {
	m := c.grp.member(stream)
	if m == nil {
		m = c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(snap.Malformed) == 0 && len(m.malformed) == 0 {
		return
	}
	seen := m.malformed
	m.malformed = make(map[string]string, len(snap.Malformed))
	for key, err := range snap.Malformed {
		msg := err.Error()
		m.malformed[key] = msg
		if seen[key] != msg {
			m.log.LogAttrs(ctx, slog.LevelWarn, "consumer: a lease table row cannot be read; skipped until it is repaired or deleted",
				slog.String("lease_key", key), slog.String(attrError, msg), slog.Int("malformed_rows", len(snap.Malformed)))
		}
	}
}

// streamsSnapshotter is a store that reads the rows of several streams
// at once (lease.DynamoDB, lease.Memory).
type streamsSnapshotter interface {
	SnapshotStreams(ctx context.Context, streams ...string) (map[string]lease.Snapshot, error)
}

// balanceWith balances on the stream's rows as just read (balanceWithAll).
func (c *Consumer) balanceWith(ctx context.Context, snap lease.Snapshot) {
	c.balanceWithAll(ctx, &snap, nil)
}

// balanceWithAll balances on the stream's rows as just read, in the role
// of the last round: the leader plans for all (lead), on the rows of the
// group's other streams in snaps when they were read with them; a worker
// in the self role plans for itself (planBalance, a pure function of what
// it read) and carries the plan out; a follower has nothing to do with
// them. snap is nil when the stream's rows could not be read (only the
// leader of a group is called so: it plans the other streams).
func (c *Consumer) balanceWithAll(ctx context.Context, snap *lease.Snapshot, snaps map[string]lease.Snapshot) {
	c.mu.Lock()
	r := c.leader.role
	if r == roleLeading && !c.leading() {
		r = roleSelf
	}
	c.mu.Unlock()
	switch r {
	case roleFollowing:
		return
	case roleLeading:
		c.lead(ctx, snap, snaps)
		return
	}
	if snap == nil {
		return
	}
	c.mu.Lock()
	in, held, ok := c.planInput(*snap)
	c.mu.Unlock()
	if !ok {
		return
	}
	p := c.selfPlan(in, planBalance(in))
	if !c.awaitsPlan(ctx, in) {
		c.act(ctx, p, held, in.view)
	}
}

// planInput is what planning needs of the stream's rows as just read and
// of this worker's shards, with the tracker fed those rows; ok is false
// when the worker stops or has not listed the shards yet. c.mu is held.
func (c *Consumer) planInput(snap lease.Snapshot) (in planInput, held map[string]*shard, ok bool) {
	if c.stopped || c.listed == nil {
		return planInput{}, nil, false
	}
	c.tracker.Observe(snap.Leases)
	c.tracker.ObserveWorkers(snap.Workers)
	in = planInput{me: c.cfg.Owner, snap: snap, held: make(map[string]bool, len(c.shards)), expired: map[string]bool{}, dead: map[string]bool{},
		view: view{listed: c.listed, maxListed: c.maxListed, byID: make(map[string]lease.Lease, len(snap.Leases))}}
	live := make(map[string]bool, len(snap.Workers))
	for _, w := range snap.Workers {
		if c.tracker.WorkerExpired(w) {
			in.dead[w.Owner] = true
		} else {
			live[w.Owner] = true
		}
	}
	directed := c.directed
	c.directed = nil
	for _, l := range snap.Leases {
		id := l.Key.ShardID
		in.view.byID[id] = l
		if l.Owner != "" && c.tracker.Expired(l) {
			in.expired[id] = true
		}
		switch d, ok := directed[id]; {
		case !ok:
		case l.Owner != d.to || l.Counter != d.counter:
			// Started (the recipient's first write bumps the counter),
			// or moved on.
		case !live[d.to]:
			// Given to a worker that stopped before it started it (its
			// row is gone: it removes it first thing when it stops): it
			// never reads the shard, and a start it might still try
			// fails on the counter, so the lease is planned now.
			in.expired[id] = true
		default:
			c.direct(id, d) // not started yet
		}
	}
	held = make(map[string]*shard, len(c.shards))
	for id, s := range c.shards {
		in.held[id] = true
		held[id] = s
	}
	return in, held, true
}

// direction is a lease the leader gave the worker to (Consumer.directed),
// with the counter its take wrote.
type direction struct {
	to      string
	counter int64
}

// direct notes that the lease of shard id was given (see
// Consumer.directed). c.mu is held.
func (c *Consumer) direct(id string, d direction) {
	if c.directed == nil {
		c.directed = map[string]direction{}
	}
	c.directed[id] = d
}

// act carries out the plan p, made with the shards held and the view v.
func (c *Consumer) act(ctx context.Context, p plan, held map[string]*shard, v view) {
	for _, id := range p.lose {
		held[id].stopAt(stopLost)
	}
	for _, h := range p.handOver {
		s := held[h.row.Key.ShardID]
		s.setLease(h.row)
		c.handOver(ctx, s, h.to)
	}
	for _, l := range p.adopt {
		c.adopt(ctx, l, v)
	}
	c.cleanUp(ctx, p.cleanup, p.dead)
	// Free and expired leases up to the share, taken concurrently; a lease
	// another worker took first is replaced by the next one.
	available, want, took := p.take, p.want, 0
	for len(available) > 0 && want > 0 {
		n := min(want, len(available))
		var ok atomic.Int64
		_ = concurrently(available[:n], func(l lease.Lease) error {
			if c.take(ctx, l, v) {
				ok.Add(1)
			}
			return nil
		})
		want -= int(ok.Load())
		took += int(ok.Load())
		available = available[n:]
	}
	for _, a := range p.requests(took) {
		got := 0
		for _, l := range a.leases {
			if got == a.n {
				break
			}
			if c.request(ctx, l) {
				got++
			}
		}
	}
}

// request asks the owner of l to hand it over to this worker; it reports
// whether the request was written.
func (c *Consumer) request(ctx context.Context, l lease.Lease) bool {
	_, err := c.write(ctx, l, "asking for a lease", func(ctx context.Context, l lease.Lease) (lease.Lease, error) {
		return c.cfg.Store.RequestHandoff(ctx, l, c.cfg.Owner)
	})
	if err != nil {
		return false
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: asked for a lease", slog.String(attrShardID, l.Key.ShardID), slog.String("from", l.Owner))
	return true
}

// write makes one conditional store write of the lease l (w), bounded by
// storeContext. A failure is logged as doing's, but for a lost race (the
// row changed since it was read: another worker was first) or a stop.
func (c *Consumer) write(ctx context.Context, l lease.Lease, doing string, w func(context.Context, lease.Lease) (lease.Lease, error), attrs ...slog.Attr) (lease.Lease, error) {
	sctx, cancel := c.storeContext(ctx)
	defer cancel()
	got, err := w(sctx, l)
	if err != nil && !lost(err) && ctx.Err() == nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: "+doing+" failed",
			append([]slog.Attr{c.shardAttr(l.Key), slog.String(attrError, err.Error())}, attrs...)...)
	}
	return got, err
}

// shardAttr names the shard of k in a log line of this consumer, whose
// lines carry its stream: by id, or, for a shard of another stream (the
// group's leader plans every stream), as "stream:shardId".
func (c *Consumer) shardAttr(k lease.Key) slog.Attr {
	if k.Stream != c.cfg.Stream {
		return slog.String(attrShardID, k.String())
	}
	return slog.String(attrShardID, k.ShardID)
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
	since := time.Now()
	held, err := c.write(ctx, l, doing, write)
	if err != nil {
		return false
	}
	if held.Checkpoint == "" && c.startFor(held, v).kind == posLatest {
		// Nothing settled in this shard yet, and it starts at the tip: the
		// tip as of now is written down before anything is read, so that
		// whoever holds the lease next (after a hand-over, or this worker's
		// death) reads from the same point on, not from the tip of its own
		// time, which would skip what was written in between.
		pin := latestPin(time.Now())
		pinned, err := c.write(ctx, held, "writing where the shard starts", func(ctx context.Context, l lease.Lease) (lease.Lease, error) {
			return c.cfg.Store.Checkpoint(ctx, l, pin, 0)
		})
		if err != nil {
			// Not started: the lease expires, and its next holder (this
			// worker or another) tries again.
			return false
		}
		held = pinned
	}
	return c.start(ctx, held, since, v, from)
}

// latestPrefix starts the checkpoint of a lease that started at the tip
// (Latest) before any of its records settled: "LATEST@" and the time, in
// Unix milliseconds, from which its readers read (AT_TIMESTAMP). The time
// is latestSkew before the first reader's start, so that a record the tip
// would have given it is not missed for a difference between this
// worker's clock and Kinesis's arrival times; a record that arrived in
// those seconds before the start may be handled.
const (
	latestPrefix = "LATEST@"
	latestSkew   = 5 * time.Second
)

// latestPin is the checkpoint of a lease that starts at the tip at now.
func latestPin(now time.Time) string {
	return latestPrefix + strconv.FormatInt(now.Add(-latestSkew).UnixMilli(), 10)
}

// LatestStart returns the time from which the lease with checkpoint cp is
// read when it was started at the tip before anything settled in it (a
// checkpoint "LATEST@" and the time), and whether cp is such a checkpoint.
func LatestStart(cp string) (time.Time, bool) { return parseLatestPin(cp) }

// parseLatestPin returns the time of a checkpoint written by latestPin.
func parseLatestPin(cp string) (time.Time, bool) {
	ms, ok := strings.CutPrefix(cp, latestPrefix)
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(n), true
}

// start starts the shard of the lease held, which this worker now owns
// through a write that started at since.
func (c *Consumer) start(ctx context.Context, held lease.Lease, since time.Time, v view, from string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false // the lease expires: another worker takes it
	}
	if s := c.shards[held.Key.ShardID]; s != nil {
		s.setLease(held)
		return true
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: lease taken", slog.String(attrShardID, held.Key.ShardID),
		slog.String("from", from), slog.String("checkpoint", held.Checkpoint), slog.Int64("counter", held.Counter))
	s := c.newShard(held, since)
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
	c.group.Go(func() { s.run(pos) })
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
	if t, ok := parseLatestPin(l.Checkpoint); ok {
		return AtTimestamp(t) // started at the tip then (claim)
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
