package consumer

import (
	"cmp"
	"iter"
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
	// maxMoves bounds the hand-overs (moves) of one plan, but for a fleet
	// far from even (see movesBound); takes are not bounded. Below 1, a
	// plan moves nothing.
	maxMoves int
	// recent are throughputs seen in earlier plans (their
	// assignment.seen), for the leases nobody reports now: those of a
	// worker that left or died, until their new owners measure them. With
	// a fitted cost model, such a lease costs what they say, not the
	// average; nil: none.
	recent map[lease.Key]throughput
	// recentScales are the workers' smoothing factors in the last plan
	// (assignment.scales), averaged with the new ones (planSmoothing), or
	// kept for a worker not settled in this one; nil: none.
	recentScales map[string]averaged
	// recentModel is the cost model the last plan fitted or kept
	// (assignment.model), for a plan whose figures fit none; zero: none.
	recentModel costModel
	// forming reports that the live workers are not those of the leader's
	// last plan, or that it made none yet: with most leases free (a fleet
	// starting), the plan waits for a round in which the workers stay the
	// same (see planAssignment).
	forming bool
	// tolerance is the hysteresis of load-aware planning: a plan moves
	// leases only while the busiest worker's load is above mean ×
	// (1+tolerance) or a worker carries less than a quarter of the mean (one
	// that joined), and only by moves that leave the donor a margin of
	// tolerance/2 above the receiver (see planAssignment). E.g. 0.1; at
	// least twice the relative noise of the figures.
	tolerance float64
	// joined is how many of workers joined since the fleet last shrank or
	// formed (leadership.plans): while it is not 0, the bound is 1.2 × the
	// mean (joinedLimit), so that the drop of the mean they caused does
	// not by itself put a worker above it (see planAssignment). 0: none.
	joined int
}

// joinedLimit is the most a worker may carry over the mean, after workers
// joined (assignInput.joined), before leases move off it: the balance the
// fleet keeps, 1.2 × the mean.
const joinedLimit = 0.2

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
type throughput struct {
	records, bytes float64
	// polls is the GetRecords calls per second made to read it; negative
	// when unknown (a worker of a version that does not publish them).
	polls float64
	// plans is how many plans' figures a throughput the leader remembers
	// averages (assignment.seen); 0 in a worker's report.
	plans float64
}

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
	// seen is the throughput of every lease planned that has one: as a
	// worker reported it, else as assignInput.recent remembered it. The
	// leader passes it as recent to its next plan.
	seen map[lease.Key]throughput
	// waiting: the plan gave nothing out, waiting for a starting fleet's
	// workers (assignInput.forming).
	waiting bool
	// scales are the workers' smoothing factors, averaged over plans (a
	// worker not settled in this plan keeps its earlier one); the leader
	// passes them as recentScales to its next plan.
	scales map[string]averaged
	// model is the cost model this plan fitted, else the one it kept
	// (assignInput.recentModel); the leader passes it as recentModel to its
	// next plan. Zero: none.
	model costModel
	// starting: the plan gave out the leases of a fleet starting from
	// nothing (more than half the leases free and never held).
	starting bool
}

// averaged is a figure averaged over plans (planSmoothing), and how many
// it averages.
type averaged struct{ value, n float64 }

// The fixed weights of the load model (see planAssignment), in bytes per
// second, used when too few workers have figures to fit a model to: the
// work of one record beside its bytes (a handler call, a settlement, a
// checkpoint's share: about 1.5 µs in BENCHMARKS.md, as much as decoding
// and copying a kilobyte), and the work of a shard that carries nothing (a
// GetRecords call each second, renewals: a few tens of µs, as much as
// eight such records a second). Only their ratios matter.
const (
	recordWeight = 1024
	shardWeight  = 8 * recordWeight
)

// rate is x as a rate: 0 when it is negative, NaN or infinite (a row
// written by a faulty worker).
func rate(x float64) float64 {
	if !validRate(x) {
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
// Every lease has a cost, in fractions of one worker's CPU; a worker's
// load is the sum of the costs of the leases it holds (a lease in motion,
// its Handoff set, counted at its target, or at its owner when the target
// is not a live worker). The workers are assumed equal in capacity (one
// ECS service, one task size), so loads of different workers compare.
//
//   - A shard's cost is perRecord × its records/s, plus perByte × its
//     bytes/s, plus perPoll × its GetRecords calls/s, plus perShard (the
//     renewals and checkpoints of a shard, busy or not), with the
//     throughput its owner reported, else the first other worker by owner
//     id that did (such as the owner before a move). The coefficients are
//     fitted every plan to the fleet's own figures (fitCosts): the
//     non-negative least-squares fit of each worker's CPU on the sums of
//     its shards' records/s, bytes/s and polls/s and their number, over
//     the workers whose figures are
//     settled (a CPU, and a report of exactly the leases they hold: none
//     taken, given or in motion since they measured). So the cost of a record against an idle shard is
//     the handler's and the platform's, not a guess: a fixed guess
//     under-prices hot shards when records are costly, and the plan then
//     stops short or moves the wrong leases. The process's own baseline
//     falls into perShard. A reader polls an idle shard about once a
//     second and a busy one up to about five times, so the cost of polling
//     grows with records but not in proportion: without the polls, a fit
//     on records and shards under-prices workers of busy shards (by 1–2 %
//     in the skewed scale simulation).
//     The polls are fitted only when every figure of the plan has them
//     (pollsKnown); a fleet with a worker of a version that does not
//     publish them (a rolling deploy), or the remembered leases of one
//     that left, is planned on records, bytes and shards alone (perPoll
//     0), as before, and a kept model with a perPoll does not serve it.
//     A shard's throughput is the one reported now
//     averaged with what earlier plans saw of it (in.recent, see
//     rateSmoothing: the plain mean of the first reports, then about
//     twenty rounds), so that one interval's noise on a hot shard prices it
//     neither up nor down by more than a fraction of the tolerance. A
//     settled worker's costs are then scaled to its CPU reading, within
//     1 ± tolerance/2 (smoothing), the factor averaged over plans
//     (in.recentScales, planSmoothing: about ten): the reading covers what the
//     model leaves out, but it also trails a move, and a worker that just
//     gave a hot shard away must not look busy by more than the noise the
//     tolerance allows for. A worker not settled in this plan (it gave or
//     took a lease since it measured, or has no reading) keeps the factor
//     the plans before averaged, for its costs and for the next plan
//     (TestAssignKeepsFactorOfUnsettledWorker): its next reading
//     trails the move, and counted whole, as when its average started
//     over, it priced a worker just given a lease up to tolerance/2 low.
//     Other workers' costs (no factor averaged yet) are their fitted costs.
//   - With fewer than minFitWorkers settled workers, or no fit (no subset
//     of positive coefficients), the model of the last plan that fitted
//     one serves (in.recentModel); before any, the fixed weights
//     (recordWeight, shardWeight), scaled so that they price the settled
//     workers' figures at their CPU in sum (scaledWeights), serve as the
//     model in a fleet of fewer than minFitWorkers workers with metrics
//     (too small ever to fit one): a shard costs the same wherever it is,
//     and each settled worker's own reading counts within 1 ± tolerance/2,
//     as with a fitted model. In a larger fleet before its first fit (a
//     start), or while no worker is settled, each reporting worker's CPU
//     is spread over its shards, a shard's share proportional to its
//     weight.
//   - A lease nobody reported (new, free, just moved to a worker that has
//     not measured it yet) costs, with a fitted model, what the
//     throughput the leader saw in an earlier plan says (in.recent: the
//     leases of a worker that left or died keep their price, so that a
//     hot one is not placed as an average one); else, and every lease of
//     a worker without metrics when the fixed weights serve, the average
//     of the leases that have a cost. When none has, every lease costs 1.
//   - byCount: every lease costs 1.
//
// # Plan
//
// While the fleet is forming (in.forming: the live workers differ from the
// leader's last plan) and more than half the leases are free and were
// never held, the plan gives nothing out and says it waits
// (assignment.waiting): the leader of a starting fleet plans again a
// moment later rather than give every lease to the first workers
// registered and move them again.
//
// First the takes: free and expired leases, costliest first (then by shard
// id), each to the least-loaded worker (then the one with fewest leases,
// then by owner id), not to the owner of an expired lease when another
// worker is live. But when the lease would take that worker above the
// bound (high) with leases it cannot give on (each too costly to fit the
// least-loaded other worker below the bound: a joiner holding one hot
// lease, given a dead worker's other), it goes to the least-loaded worker
// that can give enough of its leases on, and the moves below do: stacked,
// two hot leases leave their worker above the bound for good, since no
// single move lowers it. And a lease that takes even that worker above
// the bound (it fits no worker's room) goes to the worker that then gives
// the fewest of its leases on (takerFor), as a moved one does
// (receiverFor).
//
// Then the moves, at most maxMoves, or as many as there are live workers
// while the busiest worker is more than 1.5 times the mean (movesBound: a
// fleet whose workers took leases before a leader planned, or that many
// workers joined, evens out in a few rounds, each worker giving or
// receiving about one lease a round, rather than maxMoves a round). No
// move goes to or from a worker that holds a lease of unknown cost while
// others' are known (unsettled: just given a lease it has not measured
// yet; but not one whose row lists fullLoad shards, which may never list
// the rest): its load is a guess until its next figures, and planning on
// the guess moves leases that the figures then move back.
//
// Load-aware, moves go on while a worker is above mean × (1+tolerance) by
// its fitted costs as well as by its CPU reading (after workers joined,
// assignInput.joined, above mean × (1+joinedLimit), the balance the fleet
// keeps: the drop of the mean they caused moves no lease by itself; high)
// (busier, inflation:
// noise in one figure moves no lease), or while a worker carries less
// than a quarter of the mean (lowShare) or nothing: a worker that joins a
// fleet where nobody is above the tolerance gets a share, a quarter of the
// mean or more, not the mean, since each further move costs a hand-over
// and lowers nobody's peak; the fleet's next moves (the busiest above the
// tolerance) go to it first. A donor at saturatedLoad or more (by both
// figures) gives to a receiver below it as if it were above the bound: a
// fleet behind, every worker at its CPU, looks even by the mean. By
// count, they go on while the donor holds at least two more leases than
// the receiver.
//
// The receiver is the least-loaded worker and the donor the busiest one
// that can give (a donor that cannot is passed over for the rest of the
// plan); the lease moved is the donor's (not in motion, not taken in this
// plan) whose cost x is closest to half the two loads' gap, so that the
// larger of the two loads after the move is the least it can be, among
// those that leave the donor a margin above the receiver's load before
// the move: L_d − x − L_r ≥ tolerance/2 × (L_d − x + L_r) (by count: one
// lease). A donor above the bound whose closest-to-half lease would leave
// it above, and that one of its leases would bring within, where giving
// its cheaper leases one at a time would take three or more moves, gives
// that lease instead, to the worker that then gives the fewest on, when
// that takes fewer moves in all (within): the margin gives way there to
// the squared loads falling. But when nobody is above the tolerance and
// the receiver moves only because it carries too little, the move is the
// one that lowers the squared loads most, from whichever donor (bestFor),
// among those that keep the margin and leave the donor at least a quarter
// of the mean: the busiest may hold only small leases, and a donor left
// with too little would be filled again next round. The plan stops when no donor has such
// a lease; with leases small enough, that leaves the busiest within
// (1+tolerance/2)/(1−tolerance/2) of the least loaded (1.105 for 0.1), or
// within 1+tolerance of the mean.
//
// # Stability
//
// Each move lowers the sum of the squared loads (by 2x(L_d − L_r − x) > 0:
// within's too, which leaves the donor above the taker's load before it),
// so repeated plans on costs that do not change converge and never cycle,
// and a plan made again on the state its moves produced moves nothing
// unless the bound cut it short (then it goes on toward the same end). For
// the lease to move straight back, the receiver's load without it would
// have to be the margin above the donor's, which the move left the margin
// below it. The margin is relative, so it holds under noise: with every
// cost off by a factor within 1 ± tolerance/2, the two conditions still
// exclude each other. Set tolerance to at least twice the relative noise
// of the figures (0.1 for ±5%). A plan made on costs that changed (a
// worker's first metrics, leases of unknown cost becoming known, a new
// fit) may move a lease back once, correcting the estimate.
func planAssignment(in assignInput) assignment {
	p := newPlanner(in)
	out := assignment{load: map[string]float64{}, seen: p.seen}
	if len(p.workers) == 0 {
		return out
	}
	if in.forming && p.starting() {
		for _, w := range p.workers {
			out.load[w.owner] = w.load
		}
		out.waiting = true
		return out
	}
	out.starting = p.starting()
	out.takes = p.take()
	out.moves = p.move(in.maxMoves)
	out.seen, out.scales, out.model = p.seen, p.scales, p.model
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
	// scales are the workers' smoothing factors (estimate).
	scales map[string]averaged
	// seen is assignment.seen.
	seen map[lease.Key]throughput
	// model is assignment.model.
	model costModel
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
	// inflation is how much its CPU reading adds to its shards' fitted
	// costs (smoothing above 1), 0 when it adds nothing: a worker is
	// above the tolerance only when its fitted costs say so too.
	inflation float64
	// unsettled: it holds a lease whose cost nobody reported (just taken
	// or handed over, not measured yet) while others' are known: its load
	// is a guess, so it neither gives nor receives a lease by a move.
	unsettled bool
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
	p := &planner{in: in, byOwner: map[string]*planned{}, scales: map[string]averaged{}, seen: map[lease.Key]throughput{}}
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

	costs, known := p.estimate(leases, metrics)
	for i, l := range leases {
		c := costed{l: l, cost: costs[i]}
		var w *planned
		switch {
		case in.expired(l):
			p.free = append(p.free, c)
			continue
		case l.Handoff != "" && p.byOwner[l.Handoff] != nil:
			w = p.byOwner[l.Handoff]
		case l.Handoff != "":
			w = p.byOwner[l.Owner] // handed to a worker that is gone: stays until it expires
		default:
			w = p.byOwner[l.Owner]
			w.movable = append(w.movable, c)
		}
		p.count(w, c)
		if known != nil && !known[i] && len(metrics[w.owner].shards) < fullLoad {
			w.unsettled = true
		}
	}
	for owner, scale := range p.scales {
		if w := p.byOwner[owner]; w != nil && scale.value > 1 {
			w.inflation = w.load * (1 - 1/scale.value)
		}
	}
	return p
}

// starting reports whether the fleet is starting (mostFree).
func (p *planner) starting() bool { return mostFree(p.in.leases) }

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
// planAssignment describes, and which of them are known (reported by a
// worker); known is nil when no lease is.
func (p *planner) estimate(leases []lease.Lease, metrics map[string]workerLoad) (costs []float64, known []bool) {
	costs = make([]float64, len(leases))
	if p.in.byCount {
		for i := range costs {
			costs[i] = 1
		}
		return costs, nil
	}
	owners := slices.Sorted(maps.Keys(metrics))
	withPolls := pollsKnown(leases, metrics, p.in.recent)
	samples, settled := fitSamples(leases, metrics, owners, p.in.expired, withPolls)
	model, fitted := fitCosts(samples)
	if !fitted && p.in.recentModel != (costModel{}) && (withPolls || p.in.recentModel.perPoll == 0) {
		// Too few workers settled to fit one: most just took or gave a
		// lease (a death or a leave of several gives out theirs at once).
		// What a record, a byte and a shard cost has not changed since the
		// last fit, and the leases of the workers that left keep their
		// price: without a model they cost the average, and a hot one
		// went to a worker holding a hot lease already, both stuck there
		// above the bound (the skewed scale simulation: a death of five
		// and a leave of five ended at 1.3–1.5 × the mean). But a model
		// with polls does not serve a plan without them: it would price
		// every shard as if it made none.
		model, fitted = p.in.recentModel, true
	}
	if fitted {
		p.model = model
	} else if m, ok := scaledWeights(samples); ok && len(metrics) < minFitWorkers {
		// A fleet too small ever to fit a model: the fixed weights,
		// scaled to the settled workers' CPU as a whole, price every
		// shard the same wherever it is, and each worker's own reading
		// counts within 1 ± tolerance/2 (smoothing), as with a fitted
		// model. Not kept for the next plan: the scale follows the fleet's
		// load. Spread over each worker's shards by its own reading, a
		// lease cost what its holder's CPU said, and a reading trails a
		// move (the load meter averages it): the giver's remaining leases
		// looked costlier, the taker's cheaper, and two workers passed
		// leases to and fro for minutes (make soak-scale on 5cb9f57;
		// TestAssignStableLaggingCPU). A larger fleet before its first
		// fit (a start) still spreads each worker's reading: the weights
		// can be far from what a record costs in the handler (the skewed
		// scale simulation: a start with them bounded took 1,369 moves
		// and ended at 1.43 × the mean), and the fit comes in a few rounds.
		model, fitted = m, true
	}
	// Each reporting worker's figures: with a model (fitted, kept or the
	// scaled weights) every worker that reported a shard's throughput, its
	// CPU aside; without, the worker's CPU spread over its shards by the
	// fixed weights.
	reported := map[string]map[lease.Key]float64{}
	var reporters []string
	for _, owner := range owners {
		w := metrics[owner]
		if len(w.shards) == 0 {
			continue
		}
		ids := slices.SortedFunc(maps.Keys(w.shards), compareKeys)
		costs := make(map[lease.Key]float64, len(ids))
		if fitted {
			scale := 1.0
			if i, ok := settled[owner]; ok {
				scale = p.smoothing(samples[i], model)
				avg := averaged{value: scale, n: 1}
				if prev, ok := p.in.recentScales[owner]; ok {
					a := average(prev.n, planSmoothing)
					avg = averaged{value: a*scale + (1-a)*prev.value, n: min(prev.n+1, 1/planSmoothing)}
				}
				scale = avg.value
				p.scales[owner] = avg
			} else if prev, ok := p.in.recentScales[owner]; ok {
				scale = prev.value
				p.scales[owner] = prev
			}
			for _, id := range ids {
				costs[id] = scale * model.cost(p.smoothed(id, w.shards[id]))
			}
		} else {
			if !validCPU(w.cpu) {
				continue // unknown, none measured (a CPU clock that stood still) or a faulty row (NaN, infinite)
			}
			sum := 0.0
			for _, id := range ids {
				sum += fixedWeights.cost(w.shards[id])
			}
			for _, id := range ids {
				costs[id] = w.cpu * fixedWeights.cost(w.shards[id]) / sum
			}
		}
		reported[owner] = costs
		reporters = append(reporters, owner)
	}
	known = make([]bool, len(leases))
	remembered := make([]bool, len(leases))
	n, sum := 0, 0.0
	for i, l := range leases {
		id := l.Key
		from := ""
		if _, ok := reported[l.Owner][id]; ok {
			from = l.Owner
		} else {
			for _, r := range reporters {
				if _, ok := reported[r][id]; ok {
					from = r
					break
				}
			}
		}
		if from != "" {
			costs[i], known[i] = reported[from][id], true
			p.seen[id] = p.smoothed(id, metrics[from].shards[id])
			n++
			sum += costs[i]
			continue
		}
		if t, ok := p.in.recent[id]; ok {
			p.seen[id] = t // carried on while nobody reports it
			if fitted {
				costs[i], remembered[i] = model.cost(t), true
			}
		}
	}
	if n == 0 {
		for i := range costs {
			costs[i] = 1
		}
		return costs, nil
	}
	avg := sum / float64(n)
	for i := range costs {
		if !known[i] && !remembered[i] {
			costs[i] = avg
		}
	}
	return costs, known
}

// planSmoothing weighs a settled worker's newest smoothing factor against
// what the leader's earlier plans saw (assignInput.recentScales), and
// rateSmoothing a lease's newest reported throughput (assignInput.recent):
// exponential moving averages over balancing rounds. A worker's report is
// itself smoothed over about three heartbeats (loadMeter), and a hot
// shard's rate over that still varies by about 5 %: with 50 workers some
// cross the tolerance on noise alone every few rounds, and their leases
// move and move back. Averaged over about twenty rounds more (100 s with a
// lease duration of 10 s), the noise is a fifth of that; a lasting change
// of a shard's rate is priced in after several rounds. The factors follow
// the leases a worker holds, so they average over about ten.
const (
	planSmoothing = 0.1
	rateSmoothing = 0.05
)

// average returns the weight of the newest figure in an average over
// plans that already averaged n figures: the plain mean of the first ones
// (a lease's first report is one interval's, and carries its noise whole),
// then w.
func average(n, w float64) float64 { return max(w, 1/(n+1)) }

// smoothed returns t, the throughput of the lease id as a worker reports
// it now, averaged with what earlier plans saw of it (rateSmoothing).
func (p *planner) smoothed(id lease.Key, t throughput) throughput {
	prev, ok := p.in.recent[id]
	if !ok {
		return throughput{records: rate(t.records), bytes: rate(t.bytes), polls: polls(t.polls), plans: 1}
	}
	a := average(prev.plans, rateSmoothing)
	out := throughput{
		records: a*rate(t.records) + (1-a)*rate(prev.records),
		bytes:   a*rate(t.bytes) + (1-a)*rate(prev.bytes),
		polls:   polls(t.polls),
		plans:   min(prev.plans+1, 1/rateSmoothing),
	}
	if out.polls >= 0 && prev.polls >= 0 {
		out.polls = a*out.polls + (1-a)*prev.polls
	}
	return out
}

// polls is x as a rate of polls: -1 (unknown) when it is negative, NaN or
// infinite.
func polls(x float64) float64 {
	if !validRate(x) {
		return -1
	}
	return x
}

// validRate reports whether x is a rate a worker may publish: zero or
// positive, and finite.
func validRate(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }

// fullLoad is how many shards a stored lease.Load keeps at most (the
// quietest beyond it are left out): a worker that reported that many may
// hold leases it will never report, and is not unsettled for them.
const fullLoad = 1000

// validCPU reports whether cpu is a utilization measured over an interval:
// positive and finite.
func validCPU(cpu float64) bool { return cpu > 0 && !math.IsInf(cpu, 1) }

// costModel prices a shard by its throughput: perRecord × its records/s +
// perByte × its bytes/s + perPoll × its GetRecords calls/s + perShard.
// Fitted (fitCosts), its unit is one worker's CPU; the fixed weights have
// no unit (only their ratios matter) and no perPoll. perPoll is fitted
// only when every figure of the plan has its polls (pollsKnown), else 0.
type costModel struct{ perRecord, perByte, perPoll, perShard float64 }

// fixedWeights is the model when none can be fitted: recordWeight and
// shardWeight, in bytes/s.
var fixedWeights = costModel{perRecord: recordWeight, perByte: 1, perShard: shardWeight}

// cost is the cost of a shard of throughput t.
func (m costModel) cost(t throughput) float64 {
	return m.perRecord*rate(t.records) + m.perByte*rate(t.bytes) + m.perPoll*rate(t.polls) + m.perShard
}

// costs is the sum of the costs of a worker's shards, by its figures s.
func (m costModel) costs(s fitSample) float64 {
	return m.perRecord*s.records + m.perByte*s.bytes + m.perPoll*s.polls + m.perShard*s.shards
}

// minFitWorkers is the fewest workers with settled figures a cost model
// is fitted on: below that the fit's coefficients are as much noise
// as signal, and the fixed weights serve.
const minFitWorkers = 8

// fitSample is one worker's figures: the sums over the shards it reported
// (records/s, bytes/s, GetRecords calls/s, and their number) and its CPU.
// polls is 0 when the plan is without polls (pollsKnown).
type fitSample struct{ records, bytes, polls, shards, cpu float64 }

// smoothing returns the factor by which the costs of a settled worker's
// shards are scaled so that they sum to its CPU reading, within 1 ±
// tolerance/2. The throughputs are rates over the worker's last interval
// (a hot shard's few hundred records vary by several per cent from one
// interval to the next); its CPU reading is smoothed over several, so
// where the two agree up to that noise the reading is the better figure,
// and planning on the rates alone would move leases on noise. Bounded, the
// reading's lag after a move (or a model that fits this worker badly)
// cannot shift its load by more than the noise the tolerance allows for.
func (p *planner) smoothing(s fitSample, m costModel) float64 {
	sum := m.costs(s)
	if !(sum > 0) {
		return 1
	}
	d := max(p.in.tolerance, 0) / 2
	return min(max(s.cpu/sum, 1-d), 1+d)
}

// scaledWeights returns the fixed weights scaled so that they price the
// settled workers' figures at their CPU in sum (one worker's CPU a unit,
// as a fitted model's); ok false when no settled worker's figures weigh
// anything or their CPU is 0.
func scaledWeights(samples []fitSample) (costModel, bool) {
	cpu, weight := 0.0, 0.0
	for _, s := range samples {
		cpu += s.cpu
		weight += fixedWeights.costs(s)
	}
	if !validCPU(cpu) || !(weight > 0) {
		return costModel{}, false
	}
	k := cpu / weight
	return costModel{perRecord: k * fixedWeights.perRecord, perByte: k * fixedWeights.perByte, perShard: k * fixedWeights.perShard}, true
}

// pollsKnown reports whether a plan's figures all have their polls: every
// shard each worker reported, and every lease's remembered throughput
// (recent) that nobody reports now. Only then is perPoll fitted and
// priced; a fleet with a worker of a version that does not publish polls
// (a rolling deploy), or the remembered leases of one that left, is
// planned on records, bytes and shards alone, as before the polls were
// published.
func pollsKnown(leases []lease.Lease, metrics map[string]workerLoad, recent map[lease.Key]throughput) bool {
	reported := map[lease.Key]bool{}
	for _, w := range metrics {
		for id, t := range w.shards {
			if polls(t.polls) < 0 {
				return false
			}
			reported[id] = true
		}
	}
	for _, l := range leases {
		if t, ok := recent[l.Key]; ok && !reported[l.Key] && t.polls < 0 {
			return false
		}
	}
	return true
}

// fitSamples returns the figures of every worker (in owners' order) whose
// figures are settled, and the index of each such worker's among them: a valid CPU, and a report of exactly the leases it
// holds (none taken, given or in motion since it measured, so that its
// CPU and its shards cover the same work, but for the smoothing of its
// CPU). A shard reported but not among leases (not listed, finished)
// is left out of the comparison. The polls are summed only withPolls
// (else 0, and fitCosts fits no perPoll).
func fitSamples(leases []lease.Lease, metrics map[string]workerLoad, owners []string, expired func(lease.Lease) bool, withPolls bool) (out []fitSample, index map[string]int) {
	held := map[string]map[lease.Key]bool{}
	listed := make(map[lease.Key]bool, len(leases))
	unsettled := map[string]bool{}
	for _, l := range leases {
		listed[l.Key] = true
		if l.Owner == "" || expired(l) {
			continue
		}
		if l.Handoff != "" {
			unsettled[l.Owner], unsettled[l.Handoff] = true, true
		}
		if held[l.Owner] == nil {
			held[l.Owner] = map[lease.Key]bool{}
		}
		held[l.Owner][l.Key] = true
	}
	index = map[string]int{}
	for _, owner := range owners {
		w := metrics[owner]
		if !validCPU(w.cpu) || len(w.shards) == 0 || unsettled[owner] {
			continue
		}
		h := held[owner]
		n, settled := 0, true
		var s fitSample
		for _, id := range slices.SortedFunc(maps.Keys(w.shards), compareKeys) {
			if !listed[id] {
				continue
			}
			if !h[id] {
				settled = false // given away since it measured
				break
			}
			n++
			t := w.shards[id]
			s.records += rate(t.records)
			s.bytes += rate(t.bytes)
			if withPolls {
				s.polls += rate(t.polls)
			}
		}
		if !settled || n != len(h) || n == 0 {
			continue // taken since it measured (or holds none it reports)
		}
		s.shards, s.cpu = float64(n), w.cpu
		index[owner] = len(out)
		out = append(out, s)
	}
	return out, index
}

// fitCosts fits a cost model to the workers' figures: the non-negative
// perRecord, perByte, perPoll and perShard that make the sums of their
// costs over each worker's shards closest to its CPU, in least squares.
// It tries every subset of the four coefficients (the others 0; a column
// that is 0 in every sample, such as the polls of a plan without them, in
// none), keeps the
// solutions whose coefficients are all positive, and returns the one of
// least residual (the first of equal ones, in a fixed order): the
// non-negative least-squares fit, computed so that it is the same on
// every leader. A subset whose columns are (nearly) collinear is skipped:
// when every record has the same size, records/s and bytes/s tell the
// same and only one of them is fitted. ok is false with fewer than
// minFitWorkers samples or when no subset fits.
func fitCosts(samples []fitSample) (m costModel, ok bool) {
	if len(samples) < minFitWorkers {
		return costModel{}, false
	}
	col := func(s fitSample, j int) float64 {
		switch j {
		case 0:
			return s.records
		case 1:
			return s.bytes
		case 2:
			return s.polls
		}
		return s.shards
	}
	var norm [4]float64
	for _, s := range samples {
		for j := range norm {
			norm[j] += col(s, j) * col(s, j)
		}
	}
	for j := range norm {
		norm[j] = math.Sqrt(norm[j])
	}
	best := math.Inf(1)
	for mask := 1; mask < 1<<len(norm); mask++ {
		var cols []int
		for j := range len(norm) {
			if mask&(1<<j) != 0 {
				cols = append(cols, j)
			}
		}
		k := len(cols)
		a := make([][]float64, k)
		b := make([]float64, k)
		usable := true
		for i, j := range cols {
			if norm[j] == 0 {
				usable = false
			}
			a[i] = make([]float64, k)
		}
		if !usable {
			continue
		}
		// The normal equations on columns scaled to unit length, so that
		// a pivot measures how far a column is from the span of the
		// others.
		for _, s := range samples {
			for i, ji := range cols {
				x := col(s, ji) / norm[ji]
				b[i] += x * s.cpu
				for c, jc := range cols {
					a[i][c] += x * col(s, jc) / norm[jc]
				}
			}
		}
		coef, solved := solveSymmetric(a, b)
		if !solved {
			continue
		}
		var cand [4]float64
		positive := true
		for i, j := range cols {
			if !(coef[i] > 0) {
				positive = false
			}
			cand[j] = coef[i] / norm[j]
		}
		if !positive {
			continue
		}
		rss := 0.0
		for _, s := range samples {
			e := s.cpu
			for j := range cand {
				e -= cand[j] * col(s, j)
			}
			rss += e * e
		}
		if rss < best {
			best = rss
			m, ok = costModel{perRecord: cand[0], perByte: cand[1], perPoll: cand[2], perShard: cand[3]}, true
		}
	}
	return m, ok
}

// minPivot is the least pivot (of a matrix of unit diagonal) for which
// solveSymmetric solves: below it the columns are as good as collinear.
const minPivot = 1e-6

// solveSymmetric solves a x = b for a small symmetric positive
// semi-definite a of unit diagonal by Gaussian elimination without
// pivoting (the pivots of such a matrix are its Schur complements); ok is
// false when a pivot falls below minPivot. It modifies a and b.
func solveSymmetric(a [][]float64, b []float64) (x []float64, ok bool) {
	k := len(b)
	for i := range k {
		if !(a[i][i] >= minPivot) {
			return nil, false
		}
		for r := i + 1; r < k; r++ {
			f := a[r][i] / a[i][i]
			for c := i; c < k; c++ {
				a[r][c] -= f * a[i][c]
			}
			b[r] -= f * b[i]
		}
	}
	x = make([]float64, k)
	for i := k - 1; i >= 0; i-- {
		v := b[i]
		for c := i + 1; c < k; c++ {
			v -= a[i][c] * x[c]
		}
		x[i] = v / a[i][i]
	}
	return x, true
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

// busier orders workers as heavier does, by their load less its
// inflation: the donor is the busiest by both figures.
func busier(a, b *planned) int {
	if c := cmp.Compare(b.load-b.inflation, a.load-a.inflation); c != 0 {
		return c
	}
	return heavier(a, b)
}

// take gives the free and expired leases out, costliest first, each to the
// least-loaded worker.
func (p *planner) take() []move {
	slices.SortStableFunc(p.free, func(a, b costed) int { return cmp.Compare(b.cost, a.cost) })
	total := 0.0
	for _, w := range p.workers {
		total += w.load
	}
	for _, c := range p.free {
		total += c.cost
	}
	hi := p.high(total)
	var out []move
	for _, c := range p.free {
		var to *planned
		for _, w := range p.workers {
			if !p.canTake(w, c) {
				continue
			}
			if to == nil || lighter(w, to) < 0 {
				to = w
			}
		}
		if to == nil {
			continue // no worker to give it to
		}
		if p.strands(to, c.cost, hi, total) {
			// The least loaded would end above the bound with leases it
			// cannot give on (a hot lease it holds already): it would be
			// stuck there, every one of its leases too costly for anyone
			// else. A worker whose smaller leases can go on to others
			// takes it instead, and gives them on by the moves below.
			var alt *planned
			for _, w := range p.workers {
				if w != to && p.canTake(w, c) && !p.strands(w, c.cost, hi, total) && (alt == nil || lighter(w, alt) < 0) {
					alt = w
				}
			}
			if alt != nil {
				to = alt
			}
		}
		if !p.in.byCount && to.load+c.cost > hi {
			to = p.takerFor(to, c, hi, total)
		}
		p.count(to, c)
		out = append(out, move{lease: c.l, to: to.owner})
	}
	return out
}

// takerFor returns the worker to take the free or expired lease c when it
// takes to (the least-loaded worker that may take it, or the one take
// chose for not stranding it) above hi, no worker having room for it
// below the bound (a dead worker's hot lease): the one that then gives
// the fewest of its leases on to come back to hi (givesOn), among those
// that may take c without being stranded; to when none does better. It
// is receiverFor's rule for a take. The least-loaded worker may hold only
// small leases, and give many on where a worker of a few larger ones
// gives few (TestAssignOverflowTaker: 7 moves against 3). In the skewed
// scale simulation it changes nothing measurable: after a death there,
// the leases the takers could give fit no other worker's room either
// (BENCHMARKS.md).
func (p *planner) takerFor(to *planned, c costed, hi, total float64) *planned {
	return p.fewestOn(to, nil, c, hi, func(w *planned) bool {
		return p.canTake(w, c) && !p.strands(w, c.cost, hi, total)
	})
}

// fewestOn returns, of first and the workers (but d, rowless and unsettled
// ones) that may take c, the one that then gives the fewest of its leases
// on to come back to hi (givesOn, c taken from d, or free when d is nil);
// first when none does better.
func (p *planner) fewestOn(first, d *planned, c costed, hi float64, may func(*planned) bool) *planned {
	best, fewest := first, p.givesOn(first, d, c, hi)
	for _, w := range p.workers {
		if w == first || w == d || w.rowless || w.unsettled || !may(w) {
			continue
		}
		if n := p.givesOn(w, d, c, hi); n >= 0 && (fewest < 0 || n < fewest) {
			best, fewest = w, n
		}
	}
	return best
}

// canTake reports whether w may take the free or expired lease c: it
// reads c's stream, has a row, and did not let c expire itself (unless it
// is the only worker).
func (p *planner) canTake(w *planned, c costed) bool {
	return w.reads(c.l.Key.Stream) && (w.owner != c.l.Owner || len(p.workers) == 1)
}

// strands reports whether a lease of cost given to w (by a take or a
// move) would leave it above hi with leases it cannot give on (sheddable):
// a hot lease where it holds one already, say, which would stay there with
// it, every one of its leases too costly for anyone else. By load only.
func (p *planner) strands(w *planned, cost, hi, total float64) bool {
	got := w.load + cost
	return !p.in.byCount && got > hi && got-p.sheddable(w, hi, total) > hi
}

// sheddable is the load w could give on by moves: its movable leases each
// cheap enough to go to the least-loaded other worker without taking it
// above hi. The least-loaded worker's load counts as at least the
// tolerance below the mean of total (the load of all the leases, those
// still to be given out included): the moves come after the takes, which
// fill the workers that are light now. A hot lease counted as sheddable
// against a worker that is light only until the takes left a worker with
// two hot leases above hi that no move could relieve, every worker by then
// too loaded to take either (the skewed scale simulation: a death of five
// not converged in 5 minutes).
func (p *planner) sheddable(w *planned, hi, total float64) float64 {
	floor := max(total/float64(len(p.workers))*(1-p.in.tolerance), p.least(w, nil))
	sum := 0.0
	for x := range w.giveable(floor, hi) {
		sum += x
	}
	return sum
}

// least is the load of the least-loaded worker with a row other than a
// and b (either may be nil); +Inf if there is none.
func (p *planner) least(a, b *planned) float64 {
	least := math.Inf(1)
	for _, o := range p.workers {
		if o != a && o != b && !o.rowless {
			least = min(least, o.load)
		}
	}
	return least
}

// giveable yields the costs of w's movable leases that could each go to a
// worker carrying floor without taking it above hi.
func (w *planned) giveable(floor, hi float64) iter.Seq[float64] {
	return func(yield func(float64) bool) {
		for _, x := range w.movable {
			if x.cost > 0 && floor+x.cost <= hi && !yield(x.cost) {
				return
			}
		}
	}
}

// minGap is the least difference of load, in fractions of one worker's
// CPU, between the busiest and the least-loaded worker for which leases
// move by load: a lightly loaded fleet's figures are mostly noise (a
// process's own baseline, a collection), and moving a lease to win a few
// per cent of a CPU costs more than it saves. A worker without leases
// gets some all the same (one that joined, or came back after a cut).
const minGap = 0.05

// saturatedLoad is the load, in fractions of one worker's CPU, from which a
// worker is busy whatever the mean: one that needs more than its CPU reads
// about 1 and falls behind, and so do the others when the whole fleet
// does (a surge; autoscaling on lag then adds workers). Such a worker
// gives leases to a worker below it, by the margin, though it is not above
// the bound: by the mean alone a fleet behind looks even (its busiest
// within 1.1 × the mean once a joiner holds a quarter of it), and the
// worker added for the lag would take a quarter of a share and leave the
// rest behind. Below it, only the bound moves leases: the skewed scale
// simulation (mean 0.46) never reaches it.
const saturatedLoad = 0.9

// lowShare is the fraction of the mean load below which a worker
// receives leases by load though nobody is above the upper bound (see
// planAssignment: a worker that joined gets a share, not the mean). A
// quarter, not half or a third: a joiner's first lease, the one that
// lowers the squared loads most, often costs a quarter to half the mean
// (the hot leases that cost more are where they leave their owner too
// little), and filling it further took a second hand-over that lowered
// nobody's peak (the skewed scale simulation, BENCHMARKS.md: with a third,
// five joiners took 5–9 moves, 1.2 × the fewest or less in 4 of 8 runs;
// with a quarter 5–8, in 6 of 8).
const lowShare = 1.0 / 4

// farFromEven is how far above the mean the busiest worker's load must be
// for a plan to move more than maxMoves leases (see movesBound).
const farFromEven = 0.5

// movesBound is how many leases a plan may move: maxMoves, or, while the
// busiest worker's load is more than farFromEven above the mean (the
// start of a fleet whose workers took leases before a leader planned, a
// count-based fleet after many workers joined), as many as there are
// workers, so that a fleet far from even evens out in a few rounds
// whatever its size, each worker giving or receiving about one lease a
// round. Below 1, nothing.
func (p *planner) movesBound(maxMoves int, mean float64) int {
	if maxMoves < 1 {
		return 0
	}
	busiest, live := 0.0, 0
	for _, w := range p.workers {
		busiest = max(busiest, w.load)
		if !w.rowless {
			live++
		}
	}
	if busiest > (1+farFromEven)*mean {
		return max(maxMoves, live)
	}
	return maxMoves
}

// high is the load above which a worker gives leases by load: the
// tolerance above the mean; after workers joined (assignInput.joined),
// joinedLimit above the mean, when that is higher. Not the tolerance above
// the mean of the workers before them: after a join of one worker to 50,
// that is 1.17 × the mean now, the very load to which the fleet's last
// plans evened the busiest, and a worker they left just within it gave a
// lease when its figures' noise put it just above (the skewed scale
// simulation, BENCHMARKS.md: the second join of one took 2 moves, the
// fewest 1, in 2 of 12 runs).
func (p *planner) high(total float64) float64 {
	mean := total / float64(len(p.workers))
	hi := mean * (1 + p.in.tolerance)
	if p.in.joined > 0 && p.in.joined < len(p.workers) {
		hi = max(hi, mean*(1+joinedLimit))
	}
	return hi
}

// move plans up to movesBound hand-overs.
func (p *planner) move(maxMoves int) []move {
	total := 0.0
	for _, w := range p.workers {
		total += w.load
	}
	mean := total / float64(len(p.workers))
	hi, lo := p.high(total), mean*lowShare
	bound := p.movesBound(maxMoves, mean)
	var out []move
	for len(out) < bound {
		var r, d *planned
		for _, w := range p.workers {
			if !w.rowless && !w.unsettled && (r == nil || lighter(w, r) < 0) {
				r = w
			}
		}
		if r == nil {
			break
		}
		for _, w := range p.workers {
			if w != r && !w.stuck && !w.unsettled && (d == nil || busier(w, d) < 0) {
				d = w
			}
		}
		if d == nil {
			break
		}
		// The donor is above the tolerance when its reading and its
		// shards' fitted costs both say so: one interval's noise in either
		// does not move a lease. Or it is busy whatever the mean (both
		// say so too), and the receiver is not.
		costs := d.load - d.inflation
		over := costs > hi
		high := over || (costs >= saturatedLoad && r.load < saturatedLoad)
		if p.in.byCount {
			if d.load-r.load < 2 {
				break
			}
		} else if (!high && r.load >= lo && r.n > 0) || (d.load-r.load < minGap && r.n > 0) {
			break
		}
		var i int
		shortcut := false
		if !p.in.byCount && !high {
			// Nobody is above the tolerance: the receiver carries too
			// little. It gets the lease that lowers the squared loads
			// most, from whichever donor holds it (the busiest may hold
			// only small leases, and filling the receiver from it would
			// take many moves).
			if d, i = p.bestFor(r, lo, mean*(1+p.in.tolerance)); d == nil {
				break
			}
		} else {
			i = p.best(d, r, hi, total)
			if !p.in.byCount && over && (i < 0 || d.load-d.movable[i].cost > hi) {
				// best's lease leaves d above the bound: one of its
				// leases may bring it within in fewer moves.
				if j, to := p.within(d, hi, total); j >= 0 {
					i, r, shortcut = j, to, true
				}
			}
			if i < 0 {
				d.stuck = true
				continue
			}
		}
		c := d.movable[i]
		if !shortcut && !p.in.byCount && r.load+c.cost > hi {
			r = p.receiverFor(d, r, c, hi)
		}
		d.movable = slices.Delete(d.movable, i, i+1)
		d.load -= c.cost
		d.n--
		p.count(r, c) // not movable again in this plan
		out = append(out, move{lease: c.l, to: r.owner})
	}
	return out
}

// best returns the index of the lease of d to move to r, or -1 if no move
// improves by the margin: the lease closest to half the two loads' gap.
func (p *planner) best(d, r *planned, hi, total float64) int {
	half := (d.load - r.load) / 2
	best, dist := -1, math.Inf(1)
	for i, c := range d.movable {
		rest := d.load - c.cost
		if !r.reads(c.l.Key.Stream) || c.cost <= 0 || rest <= r.load || rest-r.load < p.margin(rest, r.load) {
			continue
		}
		if p.strands(r, c.cost, hi, total) {
			// A hot lease moved onto a worker holding another stays
			// there with it, above the bound for good (the skewed scale
			// simulation: a death of five not converged in 5 minutes).
			continue
		}
		if e := math.Abs(c.cost - half); e < dist {
			best, dist = i, e
		}
	}
	return best
}

// receiverFor returns the worker to take the lease c from d when it takes
// the least-loaded worker r above hi (c fits nobody's room below hi): the
// one that then gives the fewest of its leases on to bring itself back to
// hi, each small enough for the least-loaded other worker's room, among
// those c may go to with the margin; r when none does better. The
// least-loaded worker may hold only small leases, and it then gave five of
// them on where another gave one (the skewed scale simulation: a death
// took 28 moves where 22 could do).
func (p *planner) receiverFor(d, r *planned, c costed, hi float64) *planned {
	rest := d.load - c.cost
	return p.fewestOn(r, d, c, hi, func(w *planned) bool {
		return w.reads(c.l.Key.Stream) && rest > w.load && rest-w.load >= p.margin(rest, w.load)
	})
}

// givesOn is how many of its leases w gives on, after taking c from d, to
// come back to hi: its costliest first among those small enough for the
// least-loaded other worker's room; -1 if those cannot bring it there.
func (p *planner) givesOn(w, d *planned, c costed, hi float64) int {
	excess := w.load + c.cost - hi
	fit := slices.Sorted(w.giveable(p.least(w, d), hi))
	n := 0
	for i := len(fit) - 1; i >= 0 && excess > 0; i-- {
		excess -= fit[i]
		n++
	}
	if excess > 0 {
		return -1
	}
	return n
}

// shortcutSteps is the fewest moves best's way must take for within to
// take another: best moves the donor's lease closest to half the gap,
// which for a donor slightly above the bound is one move anyway.
const shortcutSteps = 3

// within returns the index of d's lease to move, and the worker to take
// it, when d is above hi (and best's lease would leave it above) and one
// lease brings it within, by fewer moves than best's way: the cheapest
// lease of d that does, to the worker that then gives the fewest of its
// own leases on (givesOn; those moves are counted), against best's, d's
// leases cheaper than it given one at a time (at least the costliest of
// them until d is within, and at least shortcutSteps). The margin that best keeps (the donor left above the
// receiver) would bar such a lease from any worker the fleet has, so the
// move needs only to lower the squared loads (the donor left above the
// taker as it was), and must not strand a hot lease. -1 when no lease
// does better. (A worker that took a dead worker's hot lease, holding
// another and twenty small ones, gave the twenty, one a move, where
// FewestMoves and a greedy placement took one: the skewed scale
// simulation, a death of one 40 moves where 23 could do.)
func (p *planner) within(d *planned, hi, total float64) (int, *planned) {
	excess := d.load - hi
	at := -1
	for k, c := range d.movable {
		if c.cost >= excess && (at < 0 || c.cost < d.movable[at].cost) {
			at = k
		}
	}
	if excess <= 0 || at < 0 {
		return -1, nil
	}
	c := d.movable[at]
	var cheaper []float64
	for _, x := range d.movable {
		if x.cost > 0 && x.cost < c.cost {
			cheaper = append(cheaper, x.cost)
		}
	}
	slices.Sort(cheaper)
	steps, left := 0, excess
	for i := len(cheaper) - 1; i >= 0 && left > 0; i-- {
		left -= cheaper[i]
		steps++
	}
	if left > 0 {
		steps = math.MaxInt // the cheaper ones cannot do it
	}
	if steps < shortcutSteps {
		return -1, nil
	}
	rest := d.load - c.cost
	var to *planned
	fewest := -1
	for _, w := range p.workers {
		if w == d || w.rowless || w.unsettled || !w.reads(c.l.Key.Stream) || rest <= w.load || p.strands(w, c.cost, hi, total) {
			continue
		}
		n := 0
		if w.load+c.cost > hi {
			if n = p.givesOn(w, d, c, hi); n < 0 {
				continue
			}
		}
		if to == nil || n < fewest || n == fewest && lighter(w, to) < 0 {
			to, fewest = w, n
		}
	}
	if to == nil || 1+fewest >= steps {
		return -1, nil
	}
	return at, to
}

// bestFor returns the donor and the index of its lease whose move to r
// lowers the sum of the squared loads most (by 2x(L_d − L_r − x), for a
// lease of cost x), among the moves that keep the margin and leave the
// donor at least lo (filling one worker must not empty another, which the
// next round would fill again); nil if none does.
//
// A donor above steady (the tolerance above the mean, the bound once the
// workers that joined count as the fleet's own) comes first, with a lease
// that fills r to lo in one move; and among those, one the move brings to
// steady or below. After workers join, the mean drops and some workers
// end up above steady but below the bound of the join (high): filling the
// joiners from them is a move made anyway, where filling them from others
// left those workers to give a lease each later, on top of the fills (the
// skewed scale simulation, BENCHMARKS.md: a join of five took 7 moves, the
// fewest 5; the second join of one 2).
func (p *planner) bestFor(r *planned, lo, steady float64) (*planned, int) {
	// rank orders a move: 2 for a donor above steady that ends at steady
	// or below and fills r to lo, 1 for one above steady that fills r,
	// 0 for any other.
	rank := func(d *planned, x float64) int {
		if d.load-d.inflation <= steady || r.load+x < lo {
			return 0
		}
		if d.load-x <= steady {
			return 2
		}
		return 1
	}
	var best *planned
	at, top, gain := -1, 0, 0.0
	for _, d := range p.workers {
		if d == r || d.stuck || d.unsettled || d.load <= r.load {
			continue
		}
		for i, c := range d.movable {
			rest := d.load - c.cost
			if !r.reads(c.l.Key.Stream) || c.cost <= 0 || rest < lo || rest <= r.load || rest-r.load < p.margin(rest, r.load) {
				continue
			}
			g, k := c.cost*(d.load-r.load-c.cost), rank(d, c.cost)
			if g > 0 && (k > top || k == top && g > gain) {
				best, at, top, gain = d, i, k, g
			}
		}
	}
	return best, at
}
