package emf

// WithLineLimit sets the largest line, for tests of the splitting.
func WithLineLimit(n int) Option { return func(c *config) { c.limit = n } }

// LineLimit is the largest line of an Exporter by default.
const LineLimit = lineLimit

// AppendString is appendString, for the fuzz test.
var AppendString = appendString

// Encode packs scalars counters named C000… and arrays value arrays of
// values values each (named V000…) into documents of at most limit bytes.
func Encode(scalars, arrays, values, limit int) []byte {
	enc := encoder{limit: limit}
	enc.begin("test", 1700000000000)
	enc.dimensions([]string{dimService})
	enc.dimension(dimService, "svc")
	enc.member("Note", "first document only")
	for i := range scalars {
		enc.addScalar(name('C', i), unitCount, int64(i+1))
	}
	for i := range arrays {
		vals := make([]float64, values)
		for j := range vals {
			vals[j] = float64(j) + 0.5
		}
		enc.addValues(name('V', i), unitMilliseconds, vals)
	}
	enc.flush()
	return enc.out
}

func name(p byte, i int) string {
	return string([]byte{p, byte('0' + i/100), byte('0' + i/10%10), byte('0' + i%10)})
}
