package settle

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// state is everything a Watermark shows from outside.
type state struct {
	Checkpoint     string
	HasCheckpoint  bool
	FirstUnsettled string
	HasUnsettled   bool
	Pending        int
	Ended          bool
	Epoch          Epoch
}

func snapshot(w *Watermark) state {
	var s state
	s.Checkpoint, s.HasCheckpoint = w.Checkpoint()
	s.FirstUnsettled, s.HasUnsettled = w.FirstUnsettled()
	s.Pending = w.Pending()
	s.Ended = w.Ended()
	s.Epoch = w.Epoch()
	return s
}

func mustDeliver(t *testing.T, w *Watermark, seq string, parts int) Ticket {
	t.Helper()
	tk, err := w.Deliver(seq, parts)
	if err != nil {
		t.Fatalf("Deliver(%q, %d): %v", seq, parts, err)
	}
	return tk
}

func mustSettle(t *testing.T, w *Watermark, tk Ticket) {
	t.Helper()
	if _, _, err := w.Settle(tk); err != nil {
		t.Fatalf("Settle(%+v): %v", tk, err)
	}
}

func TestNewWatermark(t *testing.T) {
	w := NewWatermark("shardId-000000000007")
	if got := w.ShardID(); got != "shardId-000000000007" {
		t.Errorf("ShardID() = %q, want shardId-000000000007", got)
	}
	want := state{Epoch: 1}
	if diff := cmp.Diff(want, snapshot(w)); diff != "" {
		t.Errorf("new Watermark state (-want +got):\n%s", diff)
	}
}

// TestErrors checks each rule that makes an operation fail: the last
// operation of run must fail with wantErr (errors.Is) and leave the
// Watermark in state want.
func TestErrors(t *testing.T) {
	long := "1" + strings.Repeat("0", 129)
	tests := []struct {
		name    string
		run     func(t *testing.T, w *Watermark) error
		wantErr error
		want    state
	}{
		{
			name: "deliver empty sequence",
			run: func(t *testing.T, w *Watermark) error {
				_, err := w.Deliver("", 1)
				return err
			},
			wantErr: ErrInvalidSequence,
			want:    state{Epoch: 1},
		},
		{
			name: "deliver leading zero",
			run: func(t *testing.T, w *Watermark) error {
				_, err := w.Deliver("0123", 1)
				return err
			},
			wantErr: ErrInvalidSequence,
			want:    state{Epoch: 1},
		},
		{
			name: "deliver non-digit",
			run: func(t *testing.T, w *Watermark) error {
				_, err := w.Deliver("12x4", 1)
				return err
			},
			wantErr: ErrInvalidSequence,
			want:    state{Epoch: 1},
		},
		{
			name: "deliver 130 digits",
			run: func(t *testing.T, w *Watermark) error {
				_, err := w.Deliver(long, 1)
				return err
			},
			wantErr: ErrInvalidSequence,
			want:    state{Epoch: 1},
		},
		{
			name: "deliver zero parts",
			run: func(t *testing.T, w *Watermark) error {
				_, err := w.Deliver("1", 0)
				return err
			},
			wantErr: ErrInvalidParts,
			want:    state{Epoch: 1},
		},
		{
			name: "deliver negative parts",
			run: func(t *testing.T, w *Watermark) error {
				_, err := w.Deliver("1", -3)
				return err
			},
			wantErr: ErrInvalidParts,
			want:    state{Epoch: 1},
		},
		{
			name: "deliver more than MaxParts",
			run: func(t *testing.T, w *Watermark) error {
				_, err := w.Deliver("1", MaxParts+1)
				return err
			},
			wantErr: ErrInvalidParts,
			want:    state{Epoch: 1},
		},
		{
			name: "deliver equal to previous",
			run: func(t *testing.T, w *Watermark) error {
				mustDeliver(t, w, "100", 1)
				_, err := w.Deliver("100", 1)
				return err
			},
			wantErr: ErrOutOfOrder,
			want:    state{FirstUnsettled: "100", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "deliver 9 after 10 (string order would accept it)",
			run: func(t *testing.T, w *Watermark) error {
				mustDeliver(t, w, "10", 1)
				_, err := w.Deliver("9", 1)
				return err
			},
			wantErr: ErrOutOfOrder,
			want:    state{FirstUnsettled: "10", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "deliver before previous after it settled",
			run: func(t *testing.T, w *Watermark) error {
				mustSettle(t, w, mustDeliver(t, w, "500", 1))
				_, err := w.Deliver("499", 1)
				return err
			},
			wantErr: ErrOutOfOrder,
			want:    state{Checkpoint: "500", HasCheckpoint: true, Epoch: 1},
		},
		{
			name: "deliver equal to reset position",
			run: func(t *testing.T, w *Watermark) error {
				w.Reset("700")
				_, err := w.Deliver("700", 1)
				return err
			},
			wantErr: ErrOutOfOrder,
			want:    state{Checkpoint: "700", HasCheckpoint: true, Epoch: 2},
		},
		{
			name: "deliver after end",
			run: func(t *testing.T, w *Watermark) error {
				mustSettle(t, w, mustDeliver(t, w, "5", 1))
				if err := w.End(); err != nil {
					t.Fatalf("End: %v", err)
				}
				_, err := w.Deliver("6", 1)
				return err
			},
			wantErr: ErrEnded,
			want:    state{Checkpoint: "5", HasCheckpoint: true, Ended: true, Epoch: 1},
		},
		{
			name: "deliver after end beats invalid input",
			run: func(t *testing.T, w *Watermark) error {
				if err := w.End(); err != nil {
					t.Fatalf("End: %v", err)
				}
				_, err := w.Deliver("x", 0)
				return err
			},
			wantErr: ErrEnded,
			want:    state{Ended: true, Epoch: 1},
		},
		{
			name: "settle single part twice",
			run: func(t *testing.T, w *Watermark) error {
				mustDeliver(t, w, "1", 1)
				tk := mustDeliver(t, w, "2", 1)
				mustSettle(t, w, tk)
				_, _, err := w.Settle(tk)
				return err
			},
			wantErr: ErrAlreadySettled,
			want:    state{FirstUnsettled: "1", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "settle twice after the checkpoint passed it",
			run: func(t *testing.T, w *Watermark) error {
				tk := mustDeliver(t, w, "1", 1)
				mustDeliver(t, w, "2", 1)
				mustSettle(t, w, tk)
				_, _, err := w.Settle(tk)
				return err
			},
			wantErr: ErrAlreadySettled,
			want:    state{Checkpoint: "1", HasCheckpoint: true, FirstUnsettled: "2", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "settle twice after the settled prefix was dropped",
			run: func(t *testing.T, w *Watermark) error {
				tk := mustDeliver(t, w, "1", 1)
				mustSettle(t, w, tk)
				mustSettle(t, w, mustDeliver(t, w, "2", 1))
				_, _, err := w.Settle(tk)
				return err
			},
			wantErr: ErrAlreadySettled,
			want:    state{Checkpoint: "2", HasCheckpoint: true, Epoch: 1},
		},
		{
			name: "settle same part of a multi-part delivery twice",
			run: func(t *testing.T, w *Watermark) error {
				tk := mustDeliver(t, w, "1", 3)
				mustSettle(t, w, tk.Part(1))
				_, _, err := w.Settle(tk.Part(1))
				return err
			},
			wantErr: ErrAlreadySettled,
			want:    state{FirstUnsettled: "1", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "settle part 64 of 100 twice (second bitset word)",
			run: func(t *testing.T, w *Watermark) error {
				tk := mustDeliver(t, w, "1", 100)
				mustSettle(t, w, tk.Part(64))
				_, _, err := w.Settle(tk.Part(64))
				return err
			},
			wantErr: ErrAlreadySettled,
			want:    state{FirstUnsettled: "1", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "settle stale ticket after reset",
			run: func(t *testing.T, w *Watermark) error {
				tk := mustDeliver(t, w, "1", 1)
				w.Reset("")
				mustDeliver(t, w, "1", 1)
				_, _, err := w.Settle(tk)
				return err
			},
			wantErr: ErrStale,
			want:    state{FirstUnsettled: "1", HasUnsettled: true, Pending: 1, Epoch: 2},
		},
		{
			name: "settle stale settled ticket after reset",
			run: func(t *testing.T, w *Watermark) error {
				tk := mustDeliver(t, w, "1", 1)
				mustSettle(t, w, tk)
				w.Reset("0")
				_, _, err := w.Settle(tk)
				return err
			},
			wantErr: ErrStale,
			want:    state{Checkpoint: "0", HasCheckpoint: true, Epoch: 2},
		},
		{
			name: "settle zero ticket",
			run: func(t *testing.T, w *Watermark) error {
				mustDeliver(t, w, "1", 1)
				_, _, err := w.Settle(Ticket{})
				return err
			},
			wantErr: ErrUnknownTicket,
			want:    state{FirstUnsettled: "1", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "settle ticket of another watermark",
			run: func(t *testing.T, w *Watermark) error {
				mustDeliver(t, w, "1", 1)
				other := NewWatermark("other")
				tk := mustDeliver(t, other, "1", 1)
				_, _, err := w.Settle(tk)
				return err
			},
			wantErr: ErrUnknownTicket,
			want:    state{FirstUnsettled: "1", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "settle part 1 of a single-part delivery",
			run: func(t *testing.T, w *Watermark) error {
				tk := mustDeliver(t, w, "1", 1)
				_, _, err := w.Settle(tk.Part(1))
				return err
			},
			wantErr: ErrUnknownTicket,
			want:    state{FirstUnsettled: "1", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "settle part equal to parts",
			run: func(t *testing.T, w *Watermark) error {
				tk := mustDeliver(t, w, "1", 3)
				_, _, err := w.Settle(tk.Part(3))
				return err
			},
			wantErr: ErrUnknownTicket,
			want:    state{FirstUnsettled: "1", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "settle negative part",
			run: func(t *testing.T, w *Watermark) error {
				tk := mustDeliver(t, w, "1", 3)
				_, _, err := w.Settle(tk.Part(-1))
				return err
			},
			wantErr: ErrUnknownTicket,
			want:    state{FirstUnsettled: "1", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "end with a running delivery",
			run: func(t *testing.T, w *Watermark) error {
				mustSettle(t, w, mustDeliver(t, w, "1", 1))
				mustDeliver(t, w, "2", 1)
				return w.End()
			},
			wantErr: ErrUnsettled,
			want:    state{Checkpoint: "1", HasCheckpoint: true, FirstUnsettled: "2", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
		{
			name: "end with a partly settled multi-part delivery",
			run: func(t *testing.T, w *Watermark) error {
				tk := mustDeliver(t, w, "1", 2)
				mustSettle(t, w, tk)
				return w.End()
			},
			wantErr: ErrUnsettled,
			want:    state{FirstUnsettled: "1", HasUnsettled: true, Pending: 1, Epoch: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWatermark("shardId-000000000000")
			err := tt.run(t, w)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, snapshot(w)); diff != "" {
				t.Errorf("state after error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorMessages(t *testing.T) {
	w := NewWatermark("shardId-000000000003")
	mustDeliver(t, w, "10", 1)
	_, err := w.Deliver("9", 1)
	if got, want := err.Error(), "settle: sequence number not after the previous delivery: shard shardId-000000000003, sequence number 9 after 10"; got != want {
		t.Errorf("out-of-order error = %q, want %q", got, want)
	}
	_, err = w.Deliver(strings.Repeat("7", 1000), 1)
	if got := err.Error(); len(got) > 250 || !strings.HasPrefix(got, "settle: invalid sequence number: shard shardId-000000000003") {
		t.Errorf("invalid sequence error = %q, want a clipped message", got)
	}
	err = w.End()
	if got, want := err.Error(), "settle: deliveries still unsettled: shard shardId-000000000003, 1 pending from sequence number 10"; got != want {
		t.Errorf("End error = %q, want %q", got, want)
	}
}

// settleResult is what one Settle returned.
type settleResult struct {
	Checkpoint string
	Moved      bool
}

// TestSettleOrder delivers seqs (with parts), settles (delivery, part) pairs
// in the given order and checks each Settle result.
func TestSettleOrder(t *testing.T) {
	type pp struct{ d, part int }
	tests := []struct {
		name  string
		reset string
		seqs  []string
		parts []int // nil means all 1
		order []pp
		want  []settleResult
	}{
		{
			name:  "in order",
			seqs:  []string{"1", "2", "3"},
			order: []pp{{0, 0}, {1, 0}, {2, 0}},
			want:  []settleResult{{"1", true}, {"2", true}, {"3", true}},
		},
		{
			name:  "reverse order moves only at the end",
			seqs:  []string{"1", "2", "3"},
			order: []pp{{2, 0}, {1, 0}, {0, 0}},
			want:  []settleResult{{"", false}, {"", false}, {"3", true}},
		},
		{
			name:  "gap holds the checkpoint",
			seqs:  []string{"8", "9", "10", "11"},
			order: []pp{{0, 0}, {2, 0}, {3, 0}, {1, 0}},
			want:  []settleResult{{"8", true}, {"8", false}, {"8", false}, {"11", true}},
		},
		{
			name:  "reset position is the checkpoint until the first delivery settles",
			reset: "99",
			seqs:  []string{"100", "101"},
			order: []pp{{1, 0}, {0, 0}},
			want:  []settleResult{{"99", false}, {"101", true}},
		},
		{
			name:  "multi-part delivery settles on its last part",
			seqs:  []string{"1", "2"},
			parts: []int{3, 1},
			order: []pp{{1, 0}, {0, 2}, {0, 0}, {0, 1}},
			want:  []settleResult{{"", false}, {"", false}, {"", false}, {"2", true}},
		},
		{
			name:  "multi-part delivery across bitset words",
			seqs:  []string{"5", "6"},
			parts: []int{1, 130},
			order: func() []pp {
				o := []pp{{0, 0}}
				for i := 129; i >= 0; i-- {
					o = append(o, pp{1, i})
				}
				return o
			}(),
			want: func() []settleResult {
				r := []settleResult{{"5", true}}
				for range 129 {
					r = append(r, settleResult{"5", false})
				}
				return append(r, settleResult{"6", true})
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWatermark("shardId-000000000000")
			if tt.reset != "" {
				w.Reset(tt.reset)
			}
			var tickets []Ticket
			for i, seq := range tt.seqs {
				parts := 1
				if tt.parts != nil {
					parts = tt.parts[i]
				}
				tickets = append(tickets, mustDeliver(t, w, seq, parts))
			}
			var got []settleResult
			for _, o := range tt.order {
				cp, moved, err := w.Settle(tickets[o.d].Part(o.part))
				if err != nil {
					t.Fatalf("Settle(delivery %d part %d): %v", o.d, o.part, err)
				}
				got = append(got, settleResult{cp, moved})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Settle results (-want +got):\n%s", diff)
			}
			if w.Pending() != 0 {
				t.Errorf("Pending() = %d after settling everything, want 0", w.Pending())
			}
		})
	}
}

func TestEnd(t *testing.T) {
	w := NewWatermark("shardId-000000000000")
	if err := w.End(); err != nil {
		t.Fatalf("End on an empty Watermark: %v", err)
	}
	if err := w.End(); err != nil {
		t.Fatalf("second End: %v", err)
	}
	if !w.Ended() {
		t.Fatal("Ended() = false after End")
	}
	ep := w.Reset("41")
	if ep != 2 || w.Ended() {
		t.Fatalf("after Reset: epoch %d, Ended() %v; want 2, false", ep, w.Ended())
	}
	tk := mustDeliver(t, w, "42", 1)
	if err := w.End(); !errors.Is(err, ErrUnsettled) {
		t.Fatalf("End with one pending = %v, want ErrUnsettled", err)
	}
	mustSettle(t, w, tk)
	if err := w.End(); err != nil {
		t.Fatalf("End after settling: %v", err)
	}
	want := state{Checkpoint: "42", HasCheckpoint: true, Ended: true, Epoch: 2}
	if diff := cmp.Diff(want, snapshot(w)); diff != "" {
		t.Errorf("state after End (-want +got):\n%s", diff)
	}
}

func TestReset(t *testing.T) {
	w := NewWatermark("shardId-000000000000")
	old := mustDeliver(t, w, "1000", 2)
	mustDeliver(t, w, "1001", 1)
	if ep := w.Reset("500"); ep != 2 {
		t.Fatalf("Reset returned epoch %d, want 2", ep)
	}
	if old.Epoch() != 1 {
		t.Errorf("old ticket Epoch() = %d, want 1", old.Epoch())
	}
	// Seeking back: deliveries smaller than the previous epoch's are accepted.
	tk := mustDeliver(t, w, "501", 1)
	if tk.Epoch() != 2 {
		t.Errorf("new ticket Epoch() = %d, want 2", tk.Epoch())
	}
	for _, tc := range []struct {
		part int
		want error
	}{{0, ErrStale}, {1, ErrStale}, {2, ErrStale}, {-1, ErrUnknownTicket}} {
		if _, _, err := w.Settle(old.Part(tc.part)); !errors.Is(err, tc.want) {
			t.Errorf("Settle(old part %d) = %v, want %v", tc.part, err, tc.want)
		}
	}
	want := state{Checkpoint: "500", HasCheckpoint: true, FirstUnsettled: "501", HasUnsettled: true, Pending: 1, Epoch: 2}
	if diff := cmp.Diff(want, snapshot(w)); diff != "" {
		t.Errorf("state after stale settlements (-want +got):\n%s", diff)
	}
	// Reset("") forgets the checkpoint too.
	w.Reset("")
	want = state{Epoch: 3}
	if diff := cmp.Diff(want, snapshot(w)); diff != "" {
		t.Errorf("state after Reset(\"\") (-want +got):\n%s", diff)
	}
	mustDeliver(t, w, "0", 1)
}

func TestResetPanicsOnInvalidPosition(t *testing.T) {
	for _, from := range []string{"x", "007", strings.Repeat("1", 130)} {
		t.Run(from[:min(len(from), 10)], func(t *testing.T) {
			w := NewWatermark("shardId-000000000000")
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.HasPrefix(msg, "settle: Reset with invalid sequence number") {
					t.Errorf("panic value = %v, want a settle: Reset panic", r)
				}
				if w.Epoch() != 1 {
					t.Errorf("Epoch() = %d after a refused Reset, want 1", w.Epoch())
				}
			}()
			w.Reset(from)
		})
	}
}

func TestTicketComparable(t *testing.T) {
	w := NewWatermark("shardId-000000000000")
	a := mustDeliver(t, w, "1", 2)
	b := mustDeliver(t, w, "2", 1)
	seen := map[Ticket]bool{a: true, a.Part(1): true, b: true}
	if len(seen) != 3 {
		t.Errorf("3 distinct tickets made a map of %d", len(seen))
	}
	if a.Part(1).Part(0) != a {
		t.Error("a.Part(1).Part(0) != a")
	}
	if (Ticket{}).Epoch() != 0 {
		t.Error("zero Ticket has a non-zero epoch")
	}
}

// TestMemoryBounded runs a long-lived shard with a sliding window of
// in-flight deliveries, settled out of order inside the window, and checks
// that the storage stays proportional to the window, and that tickets issued
// before a compaction still settle the right delivery.
func TestMemoryBounded(t *testing.T) {
	const window = 64
	w := NewWatermark("shardId-000000000000")
	var inflight []Ticket
	var seqs []string
	maxCap := 0
	for n := range 200_000 {
		seq := itoa(uint64(n) + 1)
		inflight = append(inflight, mustDeliver(t, w, seq, 1))
		seqs = append(seqs, seq)
		if len(inflight) == window {
			// Settle all but the oldest, newest first, then the oldest.
			for i := window - 1; i >= 1; i-- {
				mustSettle(t, w, inflight[i])
			}
			cp, moved, err := w.Settle(inflight[0])
			if err != nil || !moved || cp != seqs[window-1] {
				t.Fatalf("Settle(oldest) = %q, %v, %v; want %q, true, nil", cp, moved, err, seqs[window-1])
			}
			inflight, seqs = inflight[:0], seqs[:0]
		}
		if c := cap(w.entries); c > maxCap {
			maxCap = c
		}
	}
	if maxCap > 4*window {
		t.Errorf("entries capacity grew to %d for a window of %d", maxCap, window)
	}

	// Sliding window where the oldest stays unsettled for a while: the
	// settled prefix behind the head must be dropped.
	w = NewWatermark("shardId-000000000001")
	var all []Ticket
	for n := range 100_000 {
		all = append(all, mustDeliver(t, w, itoa(uint64(n)+1), 1))
		if n >= window {
			mustSettle(t, w, all[n-window])
		}
		if len(w.entries)-w.head > window+1 || cap(w.entries) > 8*window {
			t.Fatalf("after %d deliveries: %d entries, head %d, cap %d for a window of %d",
				n+1, len(w.entries), w.head, cap(w.entries), window)
		}
	}
	// Tickets issued long before the compactions still address their delivery.
	for i := len(all) - window; i < len(all); i++ {
		mustSettle(t, w, all[i])
		if _, _, err := w.Settle(all[i]); !errors.Is(err, ErrAlreadySettled) {
			t.Fatalf("second Settle of delivery %d = %v, want ErrAlreadySettled", i, err)
		}
	}
	if cp, _ := w.Checkpoint(); cp != itoa(uint64(len(all))) {
		t.Errorf("Checkpoint() = %s, want %d", cp, len(all))
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestDeliverInEndIn: the epoch-conditional forms refuse, changing nothing,
// once a Reset started a new epoch — a superseded reader can neither
// register a record in the new epoch nor end it.
func TestDeliverInEndIn(t *testing.T) {
	w := NewWatermark("s")
	e1 := w.Epoch()
	tk, err := w.DeliverIn(e1, "10", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Settle(tk); err != nil {
		t.Fatal(err)
	}
	e2 := w.Reset("")
	if _, err := w.DeliverIn(e1, "11", 1); !errors.Is(err, ErrStale) {
		t.Errorf("DeliverIn(old epoch) = %v, want ErrStale", err)
	}
	if w.Pending() != 0 || w.Span() != 0 {
		t.Errorf("a refused delivery changed the watermark: pending %d span %d", w.Pending(), w.Span())
	}
	if err := w.EndIn(e1); !errors.Is(err, ErrStale) || w.Ended() {
		t.Errorf("EndIn(old epoch) = %v, ended %v; want ErrStale and not ended", err, w.Ended())
	}
	if _, err := w.DeliverIn(e2, "5", 1); err != nil {
		t.Errorf("DeliverIn(current epoch) = %v", err)
	}
	if err := w.EndIn(e2); !errors.Is(err, ErrUnsettled) {
		t.Errorf("EndIn with a delivery pending = %v, want ErrUnsettled", err)
	}
}

// TestSpan counts the deliveries the checkpoint has not passed, settled or
// not.
func TestSpan(t *testing.T) {
	w := NewWatermark("s")
	var ts []Ticket
	for i := range 5 {
		tk, err := w.Deliver(strconv.Itoa(10+i), 1)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tk)
	}
	for _, i := range []int{1, 2, 4} {
		if _, _, err := w.Settle(ts[i]); err != nil {
			t.Fatal(err)
		}
	}
	if w.Span() != 5 {
		t.Errorf("span %d, want 5 (the first is unsettled)", w.Span())
	}
	if _, _, err := w.Settle(ts[0]); err != nil {
		t.Fatal(err)
	}
	if w.Span() != 2 || w.Pending() != 1 {
		t.Errorf("span %d pending %d, want 2 and 1", w.Span(), w.Pending())
	}
}

// TestSettleAtParts: the Position follows the settled prefix of the parts
// of the oldest unsettled delivery, and moves on to the checkpoint once the
// delivery settles whole.
func TestSettleAtParts(t *testing.T) {
	w := NewWatermark("shardId-000000000000")
	t1, err := w.Deliver("10", 1)
	if err != nil {
		t.Fatal(err)
	}
	agg, err := w.Deliver("20", 4)
	if err != nil {
		t.Fatal(err)
	}
	t3, err := w.Deliver("30", 1)
	if err != nil {
		t.Fatal(err)
	}
	step := func(tk Ticket, want Position, wantMoved bool) {
		t.Helper()
		pos, moved, err := w.SettleAt(tk)
		if err != nil || pos != want || moved != wantMoved {
			t.Fatalf("SettleAt = %+v, %v, %v; want %+v, %v", pos, moved, err, want, wantMoved)
		}
		if got := w.Position(); got != want {
			t.Fatalf("Position() = %+v, want %+v", got, want)
		}
	}
	// Parts of a delivery that is not the oldest unsettled one: nothing moves.
	step(agg.Part(1), Position{}, false)
	step(agg.Part(0), Position{}, false)
	// The first delivery settles: the checkpoint is 10, and the aggregate's
	// parts 0 and 1 settled already.
	step(t1, Position{Seq: "20", Parts: 2}, true)
	step(agg.Part(3), Position{Seq: "20", Parts: 2}, false)
	step(t3, Position{Seq: "20", Parts: 2}, false)
	// The last part: the checkpoint passes the aggregate and 30.
	step(agg.Part(2), Position{Seq: "30"}, true)
	if _, _, err := w.SettleAt(agg.Part(2)); !errors.Is(err, ErrAlreadySettled) {
		t.Fatalf("settling a part twice: %v", err)
	}
	if cp, ok := w.Checkpoint(); !ok || cp != "30" {
		t.Fatalf("Checkpoint() = %q, %v", cp, ok)
	}
}

// TestSettleAtPrefixGrows: settling the parts of the oldest delivery in
// order moves the Position each time.
func TestSettleAtPrefixGrows(t *testing.T) {
	w := NewWatermark("s")
	tk, err := w.Deliver("5", 130)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 129 {
		pos, moved, err := w.SettleAt(tk.Part(i))
		if err != nil || !moved || pos != (Position{Seq: "5", Parts: i + 1}) {
			t.Fatalf("part %d: %+v, %v, %v", i, pos, moved, err)
		}
	}
	pos, moved, err := w.SettleAt(tk.Part(129))
	if err != nil || !moved || pos != (Position{Seq: "5"}) {
		t.Fatalf("last part: %+v, %v, %v", pos, moved, err)
	}
}

// TestDeliverEachInMatchesDeliverIn registers the same sequences one at a
// time and as a batch: the same tickets (by position), errors, count and
// state, including a refusal in the middle and a stale epoch.
func TestDeliverEachInMatchesDeliverIn(t *testing.T) {
	cases := [][]string{
		{},
		{"1", "2", "3"},
		{"5", "7", "7", "9"},       // out of order at 2
		{"10", "x", "12"},          // invalid at 1
		{"0", "01", "2"},           // leading zero at 1
		{"99", "100", "1000", "3"}, // numeric order, refused at 3
	}
	for _, seqs := range cases {
		one, batch := NewWatermark("s"), NewWatermark("s")
		var want []Ticket
		var wantErr error
		for _, s := range seqs {
			tk, err := one.DeliverIn(one.Epoch(), s, 1)
			if err != nil {
				wantErr = err
				break
			}
			want = append(want, tk)
		}
		got := make([]Ticket, len(seqs))
		n, err := batch.DeliverEachIn(batch.Epoch(), len(seqs), func(i int) string { return seqs[i] }, func(i int, tk Ticket) { got[i] = tk })
		if n != len(want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Errorf("%q: registered %d, %v; one at a time %d, %v", seqs, n, err, len(want), wantErr)
			continue
		}
		for i := range want {
			// Tickets belong to their watermark; compare what they say.
			if got[i].index != want[i].index || got[i].epoch != want[i].epoch || got[i].w != batch {
				t.Errorf("%q: ticket %d = %+v, want %+v", seqs, i, got[i], want[i])
			}
		}
		if one.Pending() != batch.Pending() || one.Span() != batch.Span() {
			t.Errorf("%q: pending/span %d/%d, one at a time %d/%d", seqs, batch.Pending(), batch.Span(), one.Pending(), one.Span())
		}
		for i := range n {
			if _, _, err := batch.Settle(got[i]); err != nil {
				t.Errorf("%q: settling ticket %d: %v", seqs, i, err)
			}
		}
	}
	w := NewWatermark("s")
	old := w.Epoch()
	w.Reset("")
	if n, err := w.DeliverEachIn(old, 1, func(int) string { return "1" }, func(int, Ticket) { t.Error("ticket for a stale delivery") }); n != 0 || !errors.Is(err, ErrStale) || w.Pending() != 0 {
		t.Errorf("stale epoch: %d, %v, pending %d", n, err, w.Pending())
	}
}

// TestDeliverEachOrderedIn registers checked sequences as a batch: the same
// tickets, state and checkpoints as one at a time; the first is checked
// against the previous delivery and the epoch, as DeliverIn checks it.
func TestDeliverEachOrderedIn(t *testing.T) {
	seqs := []string{"99", "100", "1000", "1001"}
	one, batch := NewWatermark("s"), NewWatermark("s")
	var want []Ticket
	for _, s := range seqs {
		tk, err := one.DeliverIn(one.Epoch(), s, 1)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, tk)
	}
	got := make([]Ticket, len(seqs))
	n, err := batch.DeliverEachOrderedIn(batch.Epoch(), len(seqs), func(i int) string { return seqs[i] }, func(i int, tk Ticket) { got[i] = tk })
	if n != len(seqs) || err != nil {
		t.Fatalf("registered %d, %v", n, err)
	}
	for i := range want {
		if got[i].index != want[i].index || got[i].epoch != want[i].epoch || got[i].w != batch {
			t.Errorf("ticket %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if one.Pending() != batch.Pending() || one.Span() != batch.Span() {
		t.Errorf("pending/span %d/%d, one at a time %d/%d", batch.Pending(), batch.Span(), one.Pending(), one.Span())
	}
	for i := range got {
		cp1, _, err1 := one.Settle(want[i])
		cp2, _, err2 := batch.Settle(got[i])
		if cp1 != cp2 || err1 != nil || err2 != nil {
			t.Errorf("settling %d: %q, %v; one at a time %q, %v", i, cp2, err2, cp1, err1)
		}
	}
	// The first is checked: not above the last delivery, invalid, stale.
	for _, first := range []string{"1001", "5", "x"} {
		if n, err := batch.DeliverEachOrderedIn(batch.Epoch(), 2, func(i int) string { return []string{first, "2000"}[i] }, func(int, Ticket) { t.Error("ticket for a refused delivery") }); n != 0 || err == nil {
			t.Errorf("first %q: registered %d, %v", first, n, err)
		}
	}
	old := batch.Epoch()
	batch.Reset("")
	if n, err := batch.DeliverEachOrderedIn(old, 1, func(int) string { return "1" }, func(int, Ticket) { t.Error("ticket for a stale delivery") }); n != 0 || !errors.Is(err, ErrStale) || batch.Pending() != 0 {
		t.Errorf("stale epoch: %d, %v, pending %d", n, err, batch.Pending())
	}
}

// TestTakeRoom: a sealed watermark's array goes to the next one, which
// then delivers and settles as a new one would without growing; a stale
// settlement on the old one finds it empty; a watermark that still holds
// deliveries gives nothing.
func TestTakeRoom(t *testing.T) {
	old := NewWatermark("s")
	old.Grow(100)
	var stale Ticket
	for i := range 100 {
		tk, err := old.Deliver(strconv.Itoa(i+1), 1)
		if err != nil {
			t.Fatal(err)
		}
		if i == 50 {
			stale = tk
			continue
		}
		if _, _, err := old.Settle(tk); err != nil {
			t.Fatal(err)
		}
	}
	old.Reset("") // sealed, with record 51 unsettled
	room := cap(old.entries)

	w := NewWatermark("s")
	w.TakeRoom(old)
	if cap(w.entries) != room || old.entries != nil {
		t.Fatalf("cap %d after TakeRoom (old %d, old keeps %d), want the old array", cap(w.entries), room, cap(old.entries))
	}
	for _, e := range w.entries[:cap(w.entries)] {
		if e.seq != "" || e.bits != nil {
			t.Fatalf("a taken slot holds %+v, want zero", e)
		}
	}
	if _, _, err := old.Settle(stale); err == nil {
		t.Error("a stale Settle on the sealed watermark succeeded")
	}
	for i := range 100 {
		tk, err := w.Deliver(strconv.Itoa(1000+i), 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := w.Settle(tk); err != nil {
			t.Fatal(err)
		}
	}
	if seq, _ := w.Checkpoint(); seq != "1099" || cap(w.entries) != room {
		t.Errorf("checkpoint %q, cap %d, want 1099 and %d", seq, cap(w.entries), room)
	}

	// A watermark with room of its own leaves the other's alone.
	spare := NewWatermark("s")
	spare.Grow(10)
	w.TakeRoom(spare)
	if cap(spare.entries) < 10 {
		t.Error("TakeRoom into a watermark with room took the other's array")
	}

	busy := NewWatermark("s")
	if _, err := busy.Deliver("1", 1); err != nil {
		t.Fatal(err)
	}
	fresh := NewWatermark("s")
	fresh.TakeRoom(busy)
	if cap(fresh.entries) != 0 || len(busy.entries) != 1 {
		t.Errorf("TakeRoom from a watermark holding a delivery took %d slots", cap(fresh.entries))
	}
}
