package ascii

import "testing"

// loop is the byte-at-a-time definition Digits must match.
func loop(s []byte) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// TestDigitsMatchesLoop puts every byte value at every position of strings
// of every length up to 24 around otherwise valid digits.
func TestDigitsMatchesLoop(t *testing.T) {
	for n := 0; n <= 24; n++ {
		for pos := 0; pos < max(n, 1); pos++ {
			for c := 0; c < 256; c++ {
				b := []byte("012345678901234567890123456789"[:n])
				if n > 0 {
					b[pos] = byte(c)
				}
				if got, want := Digits(b), loop(b); got != want {
					t.Fatalf("Digits(%q) = %v, want %v", b, got, want)
				}
				if got, want := Digits(string(b)), loop(b); got != want {
					t.Fatalf("Digits(string %q) = %v, want %v", b, got, want)
				}
			}
		}
	}
}

func FuzzDigits(f *testing.F) {
	f.Add([]byte("49590338271490256608559692538361571095921575989136588898"))
	f.Add([]byte("4959033827149025660855969253836157109592157598913658889/"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if Digits(b) != loop(b) || Digits(string(b)) != loop(b) {
			t.Fatalf("Digits(%q) disagrees with the loop", b)
		}
	})
}

func BenchmarkDigits(b *testing.B) {
	s := "49590338271490256608559692538361571095921575989136588898"
	for b.Loop() {
		if !Digits(s) {
			b.Fatal("not digits")
		}
	}
}
