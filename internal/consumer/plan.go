package consumer

import (
	"cmp"
	"hash/fnv"
	"maps"
	"slices"

	"github.com/shardsettle/lambdaadapter/lease"
)

// planInput is what balancing plans from: the stream's rows as one read
// returned them, the last listing of its shards, which shards this worker
// runs, and what its tracker judged of the other workers' leases and rows.
type planInput struct {
	me      string
	snap    lease.Snapshot
	view    view            // the listing, and the rows by shard id
	held    map[string]bool // the shards this worker runs (reading or stopping)
	expired map[string]bool // shard ids of owned leases whose counter stood still for the lease duration
	dead    map[string]bool // owners of worker rows whose counter stood still for the lease duration
}

// plan is what balancing does on one read of the table. Every write it
// asks for is conditional on the row as read, so a plan made from a read
// that is out of date changes nothing it should not.
type plan struct {
	// lose are the held shards whose row names another owner, or is gone.
	lose []string
	// handOver are the held shards whose lease another worker asked for.
	handOver []handoff
	// adopt are rows that name this worker but that it does not run:
	// leases handed over to it.
	adopt []lease.Lease
	// take are the free and expired leases this worker may take, in
	// order; it takes want of them (up to its share), a take that fails
	// (another worker was first) replaced by the next one.
	take []lease.Lease
	want int
	// asks plans the hand-overs to ask for once the takes are done (see
	// requests).
	asks askPlan
	// cleanup are the rows of trimmed shards that may be deleted now.
	cleanup []lease.Lease
	// dead are the rows of workers that died.
	dead []lease.Worker
	// target is this worker's share: ceil(eligible leases / live workers).
	target int
}

// handoff is a held shard's lease that another worker asked for.
type handoff struct {
	row lease.Lease // the row with the request
	to  string
}

// planBalance plans one round of balancing, as a pure function of in. Each
// live worker (registered with a recent heartbeat, or holding a lease that
// is not expired) aims at ceil(shards / workers) leases: this worker takes
// free and expired leases up to that share, and, when not enough are free,
// asks busier workers to hand leases over (RequestHandoff): the owner stops
// reading the shard, settles what it has in flight, checkpoints and
// transfers the lease, and only then this worker reads it, so a planned
// move re-delivers nothing. A lease whose owner died expires and is taken
// as before.
//
// The plan also stops the held shards whose lease another worker holds
// now, hands over the leases other workers asked for, starts the leases
// handed over to this worker, and removes the rows of shards trimmed away
// and of workers that died.
func planBalance(in planInput) plan {
	me := in.me
	var p plan
	for _, l := range in.snap.Leases {
		id := l.Key.ShardID
		if !in.held[id] {
			continue
		}
		switch {
		case l.Owner != me:
			p.lose = append(p.lose, id)
		case l.Handoff != "" && l.Handoff != me:
			p.handOver = append(p.handOver, handoff{row: l, to: l.Handoff})
		}
	}
	for id := range in.held {
		if _, ok := in.view.byID[id]; !ok {
			p.lose = append(p.lose, id) // its row is gone
		}
	}
	slices.Sort(p.lose)
	live := map[string]int{me: 0}
	for _, w := range in.snap.Workers {
		switch {
		case w.Owner == me:
		case in.dead[w.Owner]:
			p.dead = append(p.dead, w)
		default:
			live[w.Owner] = 0
		}
	}
	expired := func(l lease.Lease) bool { return l.Owner == "" || in.expired[l.Key.ShardID] }
	var eligible []lease.Lease
	mine, requested := 0, 0
	for _, l := range in.snap.Leases {
		id := l.Key.ShardID
		if in.view.trimmed(id) {
			if cleanable(l, in, expired) {
				p.cleanup = append(p.cleanup, l)
			}
			continue
		}
		if _, ok := in.view.listed[id]; !ok || l.Checkpoint == lease.ShardEnd || !in.view.parentsDone(l) {
			continue // newer than the listing, finished, or waiting for its parents
		}
		eligible = append(eligible, l)
		if l.Handoff == me {
			requested++
		}
		switch {
		case l.Owner == me:
			mine++
			if !in.held[id] {
				p.adopt = append(p.adopt, l)
			}
		case expired(l):
			p.take = append(p.take, l)
		default:
			live[l.Owner]++
		}
	}
	if len(eligible) == 0 {
		p.take = nil
		return p
	}
	p.target = (len(eligible) + len(live) - 1) / len(live)
	p.want = min(max(p.target-mine, 0), len(p.take))
	if p.want == 0 {
		p.take = nil
	}
	p.asks = askPlan{me: me, eligible: eligible, live: live, expired: expired, target: p.target, have: mine + requested}
	return p
}

// withoutTakes returns p without its takes and hand-over requests: the
// leader's assignment plans those, or a starting fleet is waited for
// (leadership.selfForming).
func (p plan) withoutTakes() plan {
	p.take, p.want, p.asks = nil, 0, askPlan{}
	return p
}

// mostFree reports whether more than half of leases are free and were
// never held (or were released): a fleet starting from nothing, or coming
// back after every worker stopped.
func mostFree(leases []lease.Lease) bool {
	n := 0
	for _, l := range leases {
		if l.Owner == "" {
			n++
		}
	}
	return 2*n > len(leases)
}

// askPlan is what planning the hand-over requests needs, kept for once the
// takes are done.
type askPlan struct {
	me       string
	eligible []lease.Lease
	live     map[string]int // leases per other live worker (this worker's own count in have)
	expired  func(lease.Lease) bool
	target   int
	have     int // leases this worker holds or asked for, before its takes
}

// requests plans the hand-overs to ask for once took of the planned takes
// succeeded: from the busiest workers, while this worker stays below its
// share (planRequests).
func (p plan) requests(took int) []ask {
	a := p.asks
	if a.target == 0 {
		return nil
	}
	return planRequests(a.me, a.eligible, maps.Clone(a.live), a.expired, a.target, a.have+took)
}

// planRequests plans the hand-over requests that bring this worker (holding
// or having asked for have) to target: from a worker above the share, or at
// the share while this worker is at least two below it (6 shards, 4
// workers: 2, 2, 1, 1), busiest workers first. Among equally busy workers
// each requester has an order of its own (a hash of both ids), so that
// workers joining together spread their requests instead of all draining
// the same one. Each ask names how many leases to get from one owner and
// the owner's leases to ask for, in order: a request that fails (another
// worker asked first) is replaced by the next lease. A lease already asked
// for by another worker is left alone.
func planRequests(me string, eligible []lease.Lease, live map[string]int, expired func(lease.Lease) bool, target, have int) []ask {
	if have >= target {
		return nil
	}
	owners := make([]string, 0, len(live))
	for o := range live {
		if o != me {
			owners = append(owners, o)
		}
	}
	slices.SortFunc(owners, func(a, b string) int {
		if c := cmp.Compare(live[b], live[a]); c != 0 {
			return c
		}
		if c := cmp.Compare(spread(me, a), spread(me, b)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var out []ask
	for _, o := range owners {
		a := ask{owner: o}
		for n := live[o]; have < target && (n > target || (n == target && have < target-1)); n-- {
			a.n++
			have++
		}
		if a.n == 0 {
			continue
		}
		for _, l := range eligible {
			if l.Owner == o && l.Handoff == "" && !expired(l) {
				a.leases = append(a.leases, l)
			}
		}
		a.n = min(a.n, len(a.leases))
		if a.n > 0 {
			out = append(out, a)
		}
		if have >= target {
			break
		}
	}
	return out
}

// ask is a plan to ask owner to hand n of leases over, in order.
type ask struct {
	owner  string
	n      int
	leases []lease.Lease
}

// spread is the order in which requester me looks at owner among equally
// busy owners.
func spread(me, owner string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(me))
	h.Write([]byte{0})
	h.Write([]byte(owner))
	return h.Sum64()
}

// cleanable reports whether the row l of a trimmed shard may be deleted
// now: it is free, expired or this worker's without running it, and
// nothing needs it any more (it is SHARD_END, or every child has a
// checkpoint of its own, so no child would start from the configured
// position instead of continuing after it).
func cleanable(l lease.Lease, in planInput, expired func(lease.Lease) bool) bool {
	switch {
	case expired(l):
	case l.Owner == in.me && !in.held[l.Key.ShardID]:
	default:
		return false
	}
	if l.Checkpoint == lease.ShardEnd {
		return true
	}
	for _, child := range in.snap.Leases {
		if slices.Contains(child.ParentShardIDs, l.Key.ShardID) && child.Checkpoint == "" {
			return false
		}
	}
	return true
}
