package consumer

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/awserr"
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
	// fleet are the live workers (by owner id) of the leader's last plan,
	// nil before its first (assignInput.forming).
	fleet []string
	// formed is when the leader made its first plan; again asks Run's loop
	// for another round in formingWait (a plan waited for a starting fleet).
	formed time.Time
	again  bool
	// tight is until when the leader plans with startTolerance: its plan
	// gave out a starting fleet's leases (assignment.starting) within the
	// last startTight lease durations.
	tight time.Time
	// joined counts the workers that joined the fleet since it last
	// shrank (a worker left or died) or formed (assignInput.joined).
	joined int
	// said is how the leader row, as this worker's last round read it,
	// said the fleet balances, when that made the worker balance for
	// itself ("" otherwise); waited is since when such a worker told
	// plan:self has waited for the leader's plan (awaitsPlan), zero when
	// it has not.
	said   string
	waited time.Time
	// selfFleet are the live workers (by owner id, this one among them)
	// of this worker's last round balancing for itself, and selfFormed
	// since when it has found most leases free (selfForming).
	selfFleet  []string
	selfFormed time.Time
}

// selfPlan returns p, the plan of a worker balancing for itself on in
// (planBalance), without its takes while it waits for a starting fleet
// (selfForming).
func (c *Consumer) selfPlan(in planInput, p plan) plan {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader.selfForming(in, p, c.cfg.LeaseDuration) {
		return p.withoutTakes()
	}
	return p
}

// selfForming reports whether this worker, balancing for itself on in
// with the plan p, waits for a starting fleet before it takes free
// leases: most of p's eligible leases are free (mostFree), the
// live workers' rows it read differ from those of its last round (the
// first round's always do), and it has found most leases free for less
// than D/4. It then balances again formingWait later (leadership.again).
// The leader waits so for a starting fleet (assignInput.forming); a
// worker balancing for itself (a fleet with a worker of an older version,
// or a table without the owner index) took its share of the rows it saw
// at once, ceil(shards / workers seen), and when 50 started together the
// first to balance took hundreds, which the others then asked for: 1,894–
// 2,380 moves for 1,000 leases in 10 of 12 such starts (the skewed scale
// simulation, -scalesim.older=1). c.mu is held.
func (l *leadership) selfForming(in planInput, p plan, d time.Duration) bool {
	owners := []string{in.me}
	for _, w := range in.snap.Workers {
		if w.Owner != in.me && !in.dead[w.Owner] {
			owners = append(owners, w.Owner)
		}
	}
	slices.Sort(owners)
	changed := !slices.Equal(l.selfFleet, owners)
	l.selfFleet = owners
	if !mostFree(p.asks.eligible) {
		l.selfFormed = time.Time{}
		return false
	}
	if l.selfFormed.IsZero() {
		l.selfFormed = time.Now()
	}
	if changed && time.Since(l.selfFormed) < d/4 {
		l.again = true
		return true
	}
	return false
}

// plans records owners (sorted) as the fleet the leader plans for and
// returns how many of them joined since the fleet last shrank or formed
// (assignInput.joined). The count is kept while the fleet only grows, not
// only until a plan finds it even: the mean the joiners lowered stays
// lowered, and a worker it left between the tolerance and joinedLimit
// above it gave a lease as soon as a plan found the fleet even (the skewed
// scale simulation, BENCHMARKS.md: the second join of one took 2 moves,
// the fewest 1, in 2 of 7 runs). A worker that leaves or dies raises the
// mean again, and the count starts over.
func (l *leadership) plans(owners []string, forming bool) int {
	if forming || l.fleet == nil {
		l.joined = 0
	} else {
		for _, o := range l.fleet {
			if _, found := slices.BinarySearch(owners, o); !found {
				l.joined = 0 // shrank
				break
			}
		}
		for _, o := range owners {
			if _, found := slices.BinarySearch(l.fleet, o); !found {
				l.joined++
			}
		}
	}
	l.fleet = owners
	return min(l.joined, len(owners)-1)
}

// leading reports whether this worker holds the leader row, renewed within
// the fence (as for a shard's lease: see fenceMargin).
func (c *Consumer) leading() bool {
	return c.leader.held && time.Since(c.leader.renewed) < c.cfg.LeaseDuration-fenceMargin(c.cfg.LeaseDuration)
}

// following reports whether the last balancing round followed the leader
// of another process: such a worker neither lists the shards nor reads the
// table.
func (c *Consumer) following() bool {
	c.mu.Lock()
	r := c.leader.role
	c.mu.Unlock()
	// A member whose primary leads lists its stream for the leader.
	return r == roleFollowing && (c.isPrimary() || c.grp.ledHere() == "")
}

// roleFor reads the leader row and decides this round's role: it takes
// the row when it is free or expired (or still its own), becoming the
// leader.
func (c *Consumer) roleFor(ctx context.Context) role {
	c.mu.Lock()
	c.leader.said = ""
	c.mu.Unlock()
	if !c.isPrimary() {
		return c.memberRole(ctx)
	}
	c.mu.Lock()
	if c.leading() {
		c.mu.Unlock()
		return roleLeading
	}
	c.mu.Unlock()
	key := c.leaderKey()
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
	c.grp.readRow(row)
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
		got, err := write(sctx, row)
		if err == nil {
			c.mu.Lock()
			c.leader = leadership{row: got, held: true, renewed: since, role: c.leader.role, noIndex: c.leader.noIndex, ended: -1}
			c.mu.Unlock()
			if row.Owner != c.cfg.Owner {
				c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: leading the stream's balancing", slog.String("from", row.Owner))
			}
			return roleLeading
		}
		if lost(err) {
			// Another worker took the row since it was read: the workers
			// of a starting fleet all find it free (or not there yet) and
			// race for it. The winner leads and says in its first round
			// how the fleet balances; until then it is followed, as below,
			// not balanced against by count (the losers once took
			// hundreds of leases by count that its plans then moved: the
			// skewed scale simulation, 1 start in about 16 took 1,374–1,642
			// moves against 1,000).
			return roleFollowing
		}
	}
	return c.roleBy(row)
}

// roleBy is the role the leader row, as read, gives this worker when it
// does not lead: following (follows) or balancing for itself.
func (c *Consumer) roleBy(row lease.Lease) role {
	if c.follows(row) {
		return roleFollowing
	}
	c.mu.Lock()
	c.leader.said = row.Checkpoint
	c.mu.Unlock()
	return roleSelf
}

// setRole records r as the role of this round. c.mu is held.
func (c *Consumer) setRole(r role) {
	c.leader.role = r
	if r != roleSelf || c.leader.said != fleetSelf {
		c.leader.waited = time.Time{}
	}
}

// awaitsPlan reports whether this worker, which the leader row told to
// balance for itself (plan:self), waits for the leader's plan this round
// instead: the rows just read (in) show no live worker of an older
// version. The leader says plan:self while one runs, and plan:leader in
// its next round (every D/2) once the last has stopped; until then the
// others, balancing by count, would take the stopped worker's leases by
// count, and the plan would move many again (the end of a rolling
// deployment from a version before the leader: the skewed scale
// simulation, -scalesim.older=1, BENCHMARKS.md). It waits at most a
// lease duration (a leader that is gone lets its row expire after one,
// and a worker takes it), and not at all when the table has no owner
// index, the leader's other reason for plan:self (asked once a wait).
func (c *Consumer) awaitsPlan(ctx context.Context, in planInput) bool {
	c.mu.Lock()
	stale := c.leader.said == fleetSelf && !slices.ContainsFunc(in.snap.Workers, func(w lease.Worker) bool {
		return older(w, in.dead, c.cfg.Owner)
	})
	if !stale {
		c.leader.waited = time.Time{}
		c.mu.Unlock()
		return false
	}
	first := c.leader.waited.IsZero()
	if first {
		c.leader.waited = time.Now()
	}
	since := c.leader.waited
	c.mu.Unlock()
	if time.Since(since) >= c.cfg.LeaseDuration {
		return false
	}
	if first {
		sctx, cancel := c.storeContext(ctx)
		_, err := c.cfg.Store.Owned(sctx, c.cfg.Owner)
		cancel()
		if errors.Is(err, lease.ErrNoOwnerIndex) {
			c.mu.Lock()
			c.leader.waited = since.Add(-c.cfg.LeaseDuration) // not this time
			c.mu.Unlock()
			return false
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: the leader row says every worker balances for itself, but no worker of an older version is left; waiting for the leader's plan")
	}
	return true
}

// older reports whether w is the row of a live worker of an older version
// (it publishes no load), other than me's: while one runs, the leader has
// every worker balance for itself (plan:self).
func older(w lease.Worker, dead map[string]bool, me string) bool {
	return w.Load == nil && !dead[w.Owner] && w.Owner != me
}

// follows reports whether the leader row, as read, has this worker follow
// the leader: the leader plans this worker's stream, or has not said yet
// what it plans (it says so in its first round). A worker of a starting
// fleet waits for that plan rather than taking leases by count, which the
// plan would move again; for a group's member, a leader that turns out
// not to plan its stream costs a round. A group's member also waits while
// the row is free and says nothing: its primary takes the row in its next
// round (or loses it to another worker's, which then plans), as a primary
// that reads it free does at once. (A starting service of 50 workers
// reading 4 streams once had one member take all 250 leases of its stream
// by count before any leader was there, and the leader's plans moved
// them again: the skewed scale simulation, -scalesim.streams=4.)
func (c *Consumer) follows(row lease.Lease) bool {
	undecided := row.Checkpoint == "" && (row.Owner != "" || !c.isPrimary())
	return fleetCovers(row.Checkpoint, c.grp.name, c.cfg.Stream) || undecided
}

// memberRole is roleFor for a group's member that is not its primary: it
// never competes for the leader row; it follows while the leader plans
// its stream (the primary of this process, or another worker's, as the
// row says) or has not said yet what it plans, and balances for itself
// otherwise.
func (c *Consumer) memberRole(ctx context.Context) role {
	if fleet := c.grp.ledHere(); fleet != "" {
		if fleetCovers(fleet, c.grp.name, c.cfg.Stream) {
			return roleFollowing
		}
		return roleSelf
	}
	if row, ok := c.grp.recentRow(sharedFor(c.cfg.LeaseDuration)); ok {
		return c.roleBy(row)
	}
	sctx, cancel := c.storeContext(ctx)
	row, err := c.cfg.Store.Get(sctx, c.leaderKey())
	cancel()
	if errors.Is(err, lease.ErrNotFound) {
		// Not there yet: the primary makes it in its round (follows).
		return roleFollowing
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: reading the leader row failed; balancing for this worker alone", slog.String(attrError, err.Error()))
		}
		return roleSelf
	}
	return c.roleBy(row)
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

// lead is the leader's balancing round on the stream's rows as just read
// (and, in a group of several, on every other member's stream's rows, read
// now): it decides how the fleet balances, then either plans for itself
// alone (self) or for every worker: its own shards as planBalance says
// (lost, handed over, adopted; rows of trimmed shards and dead workers
// removed, in every stream of the group), and the leases of all by
// planAssignment, carried out with takes on behalf of the worker given a
// free or expired lease and hand-over requests in its name.
//
// snap is nil when the stream's rows could not be read. A stream not read
// or not listed yet (its first listing failed) is left out of this round,
// the leader's own included: the other streams are planned all the same.
func (c *Consumer) lead(ctx context.Context, snap *lease.Snapshot, snaps map[string]lease.Snapshot) {
	fleet := c.grp.fleetLed()
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
	var parts []leadPart
	own, ownOK := leadPart{}, false
	if snap != nil {
		own, ownOK = c.leadPart(ctx, *snap)
	}
	if ownOK {
		parts = append(parts, own)
	}
	var missing []string // the other streams, unless read with this one
	for _, m := range c.grp.members[1:] {
		if _, ok := snaps[m.cfg.Stream]; !ok {
			missing = append(missing, m.cfg.Stream)
		}
	}
	if len(missing) > 0 {
		read := c.snapshots(ctx, missing)
		snaps = maps.Clone(snaps)
		if snaps == nil {
			snaps = read
		} else {
			maps.Copy(snaps, read)
		}
	}
	for _, m := range c.grp.members[1:] {
		if s, ok := snaps[m.cfg.Stream]; ok {
			if pt, ok := m.leadPart(ctx, s); ok {
				parts = append(parts, pt)
			}
		}
	}
	for _, pt := range parts {
		for _, w := range pt.snap.Workers {
			if older(w, pt.in.dead, c.cfg.Owner) {
				fleet = fleetSelf // it plans for itself
			}
		}
	}
	if len(parts) == 0 {
		return // stopping, or nothing listed yet
	}
	c.setFleet(ctx, fleet)
	if fleet == fleetSelf {
		// Every member reads the row and balances its stream for itself,
		// as this worker does, waiting as they do for a starting fleet.
		if ownOK {
			c.act(ctx, c.selfPlan(own.in, own.p), own.held, own.in.view)
		}
		c.observe(parts)
		return
	}
	in := c.assignInput(parts)
	owners := make([]string, 0, len(in.workers))
	for _, w := range in.workers {
		owners = append(owners, w.owner)
	}
	c.mu.Lock()
	in.recent, in.recentScales, in.recentModel = c.lastSeen, c.lastScales, c.lastModel
	if c.leader.fleet == nil {
		c.leader.formed = time.Now()
	}
	// A starting fleet is waited for (formingWait) while its workers
	// change, up to half a round after the leader's first plan.
	in.forming = (c.leader.fleet == nil || !slices.Equal(c.leader.fleet, owners)) && time.Since(c.leader.formed) < c.cfg.LeaseDuration/4
	in.joined = c.leader.plans(owners, in.forming)
	if !in.byCount && time.Now().Before(c.leader.tight) {
		in.tolerance = startTolerance
	}
	c.mu.Unlock()
	a := planAssignment(in)
	if c.log.Enabled(ctx, slog.LevelDebug) {
		c.logPlan(ctx, a)
	}
	if a.waiting {
		c.mu.Lock()
		c.leader.again = true
		c.mu.Unlock()
	}
	c.mu.Lock()
	if a.starting && len(a.takes) > 0 {
		c.leader.tight = time.Now().Add(startTight * c.cfg.LeaseDuration)
	}
	c.lastSeen, c.lastScales, c.lastModel = a.seen, a.scales, a.model
	c.mu.Unlock()
	if ownOK {
		c.act(ctx, own.p.withoutTakes(), own.held, own.in.view) // the assignment plans the takes
	}
	for _, pt := range parts {
		if pt.c != c {
			pt.c.cleanUp(ctx, pt.p.cleanup, pt.p.dead)
		}
	}
	_ = concurrently(a.takes, func(m move) error {
		if m.to == c.cfg.Owner && m.lease.Key.Stream == c.cfg.Stream { // planned only when ownOK
			c.take(ctx, m.lease, own.in.view)
			return nil
		}
		got, err := c.write(ctx, m.lease, "giving a lease", func(ctx context.Context, l lease.Lease) (lease.Lease, error) {
			return c.cfg.Store.Take(ctx, l, m.to)
		}, slog.String("to", m.to))
		if err != nil {
			return nil
		}
		if m.to == c.cfg.Owner {
			c.grp.member(m.lease.Key.Stream).give(got) // another stream of this process
		} else {
			c.grp.member(m.lease.Key.Stream).directTo(m.lease.Key.ShardID, direction{to: m.to, counter: got.Counter})
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: lease given", c.shardAttr(m.lease.Key), slog.String("to", m.to))
		return nil
	})
	_ = concurrently(a.moves, func(m move) error {
		if _, err := c.write(ctx, m.lease, "asking for a hand-over", func(ctx context.Context, l lease.Lease) (lease.Lease, error) {
			return c.cfg.Store.RequestHandoff(ctx, l, m.to)
		}); err != nil {
			return nil
		}

		c.log.LogAttrs(ctx, slog.LevelInfo, "consumer: hand-over asked", c.shardAttr(m.lease.Key), slog.String("from", m.lease.Owner), slog.String("to", m.to))
		return nil
	})
}

// observe keeps averaging the fleet's figures as the leader's plans do
// (each lease's throughput, the workers' smoothing factors, the cost
// model: lastSeen, lastScales, lastModel; planner.estimate alone, nothing
// planned) in a round in which it plans for itself alone, load-aware.
// When it plans for the fleet again
// (the last worker of an older version gone, the owner index added), its
// first plan prices the leases by figures averaged over the rounds before,
// not by one interval's: on those, the first plan after a rolling
// deployment moved leases that its next plans moved again (the skewed
// scale simulation, BENCHMARKS.md).
func (c *Consumer) observe(parts []leadPart) {
	if c.cfg.Assignment == AssignByCount {
		return
	}
	in := c.assignInput(parts)
	c.mu.Lock()
	in.recent, in.recentScales, in.recentModel = c.lastSeen, c.lastScales, c.lastModel
	c.mu.Unlock()
	p := newPlanner(in)
	c.mu.Lock()
	c.lastSeen, c.lastScales, c.lastModel = p.seen, p.scales, p.model
	c.mu.Unlock()
}

// directTo notes, for the leader's next rounds, that the lease of shard
// id of c's stream was given (d).
func (c *Consumer) directTo(id string, d direction) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.direct(id, d)
	c.mu.Unlock()
}

// leadPart is what the leader planned of one stream of its group: the
// stream's rows as read, what planning needs of them and of the member's
// shards, and the member's own plan (planBalance).
type leadPart struct {
	c    *Consumer // the group's member of the stream
	snap lease.Snapshot
	in   planInput
	held map[string]*shard
	p    plan
}

// leadPart plans the stream of c, a member of the leader's group, on its
// rows as just read. A shard that ended since the last read makes c list
// the stream, so that its children get rows: the leader itself at once
// (and plans on what that read), another member on its own goroutine
// (they are planned in the next round). ok is false when c stops or has
// not listed its shards yet.
func (c *Consumer) leadPart(ctx context.Context, snap lease.Snapshot) (leadPart, bool) {
	ended := endedIn(snap)
	c.mu.Lock()
	newlyEnded := ended > c.leader.ended && c.leader.ended >= 0
	c.leader.ended = ended
	c.mu.Unlock()
	if newlyEnded {
		if !c.isPrimary() {
			c.kickEnded()
		} else if s, err := c.discover(ctx); err == nil {
			snap = s
		}
	}
	c.mu.Lock()
	in, held, ok := c.planInput(snap)
	c.mu.Unlock()
	if !ok {
		return leadPart{}, false
	}
	return leadPart{c: c, snap: snap, in: in, held: held, p: planBalance(in)}, true
}

// assignInput is what planAssignment plans from: the eligible leases of
// every stream planned, as planBalance found them, and every live worker
// with the load it published (this worker's own as its last heartbeats
// measured it). A worker's CPU is the most its rows give (they measure one
// process), its shards those of every stream, and it receives leases of
// the streams where its row is live.
func (c *Consumer) assignInput(parts []leadPart) assignInput {
	a := assignInput{
		byCount:   c.cfg.Assignment == AssignByCount,
		maxMoves:  c.cfg.MaxMoves,
		tolerance: assignTolerance,
	}
	expired := map[string]func(lease.Lease) bool{}
	workers := map[string]*workerLoad{}
	add := func(owner, stream string, l *lease.Load) {
		w := workers[owner]
		if w == nil {
			w = &workerLoad{owner: owner, cpu: -1, streams: map[string]bool{}}
			workers[owner] = w
		}
		w.streams[stream] = true
		if l == nil {
			return
		}
		w.cpu = max(w.cpu, l.CPU)
		if w.shards == nil {
			w.shards = make(map[lease.Key]throughput, len(l.Shards))
		}
		for id, t := range l.Shards {
			w.shards[lease.Key{Stream: stream, ShardID: id}] = throughput{records: t.Records, bytes: t.Bytes, polls: t.Polls}
		}
	}
	for _, pt := range parts {
		stream := pt.c.cfg.Stream
		a.leases = append(a.leases, pt.p.asks.eligible...)
		expired[stream] = pt.p.asks.expired
		// The workers with a live row receive leases; an owner whose row
		// is gone (a dead worker's, removed before its leases expired)
		// only counts with the leases it holds (planAssignment).
		for _, w := range pt.snap.Workers {
			if w.Owner != c.cfg.Owner && !pt.in.dead[w.Owner] {
				add(w.Owner, stream, w.Load)
			}
		}
		pt.c.mu.Lock()
		load := pt.c.lastLoad
		pt.c.mu.Unlock()
		add(c.cfg.Owner, stream, load)
	}
	a.expired = func(l lease.Lease) bool {
		if f := expired[l.Key.Stream]; f != nil {
			return f(l)
		}
		return l.Owner == ""
	}
	for _, owner := range slices.Sorted(maps.Keys(workers)) {
		a.workers = append(a.workers, *workers[owner])
	}
	return a
}

// logPlan logs a plan at debug level: its takes and moves, and each
// worker's load as the plan figured it (in fractions of one worker's CPU,
// or in leases by count), after the plan.
func (c *Consumer) logPlan(ctx context.Context, a assignment) {
	loads := make([]slog.Attr, 0, len(a.load))
	for _, owner := range slices.Sorted(maps.Keys(a.load)) {
		loads = append(loads, slog.Float64(owner, a.load[owner]))
	}
	c.log.LogAttrs(ctx, slog.LevelDebug, "consumer: balancing plan", slog.Int("takes", len(a.takes)), slog.Int("moves", len(a.moves)),
		slog.Bool("waiting", a.waiting), slog.Attr{Key: "load", Value: slog.GroupValue(loads...)})
}

// assignTolerance is the hysteresis of load-aware assignment: the plan
// moves leases only while the busiest worker's load exceeds the mean by
// more than this fraction.
const assignTolerance = 0.15

// startTolerance is the hysteresis while a fleet starts: for startTight
// lease durations after the leader gave out the leases of a fleet starting
// from nothing, it evens the load to within half of assignTolerance, as its
// first figures of each shard come in and settle (their plain mean over
// the first rounds, see rateSmoothing). The
// start moves every lease anyway, so a few dozen more hand-overs then cost
// little; a fleet left with its busiest just under assignTolerance crosses
// it on the figures' noise later, one move at a time, when each move
// counts (a join needs one).
const startTolerance = assignTolerance / 2

// startTight is how many lease durations startTolerance holds.
const startTight = 9

// follow is a follower's balancing round: it finds the leases the leader
// gave it (the owner index; eventually consistent, so each is read again
// before it is adopted) and starts them. Losing a lease and being asked to
// hand one over are seen by the renewals. A table without the index makes
// the worker balance for itself (roleSelf) until it has one.
func (c *Consumer) follow(ctx context.Context) {
	for _, l := range c.takeGifts() {
		c.mu.Lock()
		_, held := c.shards[l.Key.ShardID]
		c.mu.Unlock()
		if !held {
			c.adopt(ctx, l, c.parentsView(ctx, l))
		}
	}
	keys, err := c.owned(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if !lasting(err) {
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: reading this worker's leases failed; will retry", slog.String(attrError, err.Error()))
			return
		}
		// The owner index cannot be read and will not be by retrying: not
		// ACTIVE yet where the leader sees it, or a task role without
		// dynamodb:Query on it. The leases given to this worker are read
		// from the table instead (as before the index), so that none is
		// left unread until it expires and is given again, round after
		// round (TestFollowerWithoutOwnerIndex). A failure that may pass
		// (throttling, a timeout) is retried next round, not turned into
		// Scans of the whole table by every follower.
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: this worker cannot query the owner index for its leases; reading the whole table instead", slog.String(attrError, err.Error()))
		var ok bool
		if keys, ok = c.ownedByScan(ctx); !ok {
			return
		}
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

// owned returns the keys of the leases the owner index names for this
// worker, in every stream: a group's member uses its primary's last query
// while it is recent (Group.queried), the primary shares its own.
func (c *Consumer) owned(ctx context.Context) ([]lease.Key, error) {
	if !c.isPrimary() {
		if keys, ok := c.grp.recentKeys(sharedFor(c.cfg.LeaseDuration)); ok {
			return keys, nil
		}
	}
	sctx, cancel := c.storeContext(ctx)
	keys, err := c.cfg.Store.Owned(sctx, c.cfg.Owner)
	cancel()
	if err == nil && c.isPrimary() {
		c.grp.queried(keys)
	}
	return keys, err
}

// lasting reports whether err, an owner-index query's, will not pass by
// retrying: the table has no ACTIVE owner index, or the caller may not
// query it.
func lasting(err error) bool {
	var e *awserr.Error
	return errors.Is(err, lease.ErrNoOwnerIndex) || errors.As(err, &e) && e.Kind == awserr.AccessDenied
}

// ownedByScan is owned read from the stream's rows (snapshots, a Scan,
// where owned queries the owner index): the keys of the leases that name
// this worker; ok is false when the rows could not be read (snapshots
// logged it).
func (c *Consumer) ownedByScan(ctx context.Context) (keys []lease.Key, ok bool) {
	snap, ok := c.snapshots(ctx, []string{c.cfg.Stream})[c.cfg.Stream]
	if !ok {
		return nil, false
	}
	for _, l := range snap.Leases {
		if l.Owner == c.cfg.Owner {
			keys = append(keys, l.Key)
		}
	}
	return keys, true
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
