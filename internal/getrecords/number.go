package getrecords

import (
	"math"

	"github.com/shardsettle/lambdaadapter/internal/jsonscan"
)

// epochMillis reads the number at i, an ApproximateArrivalTimestamp in
// seconds since the epoch, and returns it in whole milliseconds exactly as
// smithy-go does (ParseEpochSeconds): the number rounded to a float64, times
// 1000 rounded to 53 bits, truncated toward zero, clamped to int64. Strings
// ("NaN", "Infinity") are not accepted (they fall back).
func epochMillis(b []byte, i int) (end int, ms int64, ok bool) {
	end, err := jsonscan.Number(b, i)
	if err != nil {
		return -1, 0, false
	}
	f, ok := jsonscan.ParseFloat(b[i:end])
	if !ok {
		return -1, 0, false
	}
	p := f * 1000 // rounded to 53 bits like big.Float's Mul at precision 53
	switch {
	case p >= 0x1p63:
		ms = math.MaxInt64
	case p < -0x1p63:
		ms = math.MinInt64
	default:
		ms = int64(p)
	}
	return end, ms, true
}
