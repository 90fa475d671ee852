package scalesim

import (
	"math/rand/v2"
	"testing"
)

// TestGrain draws records with and without a grain: every shard keeps its
// share of the records, and with a grain of 25 a shard's count over a run
// of records varies about a 25th as much as without (the counts of every
// 25th arrival of a stream 25 times as busy).
func TestGrain(t *testing.T) {
	const shards, block, blocks = 10, 200, 2000
	variance := func(grain int) float64 {
		s := &sim{ids: make([]string, shards), wrng: rand.New(rand.NewPCG(1, 2))}
		s.cfg.Grain = grain
		shares := []float64{0.3, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.03, 0.02}
		sum := 0.0
		for _, x := range shares {
			sum += x
			s.cum = append(s.cum, sum)
		}
		if grain > 1 {
			s.grains = make([]int, shards)
		}
		total := make([]int, shards)
		v := 0.0
		for range blocks {
			n := make([]int, shards)
			for range block {
				n[s.drawShard()]++
			}
			// Shard 2's count in the block against its share.
			d := float64(n[2]) - shares[2]*block
			v += d * d
			for i := range n {
				total[i] += n[i]
			}
		}
		for i, x := range shares {
			if got := float64(total[i]) / (block * blocks); got < x*0.95 || got > x*1.05 {
				t.Errorf("grain %d: shard %d carries %.4f of the records, want %.2f", grain, i, got, x)
			}
		}
		return v / blocks
	}
	plain, grained := variance(1), variance(25)
	// Plain: binomial, 200 × 0.1 × 0.9 = 18. Grained: about 18/25.
	if plain < 14 || plain > 22 {
		t.Errorf("plain variance %.2f, want about 18", plain)
	}
	if grained > plain/10 {
		t.Errorf("grained variance %.2f, plain %.2f: want below a tenth", grained, plain)
	}
	t.Logf("variance of a 10%% shard's count in %d records: plain %.2f, grain 25 %.2f", block, plain, grained)
}
