package jsonscan

import "strconv"

// pow10 holds the powers of ten that a float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// ParseFloat returns the float64 nearest to num, a number Number validated,
// exactly as strconv.ParseFloat does (negative zero included), and false
// when it is out of the float64 range. Timestamps (1796321909.664,
// 1.796321909664E9) take an exact fast path that neither allocates nor calls
// strconv: a mantissa of at most 2^53 and a power of ten up to 22, one
// correctly rounded multiplication or division (Clinger). Anything else
// goes to strconv.ParseFloat.
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
