package settle

import (
	"strings"

	"github.com/shardsettle/lambdaadapter/internal/ascii"
)

// MaxSequenceDigits is the largest number of digits in a valid sequence
// number. Kinesis documents sequence numbers as decimal integers of up to 129
// digits.
const MaxSequenceDigits = 129

// ValidSequence reports whether s is a valid sequence number: 1 to
// MaxSequenceDigits ASCII digits without leading zeros ("0" itself is valid).
// This is the pattern Kinesis documents for sequence numbers,
// 0|([1-9]\d{0,128}); Kinesis never produces leading zeros and refuses them
// when a checkpoint is used as a starting position, so a Watermark refuses
// them too. ValidSequence is safe for concurrent use.
func ValidSequence(s string) bool {
	if len(s) == 0 || len(s) > MaxSequenceDigits {
		return false
	}
	if s[0] == '0' && len(s) > 1 {
		return false
	}
	return ascii.Digits(s)
}

// CompareSequence compares the decimal sequence numbers a and b as integers
// and returns -1 if a < b, 0 if a == b and +1 if a > b. Leading zeros are
// ignored, so any length works; after stripping them the shorter number is
// the smaller one and numbers of the same length compare digit by digit.
// Sequence numbers must never be compared as plain strings ("9" sorts after
// "10" as a string); use CompareSequence everywhere.
//
// For inputs that are not all ASCII digits the result is unspecified but
// still antisymmetric (CompareSequence(a, b) == -CompareSequence(b, a)) and
// CompareSequence(a, a) == 0. CompareSequence is safe for concurrent use and
// does not allocate.
func CompareSequence(a, b string) int {
	a, b = trimZeros(a), trimZeros(b)
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return +1
	}
	return strings.Compare(a, b)
}

// trimZeros strips leading zeros from s, keeping at least one character.
func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
