package soak

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPlanDeterministic(t *testing.T) {
	shape := Shape{Duration: 45 * time.Second, Warmup: 8 * time.Second, Workers: 5, LeaseDuration: 3 * time.Second}
	a, b := NewPlan(11, shape), NewPlan(11, shape)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two plans of one seed differ:\n%s", diff)
	}
	if c := NewPlan(12, shape); cmp.Equal(a.Events, c.Events) {
		t.Errorf("seeds 11 and 12 drew the same plan")
	}
}

// TestPlanShape: for many seeds and both run lengths, every fault kind is
// drawn at least once, all of them within the run after the warm-up, and
// faults of one worker slot never overlap (with two lease durations to
// settle after each).
func TestPlanShape(t *testing.T) {
	faults := []Kind{KindKill, KindSIGTERM, KindPause, KindCutDynamoDB, KindCutKinesis, KindErrorsKinesis,
		KindErrorsDynamoDB, KindErrorsSQS, KindSlow, KindSplit, KindMerge, KindOutage}
	for _, d := range []time.Duration{45 * time.Second, 10 * time.Minute} {
		shape := Shape{Duration: d, Warmup: 8 * time.Second, Workers: 5, LeaseDuration: 3 * time.Second}
		for seed := range uint64(200) {
			p := NewPlan(seed, shape)
			if len(p.Skipped) > 0 {
				t.Errorf("seed %d, %v: skipped %v", seed, d, p.Skipped)
			}
			seen := map[Kind]int{}
			type iv struct{ from, to time.Duration }
			slots := map[int][]iv{}
			for _, e := range p.Events {
				seen[e.Kind]++
				if e.At < shape.Warmup || e.At+e.For > d {
					t.Errorf("seed %d, %v: %s at %v for %v is outside the run", seed, d, e.Kind, e.At, e.For)
				}
				if e.Slot < 0 {
					continue
				}
				to := e.At + e.For + e.Replace + 2*shape.LeaseDuration
				for _, o := range slots[e.Slot] {
					if o.from < to && e.At < o.to {
						t.Errorf("seed %d, %v: %s at %v overlaps another fault of slot %d", seed, d, e.Kind, e.At, e.Slot)
					}
				}
				slots[e.Slot] = append(slots[e.Slot], iv{e.At, to})
			}
			for _, k := range faults {
				if seen[k] == 0 {
					t.Errorf("seed %d, %v: no %s in the plan:\n%s", seed, d, k, p)
				}
			}
			if seen[KindOutage] != 1 {
				t.Errorf("seed %d, %v: %d outages, want 1", seed, d, seen[KindOutage])
			}
			if !slices.IsSortedFunc(p.Events, func(a, b Event) int { return int(a.At - b.At) }) {
				t.Errorf("seed %d, %v: events not in time order", seed, d)
			}
		}
		p := NewPlan(1, shape)
		for _, e := range p.Events {
			if e.Kind == KindOutage {
				want := time.Minute
				if d < 5*time.Minute {
					want = d / 5
				}
				if e.For != want {
					t.Errorf("%v: outage for %v, want %v", d, e.For, want)
				}
			}
		}
	}
}

// A lost response is drawn only on conditional writes: DynamoDB never
// answers a read with ConditionalCheckFailedException (an earlier schedule
// put it on every operation, so a lease write's read-back got it and the
// worker took its own applied write for a lost lease).
func TestPlanLostResponseOnWritesOnly(t *testing.T) {
	seen := 0
	for seed := range uint64(200) {
		p := NewPlan(seed, Shape{Duration: 10 * time.Minute, Warmup: 8 * time.Second, Workers: 5, LeaseDuration: 3 * time.Second})
		for _, e := range p.Events {
			if e.Kind != KindErrorsDynamoDB || e.Fault != "LostResponse" {
				continue
			}
			seen++
			if !slices.Equal(e.Ops, []string{"PutItem", "UpdateItem", "DeleteItem"}) {
				t.Errorf("seed %d: LostResponse on %v, want the conditional writes only", seed, e.Ops)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no seed drew a LostResponse burst")
	}
}
