package lambdaadaptertest

import (
	"testing"

	"github.com/shardsettle/lambdaadapter/internal/settle"
)

func TestSequenceNumbers(t *testing.T) {
	b := NewBatch("s")
	b.Generate(50, 3, 10, true)
	b.OnShard("shardId-000000000001").Generate(50, 3, 10, false)
	seqs := b.SequenceNumbers()
	for i, s := range seqs {
		if len(s) != 56 || !settle.ValidSequence(s) {
			t.Fatalf("sequence number %q is not 56 digits", s)
		}
		if i > 0 && i != 50 && settle.CompareSequence(seqs[i-1], s) >= 0 {
			t.Fatalf("sequence numbers do not grow: %s then %s", seqs[i-1], s)
		}
	}
	if seqs[0] == seqs[50] {
		t.Error("shards share sequence numbers")
	}
	again := NewBatch("s").Generate(50, 3, 10, true).SequenceNumbers()
	if again[49] != seqs[49] {
		t.Error("not deterministic")
	}
}

func TestAddDecimal(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    uint64
		want string
	}{{"9", 1, "10"}, {"0", 0, "0"}, {"999", 1, "1000"}, {"123", 877, "1000"}, {"1", 18446744073709551615, "18446744073709551616"}} {
		if got := addDecimal(tt.s, tt.n); got != tt.want {
			t.Errorf("addDecimal(%s, %d) = %s, want %s", tt.s, tt.n, got, tt.want)
		}
	}
}
