package base64

import (
	"bytes"
	std "encoding/base64"
	"math/rand/v2"
	"testing"
)

// check decodes src with Decode and with the standard decoder into a dst of
// dstLen bytes each (inside a larger guarded buffer) and fails on any
// difference: n, error, the bytes written, or a byte written beyond dst.
func check(t *testing.T, src []byte, dstLen int) {
	t.Helper()
	const guard = 64
	got := bytes.Repeat([]byte{0xA5}, dstLen+guard)
	want := bytes.Repeat([]byte{0xA5}, dstLen+guard)
	n, err := Decode(got[:dstLen], src)
	wn, werr := std.StdEncoding.Decode(want[:dstLen], src)
	if n != wn || (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
		t.Fatalf("Decode(%d-byte dst, %q) = %d, %v; encoding/base64: %d, %v", dstLen, src, n, err, wn, werr)
	}
	if err == nil && !bytes.Equal(got[:n], want[:n]) {
		t.Fatalf("Decode(%q) wrote %x; encoding/base64 %x", src, got[:n], want[:n])
	}
	for i := dstLen; i < len(got); i++ {
		if got[i] != 0xA5 {
			t.Fatalf("Decode(%d-byte dst, %d-byte src) wrote beyond dst at %d", dstLen, len(src), i-dstLen)
		}
	}
}

func encoded(rng *rand.Rand, n int) []byte {
	raw := make([]byte, n)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	return []byte(std.StdEncoding.EncodeToString(raw))
}

// TestDecodeLengths covers every length up to beyond a few vector blocks,
// with dst exactly DecodedLen long and exactly the decoding long.
func TestDecodeLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < 700; n++ {
		src := encoded(rng, n)
		check(t, src, DecodedLen(len(src)))
		check(t, src, n)
	}
}

// TestDecodeErrors puts a bad byte, padding, a line break or a truncation
// at every position of inputs long enough for the vector decoder: the
// error (its offset included) and what was written must be the standard
// decoder's.
func TestDecodeErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{33, 48, 96, 200} {
		base := encoded(rng, n)
		for i := range base {
			for _, b := range []byte{'!', '=', '\n', '\r', '-', '_', 0x80, ' '} {
				src := bytes.Clone(base)
				src[i] = b
				check(t, src, DecodedLen(len(src)))
			}
			check(t, base[:i], DecodedLen(i))
			withBreak := append(append(bytes.Clone(base[:i]), "\r\n"...), base[i:]...)
			check(t, withBreak, DecodedLen(len(withBreak)))
		}
	}
}

// FuzzDecode compares Decode with the standard decoder on any input, with
// dst DecodedLen long and, when the input decodes, exactly as long as its
// decoding (shorter than DecodedLen after padding: the standard decoder
// then does the work).
func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 2, 3, 34, 35, 36, 100, 512} {
		f.Add(encoded(rng, n))
	}
	f.Add([]byte("QUJD\nREVG"))
	f.Add(append(encoded(rng, 60), '='))
	f.Fuzz(func(t *testing.T, src []byte) {
		check(t, src, DecodedLen(len(src)))
		if raw, err := std.StdEncoding.DecodeString(string(src)); err == nil {
			check(t, src, len(raw))
		}
	})
}

// BenchmarkDecode is Decode against the standard decoder on one record's
// data (512 bytes, 684 in base64).
func BenchmarkDecode(b *testing.B) {
	src := encoded(rand.New(rand.NewPCG(9, 10)), 512)
	dst := make([]byte, DecodedLen(len(src)))
	b.Run("vector", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, err := Decode(dst, src); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-base64", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, err := std.StdEncoding.Decode(dst, src); err != nil {
				b.Fatal(err)
			}
		}
	})
}
