package consumer

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/shardsettle/lambdaadapter/lease"
)

// assignInput is what the leader plans the whole fleet's assignment from:
// one read of the lease table and the load each worker published in its
// row.
type assignInput struct {
	// leases are the eligible leases (listed, unfinished, parents done) as
	// read: Owner, Handoff and Key are used.
	leases []lease.Lease
	// expired reports whether a lease is free (Owner == "") or its owner's
	// counter stood still for the lease duration; nil means only free
	// leases count as expired.
	expired func(lease.Lease) bool
	// workers are the live workers, each once (the leader among them).
	workers []workerLoad
	// byCount plans by counts, every lease costing the same, as planBalance
	// does: no worker above ceil(leases / workers).
	byCount bool
	// maxMoves bounds the hand-overs (moves) of one plan; takes are not
	// bounded. Below 1, a plan moves nothing.
	maxMoves int
	// tolerance is the hysteresis of load-aware planning: a plan moves
	// leases only while the busiest worker's load is above mean ×
	// (1+tolerance) or the least-loaded worker's below mean × (1−tolerance),
	// and only by moves that leave the donor a margin of tolerance/2 above
	// the receiver (see planAssignment). E.g. 0.1; at least twice the
	// relative noise of the CPU readings.
	tolerance float64
}

// workerLoad is what a worker publishes in its row: its CPU utilization
// over the last interval and the throughput of each shard it held in it.
type workerLoad struct {
	owner string
	// cpu is the worker's CPU utilization over the last interval, as a
	// fraction of its capacity (0..1, more when it used more than its
	// share); below 0 when unknown.
	cpu float64
	// shards is the throughput of each shard the worker held over the
	// interval, by key, those it held for part of it included.
	shards map[lease.Key]throughput
	// streams are the streams the worker reads (it has a live row in
	// each), nil for any: it receives leases of those streams only.
	streams map[string]bool
}

// reads reports whether w reads stream, so that it may receive its leases.
func (w workerLoad) reads(stream string) bool {
	return w.streams == nil || w.streams[stream]
}

// throughput is one shard's rate over the last interval as its worker
// measured it.
type throughput struct{ records, bytes float64 }

// move gives a lease to the worker to.
type move struct {
	lease lease.Lease
	to    string
}

// assignment is one plan of the leader for the whole fleet.
type assignment struct {
	// takes are free or expired leases, each to Take for the worker to.
	takes []move
	// moves are live leases whose owner is asked to hand them over to the
	// worker to (RequestHandoff), at most assignInput.maxMoves of them.
	moves []move
	// load is each worker's load, in the plan's cost units, once the plan
	// is carried out (leases in motion counted at their target).
	load map[string]float64
}

// The weights of the load model (see planAssignment), in bytes per second:
// the work of one record beside its bytes (a handler call, a settlement, a
// checkpoint's share: about 1.5 µs in BENCHMARKS.md, as much as decoding
// and copying a kilobyte), and the work of a shard that carries nothing (a
// GetRecords call each second, renewals: a few tens of µs, as much as
// eight such records a second). Only their ratios matter.
const (
	recordWeight = 1024
	shardWeight  = 8 * recordWeight
)

// weight is the share of its worker's CPU that t earns, before it is
// scaled by the worker's total.
func (t throughput) weight() float64 {
	return rate(t.bytes) + recordWeight*rate(t.records) + shardWeight
}

// rate is x as a rate: 0 when it is negative, NaN or infinite (a row
// written by a faulty worker).
func rate(x float64) float64 {
	if !(x >= 0) || math.IsInf(x, 1) {
		return 0
	}
	return x
}

// planAssignment plans one round of the leader: which free and expired
// leases to give to which worker (takes) and which live leases to move
// (moves, carried out as graceful hand-overs). It is a pure function of
// in, deterministic down to its floating point: two leaders that briefly
// coexist and read the same table make the same plan.
//
// # Cost model
//
// Every lease has a cost, in fractions of one worker's capacity; a
// worker's load is the sum of the costs of the leases it holds (a lease
// in motion, its Handoff set, counted at its target, or at its owner when
// the target is not a live worker). The workers are assumed equal in
// capacity (one ECS service, one task size), so loads of different
// workers compare.
//
//   - A shard's cost is estimated from the worker that reported it (its
//     owner, else the first other worker by owner id that held it over
//     the interval, such as the owner before a move): the worker's CPU ×
//     the shard's share of the worker's weighted throughput, where a
//     shard weighs its bytes/s + recordWeight × its records/s +
//     shardWeight, so that many tiny records count and an idle shard,
//     still polled, costs a little. The worker's CPU is attributed to its
//     shards in full: the process's own baseline is spread over them.
//   - A worker without metrics (cpu ≤ 0 or no shards) counts as average:
//     each of its leases costs the average cost of the leases that have
//     an estimate. So does a lease nobody reported (new, free, just moved
//     to a worker that has not reported it yet). When no lease has an
//     estimate, every lease costs 1.
//   - byCount: every lease costs 1.
//
// # Plan
//
// First the takes: free and expired leases, costliest first (then by shard
// id), each to the least-loaded worker (then the one with fewest leases,
// then by owner id), not to the owner of an expired lease when another
// worker is live.
//
// Then the moves, at most maxMoves: the receiver is the least-loaded
// worker, the donor the busiest one that can give (a donor that cannot is
// passed over for the rest of the plan). Load-aware, they go on while the
// donor's load is above mean × (1+tolerance) or the receiver's below mean ×
// (1−tolerance): the lower bound is what gives a joining worker its share
// in a fleet of more than 1/tolerance workers, where its joining leaves
// nobody above the upper one. By count, they go on while the donor holds
// at least two more leases than the receiver. The lease moved is the
// donor's (not in motion, not taken in this plan) whose cost x is closest
// to half the two loads' gap, so that the larger of the two loads after
// the move is the least it can be, among those that leave the donor a
// margin above the receiver's load before the move: L_d − x − L_r ≥
// tolerance/2 × (L_d − x + L_r) (by count: one lease). The plan stops when
// no donor has such a lease; with leases small enough, that leaves the
// busiest within (1+tolerance/2)/(1−tolerance/2) of the least loaded
// (1.105 for 0.1).
//
// # Stability
//
// Each move lowers the sum of the squared loads (by 2x(L_d − L_r − x) > 0),
// so repeated plans on costs that do not change converge and never cycle,
// and a plan made again on the state its moves produced moves nothing
// unless maxMoves cut it short (then it goes on toward the same end). For
// the lease to move straight back, the receiver's load without it would
// have to be the margin above the donor's, which the move left the margin
// below it. The margin is relative, so it holds under noise: with every
// worker's CPU reading off by a factor within 1 ± tolerance/2, the two
// conditions still exclude each other. Set tolerance to at least twice the
// relative noise of the CPU readings (0.1 for ±5%). A plan made on costs
// that changed (a worker's first metrics, leases of unknown cost becoming
// known) may move a lease back once, correcting the estimate.
func planAssignment(in assignInput) assignment {
	p := newPlanner(in)
	out := assignment{load: map[string]float64{}}
	if len(p.workers) == 0 {
		return out
	}
	out.takes = p.take()
	out.moves = p.move(in.maxMoves)
	for _, w := range p.workers {
		out.load[w.owner] = w.load
	}
	return out
}

// planner is the state of one planAssignment.
type planner struct {
	in      assignInput
	workers []*planned // by owner id
	byOwner map[string]*planned
	free    []costed // free and expired leases
}

// planned is one worker's state during planning.
type planned struct {
	owner   string
	load    float64
	n       int      // leases counted at it
	movable []costed // leases it may give (held, not in motion), by shard id
	stuck   bool     // has no lease to give this plan
	// rowless: an owner of live leases that is not among the workers (its
	// row is gone, as a dead worker's is before its leases expire): it
	// counts with its leases but never receives one.
	rowless bool
	// streams are the streams it reads, nil for any (workerLoad.streams).
	streams map[string]bool
}

// reads reports whether w may receive leases of stream.
func (w *planned) reads(stream string) bool {
	return !w.rowless && (w.streams == nil || w.streams[stream])
}

// costed is a lease and its cost.
type costed struct {
	l    lease.Lease
	cost float64
}

// byShard orders leases by shard id, then stream.
func byShard(a, b lease.Lease) int { return compareKeys(a.Key, b.Key) }

// compareKeys orders keys by shard id, then stream.
func compareKeys(a, b lease.Key) int {
	if c := cmp.Compare(a.ShardID, b.ShardID); c != 0 {
		return c
	}
	return cmp.Compare(a.Stream, b.Stream)
}

func newPlanner(in assignInput) *planner {
	if in.expired == nil {
		in.expired = func(l lease.Lease) bool { return l.Owner == "" }
	}
	p := &planner{in: in, byOwner: map[string]*planned{}}
	metrics := map[string]workerLoad{}
	for _, w := range in.workers {
		if _, dup := p.byOwner[w.owner]; w.owner == "" || dup {
			continue
		}
		p.byOwner[w.owner] = &planned{owner: w.owner, streams: w.streams}
		metrics[w.owner] = w
	}
	leases := slices.Clone(in.leases)
	slices.SortFunc(leases, byShard)
	for _, l := range leases {
		if _, ok := p.byOwner[l.Owner]; !ok && l.Owner != "" && !in.expired(l) {
			// The owner of a live lease is live though it has no row
			// (yet): it counts, as in planBalance, without metrics.
			p.byOwner[l.Owner] = &planned{owner: l.Owner, rowless: true, stuck: true}
		}
	}
	for _, w := range p.byOwner {
		p.workers = append(p.workers, w)
	}
	slices.SortFunc(p.workers, func(a, b *planned) int { return cmp.Compare(a.owner, b.owner) })

	costs := p.estimate(leases, metrics)
	for i, l := range leases {
		c := costed{l: l, cost: costs[i]}
		switch {
		case in.expired(l):
			p.free = append(p.free, c)
		case l.Handoff != "" && p.byOwner[l.Handoff] != nil:
			p.count(p.byOwner[l.Handoff], c)
		case l.Handoff != "":
			p.count(p.byOwner[l.Owner], c) // handed to a worker that is gone: stays until it expires
		default:
			w := p.byOwner[l.Owner]
			p.count(w, c)
			w.movable = append(w.movable, c)
		}
	}
	return p
}

// margin is how far the donor's load after a move (rest) must stay above
// the receiver's before it (got): by count one lease, else tolerance/2 of
// the two together.
func (p *planner) margin(rest, got float64) float64 {
	if p.in.byCount {
		return 1
	}
	return max(p.in.tolerance, 0) / 2 * (rest + got)
}

// count counts c at w.
func (p *planner) count(w *planned, c costed) {
	w.load += c.cost
	w.n++
}

// estimate returns the cost of each of leases (in order), as
// planAssignment describes.
func (p *planner) estimate(leases []lease.Lease, metrics map[string]workerLoad) []float64 {
	costs := make([]float64, len(leases))
	if p.in.byCount {
		for i := range costs {
			costs[i] = 1
		}
		return costs
	}
	// Each reporting worker's shares, summed in shard id order so that the
	// sums are the same on every leader.
	reported := map[string]map[lease.Key]float64{}
	var reporters []string
	for owner, w := range metrics {
		if !(w.cpu > 0) || math.IsInf(w.cpu, 1) || len(w.shards) == 0 {
			continue // unknown, none measured (a CPU clock that stood still) or a faulty row (NaN, infinite)
		}
		ids := slices.SortedFunc(maps.Keys(w.shards), compareKeys)
		sum := 0.0
		for _, id := range ids {
			sum += w.shards[id].weight()
		}
		shares := make(map[lease.Key]float64, len(ids))
		for _, id := range ids {
			shares[id] = w.cpu * w.shards[id].weight() / sum
		}
		reported[owner] = shares
		reporters = append(reporters, owner)
	}
	slices.Sort(reporters)
	known, sum := 0, 0.0
	for i, l := range leases {
		id := l.Key
		c, ok := reported[l.Owner][id]
		for _, r := range reporters {
			if ok {
				break
			}
			c, ok = reported[r][id]
		}
		if !ok {
			costs[i] = math.NaN()
			continue
		}
		costs[i] = c
		known++
		sum += c
	}
	avg := 1.0
	if known > 0 {
		avg = sum / float64(known)
	}
	for i, c := range costs {
		if math.IsNaN(c) {
			costs[i] = avg
		}
	}
	return costs
}

// lighter orders workers from the least loaded: by load, then by number of
// leases, then by owner id.
func lighter(a, b *planned) int {
	if c := cmp.Compare(a.load, b.load); c != 0 {
		return c
	}
	if c := cmp.Compare(a.n, b.n); c != 0 {
		return c
	}
	return cmp.Compare(a.owner, b.owner)
}

// heavier orders workers from the busiest: by load, then by number of
// leases, both descending, then by owner id.
func heavier(a, b *planned) int {
	if c := cmp.Compare(b.load, a.load); c != 0 {
		return c
	}
	if c := cmp.Compare(b.n, a.n); c != 0 {
		return c
	}
	return cmp.Compare(a.owner, b.owner)
}

// take gives the free and expired leases out, costliest first, each to the
// least-loaded worker.
func (p *planner) take() []move {
	slices.SortStableFunc(p.free, func(a, b costed) int { return cmp.Compare(b.cost, a.cost) })
	var out []move
	for _, c := range p.free {
		var to *planned
		for _, w := range p.workers {
			if !w.reads(c.l.Key.Stream) || (w.owner == c.l.Owner && len(p.workers) > 1) {
				continue // gone, not reading its stream, or its owner let it expire
			}
			if to == nil || lighter(w, to) < 0 {
				to = w
			}
		}
		if to == nil {
			continue // no worker to give it to
		}
		p.count(to, c)
		out = append(out, move{lease: c.l, to: to.owner})
	}
	return out
}

// minGap is the least difference of load, in fractions of one worker's
// CPU, between the busiest and the least-loaded worker for which leases
// move by load: a lightly loaded fleet's figures are mostly noise (a
// process's own baseline, a collection), and moving a lease to win a few
// per cent of a CPU costs more than it saves. A worker without leases
// gets some all the same (one that joined, or came back after a cut).
const minGap = 0.05

// move plans up to maxMoves hand-overs.
func (p *planner) move(maxMoves int) []move {
	total := 0.0
	for _, w := range p.workers {
		total += w.load
	}
	mean := total / float64(len(p.workers))
	hi, lo := mean*(1+p.in.tolerance), mean*(1-p.in.tolerance)
	var out []move
	for len(out) < maxMoves {
		var r, d *planned
		for _, w := range p.workers {
			if !w.rowless && (r == nil || lighter(w, r) < 0) {
				r = w
			}
		}
		if r == nil {
			break
		}
		for _, w := range p.workers {
			if w != r && !w.stuck && (d == nil || heavier(w, d) < 0) {
				d = w
			}
		}
		if d == nil {
			break
		}
		if p.in.byCount {
			if d.load-r.load < 2 {
				break
			}
		} else if (d.load <= hi && r.load >= lo) || (d.load-r.load < minGap && r.n > 0) {
			break
		}
		i := p.best(d, r)
		if i < 0 {
			d.stuck = true
			continue
		}
		c := d.movable[i]
		d.movable = slices.Delete(d.movable, i, i+1)
		d.load -= c.cost
		d.n--
		p.count(r, c) // not movable again in this plan
		out = append(out, move{lease: c.l, to: r.owner})
	}
	return out
}

// best returns the index of the lease of d to move to r, or -1 if no move
// improves by the margin.
func (p *planner) best(d, r *planned) int {
	half := (d.load - r.load) / 2
	best, dist := -1, math.Inf(1)
	for i, c := range d.movable {
		rest := d.load - c.cost
		if !r.reads(c.l.Key.Stream) || c.cost <= 0 || rest <= r.load || rest-r.load < p.margin(rest, r.load) {
			continue
		}
		if e := math.Abs(c.cost - half); e < dist {
			best, dist = i, e
		}
	}
	return best
}
