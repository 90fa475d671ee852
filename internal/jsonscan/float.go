package jsonscan

import (
	"math"
	"math/bits"
	"strconv"
)

// pow10 holds the powers of ten that a float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// ParseFloat returns the float64 nearest to num, a number Number validated,
// exactly as strconv.ParseFloat does (negative zero included), and false
// when it is out of the float64 range. Timestamps (1796321909.664,
// 1.796321909664E9) take an exact fast path that neither allocates nor calls
// strconv: a mantissa of at most 2^53 and a power of ten up to 22, one
// correctly rounded multiplication or division (Clinger). Timestamps with
// 17 to 19 significant digits (1716389453.7510002, as Lambda writes many)
// take a second one, nearest: a division checked, and corrected by an ulp
// when needed, in exact integer arithmetic. Anything else goes to
// strconv.ParseFloat.
func ParseFloat(num []byte) (float64, bool) {
	j, neg := 0, false
	if num[0] == '-' {
		j, neg = 1, true
	}
	var m uint64
	nd, exp := 0, 0 // significant digits in m; power of ten to apply
	for ; j < len(num) && isDigit(num[j]); j++ {
		if m == 0 && num[j] == '0' {
			continue // not significant
		}
		if nd == 19 {
			return slowFloat(num)
		}
		m = m*10 + uint64(num[j]-'0')
		nd++
	}
	if j < len(num) && num[j] == '.' {
		for j++; j < len(num) && isDigit(num[j]); j++ {
			exp--
			if m == 0 && num[j] == '0' {
				continue
			}
			if nd == 19 {
				return slowFloat(num)
			}
			m = m*10 + uint64(num[j]-'0')
			nd++
		}
	}
	if j < len(num) { // exponent
		j++
		eneg := false
		switch num[j] {
		case '-':
			eneg = true
			j++
		case '+':
			j++
		}
		e := 0
		for ; j < len(num); j++ {
			if e > 1000 {
				return slowFloat(num)
			}
			e = e*10 + int(num[j]-'0')
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	var f float64
	switch {
	case m == 0:
		// Zero whatever the exponent; the sign is applied below.
	case m > 1<<53 && exp < 0 && exp >= -19:
		var ok bool
		if f, ok = nearest(m, -exp); !ok {
			return slowFloat(num)
		}
	case m > 1<<53 || exp < -22 || exp > 22:
		return slowFloat(num)
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

// slowFloat is ParseFloat through strconv.
func slowFloat(num []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(num), 64)
	return f, err == nil
}

// pow10u holds the powers of ten that a uint64 holds.
var pow10u = [...]uint64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// nearest returns the float64 nearest to m / 10^k (ties to even), for
// 1 ≤ k ≤ 19 and m > 0, or false when a candidate is below 1, at least
// 2^53 or a power of two (strconv decides then).
//
// float64(m) / 1e(k) rounds twice and may be an ulp off. The candidate
// f = q·2^e (q an integer of 53 bits) is the nearest exactly when
// |m/10^k − q·2^e| ≤ 2^(e−1), with ties going to the even q; multiplied by
// 10^k·2^(1−e) that reads |m·2^(1−e) − 2q·10^k| ≤ 10^k, all integers below
// 2^128. A candidate that fails moves an ulp toward m/10^k, at most twice.
func nearest(m uint64, k int) (float64, bool) {
	p := pow10u[k]
	f := float64(m) / float64(p)
	for range 3 {
		if !(f >= 1 && f < 1<<53) {
			return 0, false
		}
		fb := math.Float64bits(f)
		q := fb&(1<<52-1) | 1<<52
		if q == 1<<52 {
			// A power of two: the float64 below it is half as far as the
			// one above, which the check below does not allow for.
			return 0, false
		}
		e := int(fb>>52) - 1075 // f = q·2^e, e ≤ 0 below 2^53
		s := uint(1 - e)        // 1 ≤ s ≤ 53 for f in [1, 2^53)
		// a = m·2^s, 128 bits.
		ahi, alo := m>>(64-s), m<<s
		// b = 2q·10^k, 128 bits (2q < 2^54).
		bhi, blo := bits.Mul64(q<<1, p)
		// d = |a − b|, up = a > b.
		var dhi, dlo uint64
		up := ahi > bhi || ahi == bhi && alo > blo
		if up {
			var c uint64
			dlo, c = bits.Sub64(alo, blo, 0)
			dhi, _ = bits.Sub64(ahi, bhi, c)
		} else {
			var c uint64
			dlo, c = bits.Sub64(blo, alo, 0)
			dhi, _ = bits.Sub64(bhi, ahi, c)
		}
		switch {
		case dhi == 0 && dlo < p, dhi == 0 && dlo == p && q&1 == 0:
			return f, true
		case up:
			f = math.Nextafter(f, math.Inf(1))
		default:
			f = math.Nextafter(f, 0)
		}
	}
	return 0, false
}
