package scalesim

import (
	"math"
	"slices"
	"testing"
)

// TestSkewFit: FitSkew's shares meet both conditions (the top 5% carry
// topShare, the hottest maxShare), fall with the rank and sum to 1.
func TestSkewFit(t *testing.T) {
	tests := []struct {
		n                  int
		topShare, maxShare float64
	}{
		{1000, 0.5, 0.02}, // the simulation's scenario
		{1000, 0.5, 0.015},
		{1000, 0.3, 0.01},
		{100, 0.5, 0.15},
		{10000, 0.5, 0.002},
	}
	for _, tt := range tests {
		k, err := FitSkew(tt.n, tt.topShare, tt.maxShare)
		if err != nil {
			t.Fatalf("FitSkew(%d, %v, %v): %v", tt.n, tt.topShare, tt.maxShare, err)
		}
		s := k.Shares(tt.n)
		m := int(math.Ceil(topFraction * float64(tt.n)))
		sum, top := 0.0, 0.0
		for i, x := range s {
			sum += x
			if i < m {
				top += x
			}
		}
		if !slices.IsSortedFunc(s, func(a, b float64) int { return -cmpFloat(a, b) }) {
			t.Errorf("FitSkew(%d, %v, %v) = %+v: shares do not fall with the rank", tt.n, tt.topShare, tt.maxShare, k)
		}
		if math.Abs(sum-1) > 1e-9 || math.Abs(top-tt.topShare) > 1e-6 || math.Abs(s[0]-tt.maxShare) > 1e-6 {
			t.Errorf("FitSkew(%d, %v, %v) = %+v: sum %v, top %v, hottest %v", tt.n, tt.topShare, tt.maxShare, k, sum, top, s[0])
		}
		t.Logf("n %d, top 5%% %v, hottest %v: Q %.2f, S %.3f; 50th %.4f%%, median %.4f%%, coldest %.4f%%",
			tt.n, tt.topShare, tt.maxShare, k.Q, k.S, 100*s[m-1], 100*s[tt.n/2], 100*s[tt.n-1])
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestSkewFitErrors: contradictory shares are refused.
func TestSkewFitErrors(t *testing.T) {
	for _, tt := range []struct {
		n                  int
		topShare, maxShare float64
	}{
		{1, 0.5, 0.5},        // too few shards
		{1000, 0.04, 0.01},   // top share below even
		{1000, 0.5, 0.009},   // hottest below the top's mean
		{1000, 0.5, 0.6},     // hottest above the top's share
		{1000, 0.95, 0.0195}, // no law with that hottest share puts so much on the top
	} {
		if k, err := FitSkew(tt.n, tt.topShare, tt.maxShare); err == nil {
			t.Errorf("FitSkew(%d, %v, %v) = %+v, want an error", tt.n, tt.topShare, tt.maxShare, k)
		}
	}
}

// TestSkewBalanceable: the scenario's shares can be balanced on 50 workers
// within 1.2 (the costliest-first greedy packing does), while those of a
// Zipf law with S 1 fitted to the same top 5% cannot (its hottest shard
// alone is above 1.2 of a worker's mean).
func TestSkewBalanceable(t *testing.T) {
	const n, workers = 1000, 50
	k, err := FitSkew(n, 0.5, 0.02)
	if err != nil {
		t.Fatal(err)
	}
	got := pack(k.Shares(n), workers)
	if got > 1.2 {
		t.Errorf("%+v: costliest-first packing's busiest/mean %.3f, want <= 1.2", k, got)
	}
	t.Logf("%+v on %d workers: costliest-first packing's busiest/mean %.4f", k, workers, got)
	zipf := Skew{Q: 2.26, S: 1}
	if top := zipf.top(n, 50); math.Abs(top-0.5) > 0.001 {
		t.Fatalf("Zipf S 1, Q 2.26: top 5%% carry %.4f, want 0.5", top)
	}
	if hot := zipf.Shares(n)[0] * workers; hot <= 1.2 {
		t.Errorf("Zipf S 1, Q 2.26: the hottest shard is %.2f of a worker's mean, want > 1.2", hot)
	}
}

// pack assigns the shares to workers, costliest first, each to the least
// loaded, and returns the busiest's load over the mean.
func pack(shares []float64, workers int) float64 {
	s := slices.Clone(shares)
	slices.Sort(s)
	loads := make([]float64, workers)
	for i := len(s) - 1; i >= 0; i-- {
		j := 0
		for w := range loads {
			if loads[w] < loads[j] {
				j = w
			}
		}
		loads[j] += s[i]
	}
	total := 0.0
	for _, l := range loads {
		total += l
	}
	return slices.Max(loads) / (total / float64(workers))
}

// TestSkewFewestMoves: the lower bound on moves counts, for each worker
// above the limit, its costliest leases until it is under, plus the
// leases to place, plus what the worker that takes the costliest of them
// must give away at least; and at least one move into each worker holding
// nothing (a converged fleet has none).
func TestSkewFewestMoves(t *testing.T) {
	tests := []struct {
		name  string
		costs [][]float64
		ratio float64
		want  int
	}{
		{"balanced", [][]float64{{1, 1}, {1, 1}}, 1.2, 0},
		{"no workers", nil, 1.2, 0},
		{"a joiner alone needs one lease", [][]float64{{1, 1, 1}, {1, 1, 1}, {}}, 1.5, 1},
		{"each joiner needs one lease", [][]float64{{1, 1}, {1, 1}, {}, {}, {}}, 3, 3},
		{"a joiner lowers the mean below the others", [][]float64{{1, 1, 1}, {1, 1, 1}, {}}, 1.2, 2}, // mean 2, limit 2.4: each gives 1
		{"costliest first", [][]float64{{0.5, 3, 0.5, 0.5, 0.5}, {1}, {1}, {1}}, 1.2, 1},             // mean 2, limit 2.4: the 3 goes
		{"several from one", [][]float64{{1, 1, 1, 1, 1, 1, 1, 1}, {}, {}, {}}, 1.2, 6},              // mean 2, limit 2.4: 8 → 2
		{"a lease above the limit by itself still counts once", [][]float64{{10}, {1}, {1}}, 1.2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FewestMoves(tt.costs, tt.ratio); got != tt.want {
				t.Errorf("FewestMoves(%v, %v) = %d, want %d", tt.costs, tt.ratio, got, tt.want)
			}
		})
	}
	placing := []struct {
		name     string
		costs    [][]float64
		unplaced []float64
		ratio    float64
		want     int
	}{
		{"each lease to place is one move", [][]float64{{1}, {1}}, []float64{1, 1, 1}, 1.2, 3},
		{"placed leases fill the empty workers", [][]float64{{1, 1}, {}, {}}, []float64{1, 1, 1}, 1.2, 3},
		{"shedding and placing add up", [][]float64{{1, 1, 1, 1}, {}, {}, {}}, []float64{1}, 1.2, 4}, // mean 1.25, limit 1.5: 3 off the first, 1 placed
		{"more empty workers than leases to place", [][]float64{{1, 1}, {1, 1}, {}, {}}, []float64{1}, 3, 2},
		// mean 1.9, limit 2.28: whoever takes the 1.2 carries 2.7 and gives a 0.5 away.
		{"a hot lease that fits no worker's room", [][]float64{{0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}}, []float64{1.2}, 1.2, 2},
		// The same with room on the third worker: the lease alone.
		{"a hot lease that fits one worker's room", [][]float64{{0.5, 0.5, 0.5}, {0.5, 0.5, 0.5}, {0.5}}, []float64{1.2}, 1.2, 1},
		// mean 1.55, limit 1.86: whoever takes the 1 carries 2.3 and must
		// give 0.44; the 0.1 is too little and a 0.6 fits nobody's room
		// (0.56), so its receiver gives a lease on too.
		{"a lease given on that fits no worker's room", [][]float64{{0.6, 0.6, 0.1}, {0.6, 0.6, 0.1}, {0.6, 0.6, 0.1}, {0.6, 0.6, 0.1}}, []float64{1}, 1.2, 3},
		// The same with a 0.5 instead of a 0.6 on one worker: it fits.
		{"a lease given on that fits a worker's room", [][]float64{{0.6, 0.5, 0.1}, {0.6, 0.6, 0.1}, {0.6, 0.6, 0.1}, {0.6, 0.6, 0.1}}, []float64{1}, 1.2, 2},
	}
	for _, tt := range placing {
		t.Run(tt.name, func(t *testing.T) {
			if got := FewestMovesPlacing(tt.costs, tt.unplaced, tt.ratio); got != tt.want {
				t.Errorf("FewestMovesPlacing(%v, %v, %v) = %d, want %d", tt.costs, tt.unplaced, tt.ratio, got, tt.want)
			}
		})
	}
}
