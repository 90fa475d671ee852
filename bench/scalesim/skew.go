package scalesim

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Skew is a Zipf-Mandelbrot distribution of load over shards: the shard of
// rank i (1 for the hottest) carries a share proportional to 1/(i+Q)^S.
//
// The scale simulation's skewed scenario wants the top 5% of 1,000 shards
// to carry half the records, on 50 workers, with the busiest worker within
// 1.2 of the mean. A pure Zipf law (Q 0, S 1) puts 13.4% of all records on
// the hottest shard, 6.7 times a worker's mean share of 2%; fixing S at 1
// and solving Q for the top 5% to carry half (Q 2.26) still leaves the
// hottest shard with 5.2%, 2.6 times a worker's mean: no assignment
// balances that (only a split of the shard would). So FitSkew fixes the
// hottest shard's share too, and solves both Q and S. The simulation uses
// FitSkew(1000, 0.5, 0.02): the hottest shard carries exactly one worker's
// mean share (the most that lets its worker sit at the mean: it holds that
// shard alone), and the top 5% half of all records; that gives Q 40.75 and
// S 1.773 (TestSkewFit prints them): the 50 hottest shards carry 2% down
// to 0.50% each, the median shard 0.021%, the coldest 0.0067%. Packed
// costliest first on 50 workers, these shares leave the busiest at 1.0005
// of the mean (TestSkewBalanceable).
type Skew struct {
	Q float64 // the offset: the larger, the flatter the head
	S float64 // the exponent: the larger, the steeper the tail
}

// topFraction is the fraction of the shards (rounded up) that FitSkew's
// topShare is about.
const topFraction = 0.05

// Shares returns the share of each of n shards of the total load, hottest
// first, summing to 1.
func (k Skew) Shares(n int) []float64 {
	w := make([]float64, n)
	sum := 0.0
	for i := range w {
		// ((1+Q)/(i+Q))^S: relative to the hottest, so that a large S and Q
		// neither overflow nor underflow where it matters.
		w[i] = math.Exp(k.S * (math.Log1p(k.Q) - math.Log(float64(i+1)+k.Q)))
		sum += w[i]
	}
	for i := range w {
		w[i] /= sum
	}
	return w
}

// hottest is the share of the hottest of n shards.
func (k Skew) hottest(n int) float64 {
	sum := 0.0
	for i := range n {
		sum += math.Exp(k.S * (math.Log1p(k.Q) - math.Log(float64(i+1)+k.Q)))
	}
	return 1 / sum
}

// top is the share of the hottest m of n shards.
func (k Skew) top(n, m int) float64 {
	s := k.Shares(n)
	t := 0.0
	for _, x := range s[:m] {
		t += x
	}
	return t
}

// FitSkew returns the Skew over n shards in which the top 5% of the shards
// (rounded up) carry topShare of the load and the hottest one maxShare.
// For a given S, the hottest shard's share falls as Q grows, so Q is solved
// by bisection; along the Q that fits maxShare, the top 5%'s share grows
// with S (from a power law's toward a geometric law's), so S is solved by
// bisection around it. It returns an error when the shares contradict each
// other: maxShare must lie between the top 5%'s mean share and topShare,
// and topShare between the shares that a power law (Q 0) and a geometric
// law with that hottest share give.
func FitSkew(n int, topShare, maxShare float64) (Skew, error) {
	m := int(math.Ceil(topFraction * float64(n)))
	switch {
	case n < 2 || m >= n:
		return Skew{}, fmt.Errorf("scalesim: %d shards are too few for a top 5%%", n)
	case !(topShare > float64(m)/float64(n) && topShare < 1):
		return Skew{}, fmt.Errorf("scalesim: top share %v must lie between %v (even load) and 1", topShare, float64(m)/float64(n))
	case !(maxShare > topShare/float64(m) && maxShare <= topShare):
		return Skew{}, fmt.Errorf("scalesim: hottest share %v must lie above the top %d's mean %v and at most their share %v", maxShare, m, topShare/float64(m), topShare)
	}
	// solveQ returns the Q that gives the hottest shard maxShare at S s,
	// or -1 when even Q 0 gives it less.
	solveQ := func(s float64) float64 {
		if (Skew{S: s}).hottest(n) < maxShare {
			return -1
		}
		lo, hi := 0.0, 1.0
		for (Skew{Q: hi, S: s}).hottest(n) > maxShare {
			lo, hi = hi, 2*hi
		}
		for range 64 {
			mid := (lo + hi) / 2
			if (Skew{Q: mid, S: s}).hottest(n) > maxShare {
				lo = mid
			} else {
				hi = mid
			}
		}
		return (lo + hi) / 2
	}
	// The least S at which Q 0 reaches maxShare: the hottest shard's share
	// at Q 0 grows with S.
	sLo, sHi := 0.0, 64.0
	if (Skew{S: sHi}).hottest(n) < maxShare {
		return Skew{}, errors.New("scalesim: hottest share too large to fit")
	}
	for range 64 {
		mid := (sLo + sHi) / 2
		if (Skew{S: mid}).hottest(n) < maxShare {
			sLo = mid
		} else {
			sHi = mid
		}
	}
	lo, hi := Skew{Q: solveQ(sHi), S: sHi}, Skew{Q: solveQ(64), S: 64}
	switch {
	case lo.top(n, m) > topShare:
		return Skew{}, fmt.Errorf("scalesim: with the hottest shard at %v, the top 5%% carry at least %.3f, more than %v", maxShare, lo.top(n, m), topShare)
	case hi.top(n, m) < topShare:
		return Skew{}, fmt.Errorf("scalesim: with the hottest shard at %v, the top 5%% carry at most %.3f, less than %v", maxShare, hi.top(n, m), topShare)
	}
	for range 50 {
		s := (lo.S + hi.S) / 2
		mid := Skew{Q: solveQ(s), S: s}
		if mid.top(n, m) < topShare {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// FewestMoves returns a lower bound on the number of leases that must move
// for the fleet to converge as the simulation counts it by load: every
// worker carrying at most ratio × the mean load, and every worker holding
// at least one lease. It is given the cost of each lease each worker holds
// (costs[w], one slice per worker; a new worker holding nothing has an
// empty one). For each worker above the limit it counts the fewest of its
// leases whose removal brings it under: the costliest first; a move into
// a worker only raises it, so no assignment brings the workers under the
// limit with fewer moves. Each move takes one lease into one worker, so
// there are also at least as many moves as workers holding nothing; the
// bound is the larger of the two counts. Where the removed leases go is
// not considered, so the target may need more, or be out of reach (a
// lease that costs more than the limit by itself). After workers join a
// balanced fleet, the bound is the number that joined unless the join
// lowered the mean enough to put others above the limit.
func FewestMoves(costs [][]float64, ratio float64) int {
	return FewestMovesPlacing(costs, nil, ratio)
}

// FewestMovesPlacing is FewestMoves when, besides, the leases of costs
// unplaced (those of workers that left or died) must move to the workers
// of costs: each is one move (which may also fill an empty worker), and
// their costs count in the mean; and the worker that takes the costliest
// of them must then carry at most the limit, which may take moves off it
// (a dead worker's hot lease that fits no worker's room), each lease it
// gives away fitting the room another worker has to spare or costing one
// move more.
func FewestMovesPlacing(costs [][]float64, unplaced []float64, ratio float64) int {
	if len(costs) == 0 {
		return len(unplaced)
	}
	empty := 0
	for _, cs := range costs {
		if len(cs) == 0 {
			empty++
		}
	}
	total := 0.0
	for _, c := range unplaced {
		total += c
	}
	for _, cs := range costs {
		for _, c := range cs {
			total += c
		}
	}
	limit := ratio * total / float64(len(costs))
	n := len(unplaced)
	for _, cs := range costs {
		n += shed(cs, 0, limit)
	}
	// The costliest unplaced lease lands on some worker, which then gives
	// away the fewest of its leases that bring it within the limit: none
	// if it has room, else moves counted nowhere above (beyond those it
	// gives anyway when it is above the limit already). The least of that
	// over the workers is a bound too; the other unplaced leases may land
	// on the same worker, so only the costliest counts.
	//
	// A lease it gives must fit some other worker's room (the limit less
	// that worker's load once it gave what it must): one that fits none
	// puts its receiver above the limit, which then gives a lease of its
	// own, one move more (counted once however many such leases there are,
	// as one receiver may take them all and give one lease for them).
	if len(unplaced) > 0 {
		c := slices.Max(unplaced)
		room := make([]float64, len(costs))
		for i, cs := range costs {
			_, kept := shedding(cs, 0, limit)
			room[i] = limit - kept
		}
		extra := -1
		for i, cs := range costs {
			most := math.Inf(-1)
			for j := range costs {
				if j != i {
					most = max(most, room[j])
				}
			}
			if e := shedFit(cs, c, limit, most) - shed(cs, 0, limit); extra < 0 || e < extra {
				extra = e
			}
		}
		n += max(extra, 0)
	}
	return max(n, empty)
}

// shedFit is shed when the leases given away go to workers with at most
// room to spare: one that costs more than room counts one move more (the
// receiver's), once. It is the fewest moves k for which some choice of
// leases removes enough load, which for a given number of leases that fit
// and that do not is the costliest of each; when no choice does (the
// limit is out of reach for this worker), it is shed's count.
func shedFit(costs []float64, add, limit, room float64) int {
	excess := add - limit
	var fit, over []float64
	for _, c := range costs {
		excess += c
		if c <= room {
			fit = append(fit, c)
		} else {
			over = append(over, c)
		}
	}
	if excess <= 0 {
		return 0
	}
	top := func(cs []float64) []float64 { // top(cs)[i]: the sum of the i costliest
		slices.Sort(cs)
		slices.Reverse(cs)
		sums := make([]float64, len(cs)+1)
		for i, c := range cs {
			sums[i+1] = sums[i] + c
		}
		return sums
	}
	f, o := top(fit), top(over)
	for k := 1; k <= len(costs)+1; k++ {
		most := f[min(k, len(fit))]
		for m := 1; m <= len(over) && m+1 <= k; m++ {
			most = max(most, o[m]+f[min(k-m-1, len(fit))])
		}
		if most >= excess-1e-12 {
			return k
		}
	}
	return shed(costs, add, limit)
}

// shed returns the fewest of the leases of costs a worker holding them,
// and given one more of cost add, must give away to carry at most limit:
// the costliest first (the lease added stays).
func shed(costs []float64, add, limit float64) int {
	n, _ := shedding(costs, add, limit)
	return n
}

// shedding is shed's count and the load the worker carries after giving
// those leases away.
func shedding(costs []float64, add, limit float64) (n int, kept float64) {
	kept = add
	for _, c := range costs {
		kept += c
	}
	sorted := slices.Clone(costs)
	slices.Sort(sorted)
	for i := len(sorted) - 1; i >= 0 && kept > limit; i-- {
		kept -= sorted[i]
		n++
	}
	return n, kept
}
