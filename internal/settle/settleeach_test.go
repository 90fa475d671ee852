package settle

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestSettleEachMatchesSettle checks SettleEach against Settle called once
// per ticket on a twin watermark: random runs of tickets (repeated, out of
// order, stale, of another watermark, with bad parts) must settle the same
// ones and leave the same state.
func TestSettleEachMatchesSettle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for iter := range 2000 {
		a, b := NewWatermark("a"), NewWatermark("b")
		other := NewWatermark("other")
		ot, _ := other.Deliver("1", 1)
		var ta, tb []Ticket
		var staleA, staleB []Ticket
		deliver := func(n int) {
			for range n {
				seq := strconv.Itoa(len(ta)*3 + 10)
				parts := 1
				if rng.IntN(4) == 0 {
					parts = 1 + rng.IntN(5)
				}
				x, err := a.Deliver(seq, parts)
				if err != nil {
					t.Fatal(err)
				}
				y, _ := b.Deliver(seq, parts)
				for p := range parts {
					ta, tb = append(ta, x.Part(p)), append(tb, y.Part(p))
				}
			}
		}
		deliver(1 + rng.IntN(20))
		if rng.IntN(5) == 0 { // tickets of an earlier epoch
			staleA, staleB = append(staleA, ta...), append(staleB, tb...)
			a.Reset("")
			b.Reset("")
			ta, tb = ta[:0:0], tb[:0:0]
			deliver(1 + rng.IntN(20))
		}
		for range 1 + rng.IntN(4) {
			var batchA []Ticket
			var wantN int
			for range rng.IntN(len(ta) + 3) {
				i := rng.IntN(len(ta))
				x, y := ta[i], tb[i]
				switch k := rng.IntN(20); {
				case k == 0:
					x, y = ot, ot
				case k == 1 && len(staleA) > 0:
					j := rng.IntN(len(staleA))
					x, y = staleA[j], staleB[j]
				case k == 2:
					x, y = x.Part(-1), y.Part(-1)
				case k == 3:
					x, y = x.Part(7), y.Part(7)
				}
				batchA = append(batchA, x)
				if _, _, err := b.Settle(y); err == nil {
					wantN++
				}
			}
			if got := a.SettleEach(batchA); got != wantN {
				t.Fatalf("iteration %d: SettleEach settled %d, Settle one by one %d", iter, got, wantN)
			}
			if pa, pb := a.Position(), b.Position(); pa != pb {
				t.Fatalf("iteration %d: position %+v, want %+v", iter, pa, pb)
			}
			fa, oka := a.FirstUnsettled()
			fb, okb := b.FirstUnsettled()
			if fa != fb || oka != okb || a.Pending() != b.Pending() || a.Span() != b.Span() {
				t.Fatalf("iteration %d: first unsettled %q %v pending %d span %d, want %q %v %d %d",
					iter, fa, oka, a.Pending(), a.Span(), fb, okb, b.Pending(), b.Span())
			}
		}
	}
}
