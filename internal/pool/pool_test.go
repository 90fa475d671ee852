package pool

import "testing"

// TestSlices: a pooled slice far larger than n is not used for n, one
// large enough is handed out empty and reset, and one above Max is not
// kept.
func TestSlices(t *testing.T) {
	s := Slices[*int]{Max: 1000}
	x := 1
	for range 10 {
		sp := s.Get(500)
		*sp = append(*sp, &x, &x)
		s.Put(sp)
		if sp := s.Get(10); Oversized(cap(*sp), 10) || len(*sp) != 0 {
			t.Fatalf("a slice of len %d, cap %d for 10 elements", len(*sp), cap(*sp))
		}
	}
	reused := false
	for range 20 {
		sp := s.Get(100)
		if cap(*sp) < 100 || len(*sp) != 0 {
			t.Fatalf("a slice of len %d, cap %d for 100 elements", len(*sp), cap(*sp))
		}
		if full := (*sp)[:cap(*sp)]; full[0] != nil || full[1] != nil {
			t.Fatal("a pooled slice handed out with the last user's elements")
		}
		*sp = append(*sp, &x, &x)
		first := &(*sp)[0]
		s.Put(sp)
		if again := s.Get(100); &(*again)[:1][0] == first {
			reused = true
		}
	}
	if !reused {
		t.Error("no slice was reused (the race detector drops some, not all)")
	}
	big := s.Get(2000)
	*big = append(*big, &x)
	first := &(*big)[0]
	s.Put(big)
	for range 10 {
		if sp := s.Get(1500); &(*sp)[:1][0] == first {
			t.Fatal("a slice above Max was kept")
		}
	}
	reset := 0
	r := Slices[int]{Max: 100, Reset: func(v []int) { reset += len(v); clear(v) }}
	sp := r.Get(10)
	*sp = append(*sp, 1, 2, 3)
	r.Put(sp)
	if reset != 3 {
		t.Errorf("Reset saw %d elements, want the 3 used", reset)
	}
}

func TestOversized(t *testing.T) {
	for _, c := range []struct {
		c, n int
		want bool
	}{{0, 0, false}, {64, 0, false}, {65, 0, true}, {464, 100, false}, {465, 100, true}} {
		if got := Oversized(c.c, c.n); got != c.want {
			t.Errorf("Oversized(%d, %d) = %v", c.c, c.n, got)
		}
	}
}
