// Package ascii holds byte-level checks shared by the decoders and the
// watermark.
package ascii

const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

// Digits reports whether every byte of s is an ASCII digit ("" has none
// that is not), eight bytes at a time: with x = w ^ "00000000", a byte is a
// digit exactly when its x is below 10, that is when neither x nor x + 0x76
// has its high bit set (no carry crosses bytes unless a byte is already
// ≥ 0x80, which fails anyway).
func Digits[T string | []byte](s T) bool {
	for ; len(s) >= 8; s = s[8:] {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		x := w ^ (ones * '0')
		if (x|(x+ones*0x76))&high != 0 {
			return false
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// MaxStreamName is the longest stream name Kinesis accepts.
const MaxStreamName = 128

// StreamName reports whether s is a valid Kinesis stream name: 1 to
// MaxStreamName letters, digits, '_', '-' and '.' (so none of the
// characters that separate the names of a list, an ARN's parts or a lease
// key).
func StreamName(s string) bool {
	if s == "" || len(s) > MaxStreamName {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}
