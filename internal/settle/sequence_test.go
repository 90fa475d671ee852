package settle

import (
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCompareSequence(t *testing.T) {
	s56 := "49590338271490256608559692538361571095921575989136588898"
	s57 := "1" + strings.Repeat("0", 56)
	max129 := strings.Repeat("9", 129)
	max129m1 := strings.Repeat("9", 128) + "8"
	min129 := "1" + strings.Repeat("0", 128)
	tests := []struct {
		name string
		a, b string
		want int
	}{
		{"equal single digit", "7", "7", 0},
		{"zero equal", "0", "0", 0},
		{"zero less than one", "0", "1", -1},
		{"9 less than 10", "9", "10", -1},
		{"10 greater than 9", "10", "9", +1},
		{"99 less than 100", "99", "100", -1},
		{"same length bytewise", "123", "124", -1},
		{"same length bytewise greater", "200", "199", +1},
		{"56 digits equal", s56, s56, 0},
		{"56 digits differ in last digit", s56, s56[:55] + "9", -1},
		{"56 digits differ in first digit", "5" + s56[1:], s56, +1},
		{"56 digits less than 57 digits", strings.Repeat("9", 56), s57, -1},
		{"57 digits greater than 56 digits", s57, s56, +1},
		{"129 digits equal", max129, max129, 0},
		{"129 digits max vs max-1", max129, max129m1, +1},
		{"128 digits less than 129 digits", strings.Repeat("9", 128), min129, -1},
		{"129 digits min vs 56", min129, s56, +1},
		{"leading zeros ignored equal", "007", "7", 0},
		{"leading zeros ignored less", "0009", "10", -1},
		{"leading zeros ignored greater", "00010", "9", +1},
		{"all zeros equal zero", "000", "0", 0},
		{"longer than 129 digits still numeric", "1" + strings.Repeat("0", 200), max129, +1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CompareSequence(tt.a, tt.b); got != tt.want {
				t.Errorf("CompareSequence(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := CompareSequence(tt.b, tt.a); got != -tt.want {
				t.Errorf("CompareSequence(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
			}
		})
	}
}

func TestValidSequence(t *testing.T) {
	tests := []struct {
		name string
		s    string
		want bool
	}{
		{"empty", "", false},
		{"zero", "0", true},
		{"one digit", "7", true},
		{"56 digits", "49590338271490256608559692538361571095921575989136588898", true},
		{"129 digits", "1" + strings.Repeat("0", 128), true},
		{"130 digits", "1" + strings.Repeat("0", 129), false},
		{"leading zero", "07", false},
		{"double zero", "00", false},
		{"sign", "-1", false},
		{"plus", "+1", false},
		{"space", " 1", false},
		{"trailing space", "1 ", false},
		{"letter", "12a", false},
		{"decimal point", "1.0", false},
		{"non-ASCII digit", "1٣", false},
		{"NUL byte", "1\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidSequence(tt.s); got != tt.want {
				t.Errorf("ValidSequence(%q) = %v, want %v", tt.s, got, tt.want)
			}
		})
	}
}

// randomDigits returns a random digit string of 1..140 digits that often
// shares a prefix with prefix and sometimes has leading zeros.
func randomDigits(r *rand.Rand, prefix string) string {
	var b strings.Builder
	switch r.IntN(4) {
	case 0:
		b.WriteString(strings.Repeat("0", r.IntN(4)))
	case 1:
		if prefix != "" {
			b.WriteString(prefix[:r.IntN(len(prefix)+1)])
		}
	}
	n := 1 + r.IntN(140)
	if r.IntN(2) == 0 {
		n = 1 + r.IntN(3)
	}
	for range n {
		b.WriteByte(byte('0' + r.IntN(10)))
	}
	return b.String()
}

func bigCompare(t testing.TB, a, b string) int {
	t.Helper()
	x, ok := new(big.Int).SetString(a, 10)
	if !ok {
		t.Fatalf("math/big cannot parse %q", a)
	}
	y, ok := new(big.Int).SetString(b, 10)
	if !ok {
		t.Fatalf("math/big cannot parse %q", b)
	}
	return x.Cmp(y)
}

func TestCompareSequenceMatchesBig(t *testing.T) {
	const seed = 20240611
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range 100_000 {
		a := randomDigits(r, "")
		b := randomDigits(r, a)
		if got, want := CompareSequence(a, b), bigCompare(t, a, b); got != want {
			t.Fatalf("seed %d, case %d: CompareSequence(%q, %q) = %d, math/big says %d", seed, i, a, b, got, want)
		}
	}
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func FuzzCompareSequence(f *testing.F) {
	f.Add("9", "10")
	f.Add("0", "0")
	f.Add("007", "7")
	f.Add("49590338271490256608559692538361571095921575989136588898", "495903382714902566085596925383615710959215759891365888981")
	f.Add(strings.Repeat("9", 129), "1"+strings.Repeat("0", 128))
	f.Add("", "0")
	f.Add("12a", "12b")
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, ba := CompareSequence(a, b), CompareSequence(b, a)
		if ab < -1 || ab > 1 {
			t.Fatalf("CompareSequence(%q, %q) = %d, want -1, 0 or +1", a, b, ab)
		}
		if ab != -ba {
			t.Fatalf("not antisymmetric: CompareSequence(%q, %q) = %d, reversed = %d", a, b, ab, ba)
		}
		if c := CompareSequence(a, a); c != 0 {
			t.Fatalf("CompareSequence(%q, %[1]q) = %d, want 0", a, c)
		}
		if isDigits(a) && isDigits(b) {
			if want := bigCompare(t, a, b); ab != want {
				t.Fatalf("CompareSequence(%q, %q) = %d, math/big says %d", a, b, ab, want)
			}
		}
		if ValidSequence(a) && ValidSequence(b) && (ab == 0) != (a == b) {
			t.Fatalf("valid sequences %q and %q: CompareSequence = %d but string equality is %v", a, b, ab, a == b)
		}
	})
}
