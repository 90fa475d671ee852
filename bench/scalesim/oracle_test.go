package scalesim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOracleJoin: the oracle's placement after a join makes FewestMoves's
// count of moves, keeps every lease, leaves every old worker within the
// limit and gives every joiner a lease.
func TestOracleJoin(t *testing.T) {
	l := func(costs ...float64) []shardLoad {
		var out []shardLoad
		for _, c := range costs {
			out = append(out, shardLoad{cost: c})
		}
		return out
	}
	tests := []struct {
		name   string
		held   [][]shardLoad
		joined int
		want   int // moves
		most   float64
	}{
		// Mean 2.1/4, limit 0.63: the first two give their costliest
		// (0.5, 0.4); the joiners take them.
		{"two above, two join", [][]shardLoad{l(0.5, 0.3, 0.2), l(0.4, 0.4), l(0.3)}, 2, 2, 0.5},
		// Nobody above the limit (mean 3/11, limit 0.327): the joiner
		// takes a lease from the busiest.
		{"fill only", [][]shardLoad{l(0.1, 0.1, 0.1), l(0.1, 0.1, 0.1), l(0.1, 0.1, 0.1), l(0.1, 0.1, 0.1), l(0.1, 0.1, 0.1), l(0.1, 0.1, 0.1), l(0.1, 0.1, 0.1), l(0.1, 0.1, 0.1), l(0.1, 0.1, 0.1), l(0.1, 0.1, 0.1)}, 1, 1, 0.3},
		// More given than joiners (mean 0.625, limit 0.75): the rest go
		// to the least loaded.
		{"more given", [][]shardLoad{l(0.6, 0.5, 0.1), l(0.6, 0.5, 0.1), l(0.1)}, 1, 2, 0.7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			costs := make([][]float64, len(tt.held))
			n, total := 0, 0.0
			for i, ls := range tt.held {
				for _, x := range ls {
					costs[i] = append(costs[i], x.cost)
					total += x.cost
					n++
				}
			}
			for range tt.joined {
				costs = append(costs, nil)
			}
			out, moves := oracleJoin(tt.held, tt.joined, balanceRatio, 0)
			if fewest := FewestMoves(costs, balanceRatio); moves != fewest || moves != tt.want {
				t.Errorf("moves %d, FewestMoves %d, want %d", moves, fewest, tt.want)
			}
			got, hi := 0, 0.0
			for i, ls := range out {
				s := 0.0
				for _, x := range ls {
					s += x.cost
				}
				got += len(ls)
				hi = max(hi, s)
				if len(ls) == 0 {
					t.Errorf("worker %d holds nothing", i)
				}
			}
			if got != n {
				t.Errorf("%d leases placed, want %d", got, n)
			}
			if hi > tt.most+1e-9 {
				t.Errorf("busiest %.2f, want at most %.2f", hi, tt.most)
			}
			if want := hi / (total / float64(len(out))); math.Abs(maxMeanLoads(out)-want) > 1e-9 {
				t.Errorf("maxMeanLoads %v, want %v", maxMeanLoads(out), want)
			}
		})
	}
}

// TestOracleJoinBudget: moves beyond the fewest lower the busiest while
// they can, and stop when no move does.
func TestOracleJoinBudget(t *testing.T) {
	held := [][]shardLoad{{{cost: 0.3}, {cost: 0.2}, {cost: 0.1}}, {{cost: 0.2}, {cost: 0.2}}, {{cost: 0.1}, {cost: 0.1}}, {{cost: 0.2}, {cost: 0.1}}}
	// Mean 1.5/5 = 0.3, limit 0.36. The fewest: the first gives 0.3 to
	// the joiner, the second 0.2 to the least loaded but itself, the
	// third (0.4 after). One move more: the third gives 0.1 to the
	// second, and everyone carries 0.3.
	_, fewest := oracleJoin(held, 1, balanceRatio, 0)
	out, moves := oracleJoin(held, 1, balanceRatio, fewest+1)
	if fewest != 2 || moves != 3 {
		t.Errorf("moves %d (fewest %d), want 3 (2)", moves, fewest)
	}
	if got := maxMeanLoads(out); math.Abs(got-1) > 1e-9 {
		t.Errorf("max/mean %.3f after one move more, want 1", got)
	}
	if _, moves := oracleJoin(held, 1, balanceRatio, 100); moves != 3 {
		t.Errorf("%d moves with a budget of 100, want 3: no move lowers the busiest below 0.3", moves)
	}
}

// TestReadWithin: a placement within the limit reads within it when the
// window is long enough for the noise to vanish, and not when the busiest
// is above; at the limit exactly, about half the readings are within; with
// a grain of 25 (a stream 25 times as busy), a placement 1.16 × the mean
// reads within in every one-minute reading.
func TestReadWithin(t *testing.T) {
	const perRecord = 0.01
	w := func(records float64) []shardLoad { return []shardLoad{{cost: records * perRecord, records: records}} }
	rng := rand.New(rand.NewPCG(1, 2))
	even := [][]shardLoad{w(40), w(40), w(40), w(49)}                                                  // 1.16 × the mean
	above := [][]shardLoad{w(40), w(40), w(40), w(60)}                                                 // 1.33
	at := [][]shardLoad{w(40), w(40), w(40), w(40), w(40), w(40), w(40), w(40), w(40), w(432.0 / 8.8)} // 1.2
	if p := readWithin(even, perRecord, 1e6, 1, balanceRatio, 1000, rng); p != 1 {
		t.Errorf("within: %v of long readings, want 1", p)
	}
	if p := readWithin(above, perRecord, 1e6, 1, balanceRatio, 1000, rng); p != 0 {
		t.Errorf("above (1.33): %v of long readings within, want 0", p)
	}
	pAt, pEven := readWithin(at, perRecord, 60, 1, balanceRatio, 4000, rng), readWithin(even, perRecord, 60, 1, balanceRatio, 4000, rng)
	t.Logf("one-minute readings within 1.2: %.3f at the limit, %.3f at 1.16", pAt, pEven)
	if p := pAt; p < 0.3 || p > 0.6 {
		t.Errorf("at the limit: %v of one-minute readings within, want about half (less: the others' noise adds)", p)
	}
	if p := pEven; p < 0.9 || p == 1 {
		t.Errorf("1.16 × the mean: %v of one-minute readings within, want most but not all", p)
	}
	if p := readWithin(even, perRecord, 60, 25, balanceRatio, 4000, rng); p != 1 {
		t.Errorf("1.16 × the mean, grain 25: %v of one-minute readings within, want all", p)
	}
}

// TestOraclePlace: a dead worker's leases and those off workers above the
// limit are placed within the limit, each move counted once, with at
// least FewestMovesPlacing's count; a hot lease goes to the worker that
// then gives fewest leases on.
func TestOraclePlace(t *testing.T) {
	l := func(costs ...float64) []shardLoad {
		var out []shardLoad
		for _, c := range costs {
			out = append(out, shardLoad{cost: c})
		}
		return out
	}
	costsOf := func(held [][]shardLoad) [][]float64 {
		out := make([][]float64, len(held))
		for i, ls := range held {
			for _, x := range ls {
				out[i] = append(out[i], x.cost)
			}
		}
		return out
	}
	tests := []struct {
		name     string
		held     [][]shardLoad
		unplaced []shardLoad
		want     int
	}{
		// Mean 2.4/4 = 0.6, limit 0.72: the 0.6 goes to the 0.1 worker.
		{"room", [][]shardLoad{l(0.5), l(0.5), l(0.5), l(0.1)}, l(0.6, 0.2), 2},
		// Mean 3/2 = 1.5, limit 1.8: the 0.9 fits neither worker as it
		// is; its receiver gives one lease on: 3 moves.
		{"hot", [][]shardLoad{l(0.7, 0.3), l(0.2, 0.2, 0.2, 0.2, 0.2)}, l(0.9, 0.1), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var un []float64
			n, total := 0, 0.0
			for _, x := range tt.unplaced {
				un = append(un, x.cost)
				total += x.cost
				n++
			}
			for _, ls := range tt.held {
				for _, x := range ls {
					total += x.cost
					n++
				}
			}
			out, moves, ok := oraclePlace(tt.held, tt.unplaced, balanceRatio)
			if !ok {
				t.Fatalf("not within the limit: %v", out)
			}
			if fewest := FewestMovesPlacing(costsOf(tt.held), un, balanceRatio); moves < fewest {
				t.Errorf("%d moves, fewer than FewestMovesPlacing's %d", moves, fewest)
			}
			if moves != tt.want {
				t.Errorf("%d moves, want %d", moves, tt.want)
			}
			got := 0
			for _, ls := range out {
				got += len(ls)
			}
			if got != n {
				t.Errorf("%d leases placed, want %d", got, n)
			}
			if m := maxMeanLoads(out); m > balanceRatio+1e-9 {
				t.Errorf("max/mean %.3f, want at most %.1f", m, balanceRatio)
			}
		})
	}
}

// TestPlaceGreedily checks that Sure is the greedy placement to the
// highest limit whose readings say sureShare, and nil where none does.
func TestPlaceGreedily(t *testing.T) {
	tenths := func() []shardLoad { return slices.Repeat([]shardLoad{{cost: 0.1}}, 10) }
	held := [][]shardLoad{tenths(), tenths(), tenths(), tenths()}
	// Mean 4.4/4 = 1.1. To 1.2 and 1.19 × it (1.32, 1.309) the 0.4's
	// taker gives one 0.1 on (2 moves, its load 1.3: 1.18 × the mean);
	// to 1.18 × (1.298), two (3 moves, 1.2: 1.09 ×).
	read := func(placed [][]shardLoad) float64 {
		if maxMeanLoads(placed) <= 1.16 {
			return 1
		}
		return 0.5
	}
	greedy, sure := placeGreedily(held, []shardLoad{{cost: 0.4}}, read)
	if greedy == nil || greedy.Moves != 2 || greedy.Within != 0.5 || greedy.Limit != 0 {
		t.Errorf("greedy %+v, want 2 moves read within in 0.5", greedy)
	}
	if sure == nil || sure.Moves != 3 || math.Abs(sure.Limit-1.18) > 1e-9 || sure.Within != 1 {
		t.Errorf("sure %+v, want 3 moves to 1.18", sure)
	}
	never := func([][]shardLoad) float64 { return 0.89 }
	if greedy, sure := placeGreedily(held, []shardLoad{{cost: 0.4}}, never); greedy == nil || sure != nil {
		t.Errorf("read within in 0.89 at every limit: greedy %+v, sure %+v, want a greedy and no sure", greedy, sure)
	}
}

// TestSureJoin checks that a join's Sure spends moves on the peak one at
// a time until the readings say sureShare, and is nil once the peak
// falls no further.
func TestSureJoin(t *testing.T) {
	quarters := func() []shardLoad { return slices.Repeat([]shardLoad{{cost: 0.25}}, 8) }
	held := [][]shardLoad{quarters(), quarters()}
	// Mean 4/3, limit 1.6: each gives two quarters to the joiner (the
	// fewest, 4 moves: 1.5, 1.5, 1). One more evens one of them with the
	// joiner (1.25, 1.5, 1.25); the next would only swap the peak.
	var calls int
	read := func([][]shardLoad) float64 {
		calls++
		if calls == 1 {
			return 0.5
		}
		return 0.95
	}
	if u := sureJoin(held, 1, read); u == nil || u.Moves != 5 || u.Within != 0.95 || calls != 2 {
		t.Errorf("sure %+v after %d readings, want 5 moves after 2", u, calls)
	}
	if u := sureJoin(held, 1, func([][]shardLoad) float64 { return 0.5 }); u != nil {
		t.Errorf("sure %+v where no reading says %v, want none", u, sureShare)
	}
}
