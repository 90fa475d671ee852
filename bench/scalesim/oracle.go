package scalesim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// An oracle is a planner that knows every shard's true cost, where the
// fleet's own planner sees only reported rates and CPU readings, each a
// few per cent off. What it reaches with the fewest moves shows how far
// the two targets for a change can be met together at all: moves
// at most 1.2 × the fewest, and the busiest worker at most 1.2 × the mean
// as a one-minute CPU reading tells it. The fewest moves bring the
// busiest just within the limit by the model; a reading of a minute adds
// the noise of the records that happen to arrive in it (each shard's are
// Poisson), and the highest of fifty such readings is read high.

// shardLoad is one lease's modelled cost (CPU seconds per second) and the
// records per second written to its shard.
type shardLoad struct{ cost, records float64 }

// oracleJoin returns the placement an oracle reaches after joined empty
// workers join the workers of held (each one's leases) with
// FewestMoves's count of moves: each worker above ratio × the mean gives
// its costliest leases until it is within it (the leases FewestMoves
// counts); the leases given go, costliest first, each to the least-loaded
// worker but the one that gave it (a joiner first); then each joiner still empty takes, from the busiest worker, the
// lease that leaves the larger of the two loads least (one move each, the
// ones FewestMoves counts for empty workers). Then, up to budget moves in
// all, the busiest gives the least-loaded worker the lease that leaves
// the larger of the two loads least, while that lowers the busiest: the
// moves the target allows beyond the fewest, spent on the peak. The
// joiners come last in the result.
func oracleJoin(held [][]shardLoad, joined int, ratio float64, budget int) (out [][]shardLoad, moves int) {
	out, loads, total := copyHeld(held, joined)
	if len(out) == 0 {
		return out, 0
	}
	// give moves lease k of worker d to worker r.
	give := func(d, k, r int) {
		l := out[d][k]
		out[d] = slices.Delete(out[d], k, k+1)
		out[r] = append(out[r], l)
		loads[d] -= l.cost
		loads[r] += l.cost
		moves++
	}
	// least returns the least-loaded worker but skip (then the one with
	// fewest leases, then the first).
	least := func(skip int) int {
		at := -1
		for i := range out {
			if i != skip && (at < 0 || loads[i] < loads[at] || loads[i] == loads[at] && len(out[i]) < len(out[at])) {
				at = i
			}
		}
		return at
	}
	// even returns the lease of d whose move to a worker carrying to
	// leaves the larger of the two loads least, and that load.
	even := func(d int, to float64) (at int, most float64) {
		at, most = -1, math.Inf(1)
		for k, l := range out[d] {
			if m := max(loads[d]-l.cost, to+l.cost); m < most {
				at, most = k, m
			}
		}
		return at, most
	}

	// The leases FewestMoves counts off each worker above the limit
	// (shed: the costliest first), held aside, then placed costliest
	// first.
	limit := ratio * total / float64(len(out))
	var pool []given
	for i := range held {
		slices.SortStableFunc(out[i], byCost)
		costs := make([]float64, len(out[i]))
		for k, l := range out[i] {
			costs[k] = l.cost
		}
		n, kept := shedding(costs, 0, limit)
		for _, l := range out[i][:n] {
			pool = append(pool, given{l, i})
		}
		out[i], loads[i] = out[i][n:], kept
	}
	slices.SortStableFunc(pool, func(a, b given) int { return byCost(a.l, b.l) })
	for _, g := range pool {
		r := least(g.from)
		out[r] = append(out[r], g.l)
		loads[r] += g.l.cost
		moves++
	}
	// Each joiner still empty: from the busiest worker holding two or more.
	for j := len(held); j < len(out); j++ {
		if len(out[j]) > 0 {
			continue
		}
		d := -1
		for i := range held {
			if len(out[i]) > 1 && (d < 0 || loads[i] > loads[d]) {
				d = i
			}
		}
		if d < 0 {
			break
		}
		k, _ := even(d, 0)
		give(d, k, j)
	}
	// The moves the target allows beyond the fewest, on the peak.
	for moves < budget {
		d, r := 0, least(-1)
		for i := range out {
			if loads[i] > loads[d] {
				d = i
			}
		}
		k, most := even(d, loads[r])
		if d == r || k < 0 || most >= loads[d] {
			break
		}
		give(d, k, r)
	}
	return out, moves
}

// byCost orders leases costliest first.
func byCost(a, b shardLoad) int { return cmp.Compare(b.cost, a.cost) }

// given is a lease an oracle took off a worker (from; -1 for one that
// left or died), to be placed.
type given struct {
	l    shardLoad
	from int
}

// copyHeld returns a copy of held followed by empty workers, each
// worker's load, and their sum.
func copyHeld(held [][]shardLoad, empty int) (out [][]shardLoad, loads []float64, total float64) {
	out = make([][]shardLoad, len(held)+empty)
	loads = make([]float64, len(out))
	for i, ls := range held {
		out[i] = slices.Clone(ls)
		for _, l := range ls {
			loads[i] += l.cost
		}
		total += loads[i]
	}
	return out, loads, total
}

// maxMeanLoads returns the highest worker's load over the mean.
func maxMeanLoads(placed [][]shardLoad) float64 {
	hi, sum := 0.0, 0.0
	for _, ls := range placed {
		s := 0.0
		for _, l := range ls {
			s += l.cost
		}
		hi, sum = max(hi, s), sum+s
	}
	if sum == 0 {
		return 0
	}
	return hi / (sum / float64(len(placed)))
}

// readWithin returns the share of draws in which placed, read as the
// simulation reads CPU over a window (seconds), shows the highest worker
// at most ratio × the mean: each worker's records in the window are
// Poisson, or with a grain of more than one (Config.Grain) every
// grain-th arrival of a Poisson stream grain times as busy, their variance
// a grain-th of the mean (drawn as a normal of the same mean and
// variance, the counts being in the thousands), each costing perRecord
// seconds; the rest of its cost (its polls) is read exactly.
func readWithin(placed [][]shardLoad, perRecord, window float64, grain int, ratio float64, draws int, rng *rand.Rand) float64 {
	if len(placed) == 0 || draws < 1 || window <= 0 {
		return 0
	}
	fixed := make([]float64, len(placed))
	rates := make([]float64, len(placed))
	for i, ls := range placed {
		for _, l := range ls {
			fixed[i] += l.cost - l.records*perRecord
			rates[i] += l.records
		}
	}
	within := 0
	read := make([]float64, len(placed))
	for range draws {
		hi, sum := 0.0, 0.0
		for i := range placed {
			n := rates[i]*window + math.Sqrt(rates[i]*window/float64(max(grain, 1)))*rng.NormFloat64()
			read[i] = fixed[i] + max(n, 0)*perRecord/window
			hi, sum = max(hi, read[i]), sum+read[i]
		}
		if sum > 0 && hi <= ratio*sum/float64(len(placed)) {
			within++
		}
	}
	return float64(within) / float64(draws)
}

// oraclePlace returns a placement that an oracle reaches after workers
// left or died, their leases unplaced, or, where held balanced by count,
// after the fleet starts balancing by load (an Upgrade), and its count of
// moves: an achievable count, so an upper bound on the fewest where
// FewestMovesPlacing gives a lower one. Each worker above ratio × the mean
// gives its costliest leases until within it (shedding); those and the
// unplaced go, costliest first, each to the worker (but its giver) that
// then gives the fewest of its other leases to come within the limit
// (shed's count, the costliest first; then the least loaded), and what
// that worker gives goes the same way, one move each. It places
// greedily: that is not a proof that nothing does better. ok is false when it did not reach the
// limit (a lease costlier than the limit, or no room anywhere).
func oraclePlace(held [][]shardLoad, unplaced []shardLoad, ratio float64) (out [][]shardLoad, moves int, ok bool) {
	out, loads, total := copyHeld(held, 0)
	for _, l := range unplaced {
		total += l.cost
	}
	if len(out) == 0 {
		return out, 0, len(unplaced) == 0
	}
	limit := ratio * total / float64(len(out))
	var pool []given
	// shedFrom takes off worker i, into the pool, its costliest leases
	// but keep (an index, or -1) until it is within the limit.
	shedFrom := func(i, keep int) {
		for loads[i] > limit+1e-12 {
			at := -1
			for k, l := range out[i] {
				if k != keep && (at < 0 || l.cost > out[i][at].cost) {
					at = k
				}
			}
			if at < 0 {
				return
			}
			pool = append(pool, given{out[i][at], i})
			loads[i] -= out[i][at].cost
			out[i] = slices.Delete(out[i], at, at+1)
			if keep > at {
				keep--
			}
		}
	}
	for i := range out {
		shedFrom(i, -1)
	}
	for _, l := range unplaced {
		pool = append(pool, given{l, -1})
	}
	for steps := 0; len(pool) > 0; steps++ {
		if steps > 100*(len(held)+len(unplaced)+1) {
			return out, moves, false
		}
		slices.SortStableFunc(pool, func(a, b given) int { return byCost(a.l, b.l) })
		g := pool[0]
		pool = pool[1:]
		r, cost := -1, 0
		for i := range out {
			if i == g.from {
				continue
			}
			costs := make([]float64, len(out[i]))
			for k, l := range out[i] {
				costs[k] = l.cost
			}
			c := shed(costs, g.l.cost, limit)
			if r < 0 || c < cost || c == cost && loads[i] < loads[r] {
				r, cost = i, c
			}
		}
		if r < 0 {
			return out, moves, false
		}
		out[r] = append(out[r], g.l)
		loads[r] += g.l.cost
		moves++
		shedFrom(r, len(out[r])-1)
	}
	return out, moves, maxMeanLoads(out) <= ratio+1e-9
}

// placeGreedily returns a phase's Greedy and Sure placements (see Phase)
// of left, the leases of the workers that go, beside held, the others':
// oraclePlace to 1.2 × the mean, then to lower limits, in steps of 0.01
// down to 1.1, until read (readWithin's share of readings within 1.2)
// says sureShare or more.
func placeGreedily(held [][]shardLoad, left []shardLoad, read func([][]shardLoad) float64) (greedy, sure *OracleEnd) {
	for step := 0; step <= 10; step++ {
		limit := balanceRatio - 0.01*float64(step)
		placed, moves, ok := oraclePlace(held, left, limit)
		if !ok {
			break // nor to a lower limit
		}
		e := OracleEnd{Moves: moves, Expected: maxMeanLoads(placed), Within: read(placed)}
		if step == 0 {
			g := e
			greedy = &g
		}
		if e.Within >= sureShare {
			e.Limit = limit
			sure = &e
			break
		}
	}
	return greedy, sure
}

// sureJoin returns a join's Sure placement (see Phase): oracleJoin with
// the fewest moves, then with one move more at a time spent on the peak,
// until read says sureShare or more; nil where the peak stops falling
// first, or past three times the fewest.
func sureJoin(held [][]shardLoad, joined int, read func([][]shardLoad) float64) *OracleEnd {
	placed, fewest := oracleJoin(held, joined, balanceRatio, 0)
	for budget := fewest; budget <= 3*fewest; budget++ {
		moves := fewest
		if budget > fewest {
			if placed, moves = oracleJoin(held, joined, balanceRatio, budget); moves < budget {
				return nil // the peak falls no further
			}
		}
		if w := read(placed); w >= sureShare {
			return &OracleEnd{Moves: moves, Expected: maxMeanLoads(placed), Within: w}
		}
	}
	return nil
}
