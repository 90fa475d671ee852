package settle

import "testing"

// TestUnsettledBefore counts the unsettled parts before a ticket, part by
// part inside a multi-part delivery, and FirstUnsettledTicket names the
// first of them.
func TestUnsettledBefore(t *testing.T) {
	w := NewWatermark("s")
	a, _ := w.Deliver("1", 1)
	g, _ := w.Deliver("2", 3) // an aggregate of three user records
	c, _ := w.Deliver("3", 1)
	count := func(t Ticket) int { return w.UnsettledBefore(t, 100) }
	if got := []int{count(a), count(g), count(g.Part(1)), count(g.Part(2)), count(c)}; got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 3 || got[4] != 4 {
		t.Fatalf("counts %v, want [0 1 2 3 4]", got)
	}
	if f, ok := w.FirstUnsettledTicket(); !ok || f != a {
		t.Fatalf("first %+v, want a", f)
	}
	if _, _, err := w.Settle(g.Part(1)); err != nil {
		t.Fatal(err)
	}
	if got := count(g.Part(2)); got != 2 {
		t.Errorf("before part 2 with part 1 settled: %d, want 2", got)
	}
	if _, _, err := w.Settle(a); err != nil {
		t.Fatal(err)
	}
	if f, ok := w.FirstUnsettledTicket(); !ok || f != g.Part(0) {
		t.Errorf("first %+v, want the aggregate's part 0", f)
	}
	if _, _, err := w.Settle(g.Part(0)); err != nil {
		t.Fatal(err)
	}
	if f, ok := w.FirstUnsettledTicket(); !ok || f != g.Part(2) {
		t.Errorf("first %+v, want the aggregate's part 2", f)
	}
	if got := count(c); got != 1 {
		t.Errorf("before c: %d, want 1 (part 2)", got)
	}
	if got := w.UnsettledBefore(c, 0); got < 1 {
		t.Errorf("limited count %d, want more than the limit", got)
	}
	if !g.Part(2).Before(c) || c.Before(g) || !g.Before(g.Part(1)) {
		t.Error("Before orders by delivery, then part")
	}
	w.Reset("")
	if got := w.UnsettledBefore(c, 10); got != -1 {
		t.Errorf("a ticket of an old epoch: %d, want -1", got)
	}
	if _, ok := w.FirstUnsettledTicket(); ok {
		t.Error("first unsettled after Reset")
	}
}
