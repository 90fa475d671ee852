package settle

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentSettle settles a shuffled set of ticket parts, each one
// twice, from many goroutines while readers poll the Watermark. Every part
// must be accepted exactly once, each goroutine must see the checkpoint only
// move forward, and the final checkpoint must be the last sequence number.
// Run it with -race.
func TestConcurrentSettle(t *testing.T) {
	const (
		deliveries = 5_000
		workers    = 16
		seed       = 7
	)
	r := rand.New(rand.NewPCG(seed, seed))
	w := NewWatermark("shardId-000000000000")
	var work []Ticket
	var last string
	for i := range deliveries {
		last = "49590338271490256608559692538361571095921575989136" + itoa(uint64(100000+i))
		parts := 1
		if r.IntN(5) == 0 {
			parts = 2 + r.IntN(70)
		}
		tk := mustDeliver(t, w, last, parts)
		for p := range parts {
			work = append(work, tk.Part(p), tk.Part(p))
		}
	}
	r.Shuffle(len(work), func(i, j int) { work[i], work[j] = work[j], work[i] })

	var accepted, duplicates, moves atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			prev := ""
			for {
				select {
				case <-stop:
					return
				default:
				}
				// The checkpoint only moves forward and FirstUnsettled is
				// always after it, so a checkpoint read before
				// FirstUnsettled is before it too.
				cp, ok := w.Checkpoint()
				first, unsettled := w.FirstUnsettled()
				if ok && unsettled && CompareSequence(cp, first) >= 0 {
					t.Errorf("checkpoint %s read before FirstUnsettled %s is not before it", cp, first)
				}
				if prev != "" && (!ok || CompareSequence(cp, prev) < 0) {
					t.Errorf("checkpoint moved back from %s to %q", prev, cp)
				}
				prev = cp
				if p := w.Pending(); p < 0 || p > deliveries {
					t.Errorf("Pending() = %d, want 0..%d", p, deliveries)
				}
			}
		})
	}
	chunk := (len(work) + workers - 1) / workers
	for g := range workers {
		mine := work[min(g*chunk, len(work)):min((g+1)*chunk, len(work))]
		wg.Go(func() {
			prev := ""
			for _, tk := range mine {
				cp, moved, err := w.Settle(tk)
				switch {
				case errors.Is(err, ErrAlreadySettled):
					duplicates.Add(1)
				case err != nil:
					t.Errorf("Settle: %v", err)
				default:
					accepted.Add(1)
					if moved {
						moves.Add(1)
						if prev != "" && CompareSequence(cp, prev) <= 0 {
							t.Errorf("moved checkpoint %s not after %s seen earlier by this goroutine", cp, prev)
						}
						prev = cp
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()

	if got, want := accepted.Load(), int64(len(work)/2); got != want {
		t.Errorf("accepted %d settlements, want %d (one per part)", got, want)
	}
	if got, want := duplicates.Load(), int64(len(work)/2); got != want {
		t.Errorf("%d duplicate settlements, want %d", got, want)
	}
	if moves.Load() < 1 || moves.Load() > deliveries {
		t.Errorf("%d moves, want 1..%d", moves.Load(), deliveries)
	}
	want := state{Checkpoint: last, HasCheckpoint: true, Epoch: 1}
	if got := snapshot(w); got != want {
		t.Errorf("final state %+v, want %+v", got, want)
	}
}
