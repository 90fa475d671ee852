package getrecords

import (
	"math"
	"strconv"
)

// epochMillis reads the number at i, an ApproximateArrivalTimestamp in
// seconds since the epoch, and returns it in whole milliseconds exactly as
// smithy-go does (ParseEpochSeconds): the number rounded to a float64, times
// 1000 rounded to 53 bits, truncated toward zero, clamped to int64. Strings
// ("NaN", "Infinity") are not accepted (they fall back).
func epochMillis(b []byte, i int) (end int, ms int64, ok bool) {
	end, _ = number(b, i)
	if end < 0 {
		return -1, 0, false
	}
	f, ok := parseFloat(b[i:end])
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

// pow10 holds the powers of ten that a float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat returns the float64 nearest to the valid JSON number s, as
// strconv.ParseFloat does. Timestamps (1796321909.664, 1.796321909664E9)
// take the exact fast path: a mantissa of at most 2^53 and a power of ten
// up to 22, one correctly rounded multiplication or division (Clinger).
// Anything else goes to strconv.ParseFloat, whose range errors are
// reported as not ok (the SDK fails on them too).
func parseFloat(s []byte) (float64, bool) {
	j, neg := 0, false
	if s[0] == '-' {
		j, neg = 1, true
	}
	var m uint64
	nd, exp := 0, 0 // significant digits in m; power of ten to apply
	for ; j < len(s) && isDigit(s[j]); j++ {
		if m == 0 && s[j] == '0' {
			continue // not significant
		}
		if nd == 19 {
			return slowFloat(s)
		}
		m = m*10 + uint64(s[j]-'0')
		nd++
	}
	if j < len(s) && s[j] == '.' {
		for j++; j < len(s) && isDigit(s[j]); j++ {
			exp--
			if m == 0 && s[j] == '0' {
				continue
			}
			if nd == 19 {
				return slowFloat(s)
			}
			m = m*10 + uint64(s[j]-'0')
			nd++
		}
	}
	if j < len(s) { // exponent
		j++
		eneg := false
		switch s[j] {
		case '-':
			eneg = true
			j++
		case '+':
			j++
		}
		e := 0
		for ; j < len(s); j++ {
			if e > 1000 {
				return slowFloat(s)
			}
			e = e*10 + int(s[j]-'0')
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	var f float64
	switch {
	case m == 0:
		return 0, true // the sign of zero makes no millisecond
	case m > 1<<53 || exp < -22 || exp > 22:
		return slowFloat(s)
	case exp < 0:
		f = float64(m) / pow10[-exp]
	default:
		f = float64(m) * pow10[exp]
	}
	if neg {
		f = -f
	}
	return f, true
}

func slowFloat(s []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(s), 64)
	return f, err == nil
}
