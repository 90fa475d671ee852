package settle

import (
	"fmt"
	"testing"
)

// benchSeqs returns n increasing 56-digit sequence numbers.
func benchSeqs(n int) []string {
	seqs := make([]string, n)
	for i := range seqs {
		seqs[i] = fmt.Sprintf("495903382714902566085596925383615710959215%014d", 75989136588801+i)
	}
	return seqs
}

const benchDeliveries = 10_000

// deliverSettle delivers seqs and settles them in order or in reverse order.
func deliverSettle(tb testing.TB, w *Watermark, seqs []string, tickets []Ticket, reverse bool) {
	for i, seq := range seqs {
		tk, err := w.Deliver(seq, 1)
		if err != nil {
			tb.Fatal(err)
		}
		if reverse {
			tickets[i] = tk
			continue
		}
		if _, moved, err := w.Settle(tk); err != nil || !moved {
			tb.Fatalf("Settle: moved %v, %v", moved, err)
		}
	}
	if reverse {
		for i := len(tickets) - 1; i >= 0; i-- {
			if _, moved, err := w.Settle(tickets[i]); err != nil || moved != (i == 0) {
				tb.Fatalf("Settle(%d): moved %v, %v", i, moved, err)
			}
		}
	}
}

func benchmarkDeliverSettle(b *testing.B, reverse bool) {
	seqs := benchSeqs(benchDeliveries)
	tickets := make([]Ticket, len(seqs))
	w := NewWatermark("shardId-000000000000")
	deliverSettle(b, w, seqs, tickets, reverse) // grow the storage once: measure the steady state
	b.ReportAllocs()
	for b.Loop() {
		w.Reset("")
		deliverSettle(b, w, seqs, tickets, reverse)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchDeliveries), "ns/delivery")
}

// BenchmarkDeliverSettleInOrder delivers 10,000 single-part records and
// settles each right after its delivery, the Lambda case with one lane.
func BenchmarkDeliverSettleInOrder(b *testing.B) { benchmarkDeliverSettle(b, false) }

// BenchmarkDeliverSettleReverse delivers 10,000 single-part records, then
// settles them newest first: the checkpoint moves only on the last one.
func BenchmarkDeliverSettleReverse(b *testing.B) { benchmarkDeliverSettle(b, true) }

func BenchmarkCompareSequence56(b *testing.B) {
	x := "49590338271490256608559692538361571095921575989136588801"
	y := "49590338271490256608559692538361571095921575989136588802"
	b.ReportAllocs()
	for b.Loop() {
		if CompareSequence(x, y) != -1 {
			b.Fatal("wrong order")
		}
	}
}

// TestSteadyStateAllocs pins the allocation-free hot path: once a
// Watermark's storage has grown, single-part Deliver plus Settle does not
// allocate, in order or in reverse.
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	seqs := benchSeqs(1_000)
	tickets := make([]Ticket, len(seqs))
	for _, reverse := range []bool{false, true} {
		t.Run(fmt.Sprintf("reverse=%v", reverse), func(t *testing.T) {
			w := NewWatermark("shardId-000000000000")
			deliverSettle(t, w, seqs, tickets, reverse) // grow the storage
			allocs := testing.AllocsPerRun(20, func() {
				w.Reset("")
				deliverSettle(t, w, seqs, tickets, reverse)
			})
			if allocs != 0 {
				t.Errorf("%v allocations per 1,000 deliveries, want 0", allocs)
			}
		})
	}
	t.Run("long-running window", func(t *testing.T) {
		// A long-lived epoch with a window of deliveries in flight: the
		// settled prefix is compacted in place, without allocating.
		w := NewWatermark("shardId-000000000000")
		const window = 32
		ring := make([]Ticket, window)
		n := 0
		step := func() {
			if n >= window {
				if _, _, err := w.Settle(ring[n%window]); err != nil {
					t.Fatal(err)
				}
			}
			tk, err := w.Deliver(benchNumbers[n], 1)
			if err != nil {
				t.Fatal(err)
			}
			ring[n%window] = tk
			n++
		}
		for range 10 * window {
			step()
		}
		if allocs := testing.AllocsPerRun(10_000, step); allocs != 0 {
			t.Errorf("%v allocations per delivery, want 0", allocs)
		}
	})
	t.Run("CompareSequence", func(t *testing.T) {
		x, y := seqs[0], seqs[1]
		if allocs := testing.AllocsPerRun(100, func() { CompareSequence(x, y) }); allocs != 0 {
			t.Errorf("%v allocations, want 0", allocs)
		}
	})
}

// benchNumbers holds preformatted sequence numbers so the window test does
// not count the formatting.
var benchNumbers = func() []string {
	s := make([]string, 64_000)
	for i := range s {
		s[i] = itoa(uint64(i) + 1)
	}
	return s
}()
