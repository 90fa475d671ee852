package jsonscan

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// valid reports whether b is one JSON value, as Skip and End see it, with
// its syntax error otherwise.
func valid(b []byte) error {
	end, err := Skip(b, WS(b, 0), 0, MaxDepth)
	if err != nil {
		return err
	}
	return End(b, end)
}

// checkValid checks valid(in) against json.Valid, and that an error names
// an offset inside the input (or its end).
func checkValid(t *testing.T, in []byte) {
	t.Helper()
	err := valid(in)
	if want := json.Valid(in); (err == nil) != want {
		t.Fatalf("valid(%q) = %v; json.Valid = %v", in, err, want)
	}
	if err == nil {
		return
	}
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("valid(%q): error %v is not a *SyntaxError", in, err)
	}
	if se.Offset < 0 || se.Offset > len(in) || se.Msg == "" {
		t.Fatalf("valid(%q): error %+v", in, *se)
	}
}

// validCorpus holds well-formed and malformed JSON texts around every
// token the scanner reads; the tests and the fuzz seeds share it.
var validCorpus = []string{
	``, ` `, `null`, `true`, `false`, `nul`, `tru`, `fals`, `nulll`, `True`,
	`0`, `-0`, `01`, `-01`, `1.5`, `1.`, `.5`, `-`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e-07`, `+1`, `0x10`,
	`""`, `"a"`, `"a`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00G9"`, `"\u00e"`, `"\x"`, "\"a\tb\"", "\"\x7f\"",
	"\"\xff\xfe\"", "\"é\"", `"\ud800"`, `"\ud800\udc00"`, `"01234567\"89abcdef"`, `"0123456789abcdef\`,
	`{}`, `{ }`, `{"a":1}`, `{"a" : 1 , "b" : [ ] }`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a"}`, `{"a":}`, `{1:2}`, `{"a":1`, `{`,
	`[]`, `[ ]`, `[1,2]`, `[1,]`, `[,1]`, `[1 2]`, `[`, `[1`, `]`, `}`,
	`{"a":[{"b":{"c":[null,true,false,"x",-1.5e3]}}]}`, `{"a":[{"b":{"c":[null,true,false,"x",-1.5e3]}]}`,
	`1 2`, `{} {}`, "\t\n\r {} \t\n\r", `{}x`, "{}\x00",
	strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	strings.Repeat(`{"a":`, MaxDepth-1) + "[]" + strings.Repeat("}", MaxDepth-1),
}

// TestSkipMatchesEncodingJSON checks that Skip plus End accept exactly what
// json.Valid accepts.
func TestSkipMatchesEncodingJSON(t *testing.T) {
	for _, in := range validCorpus {
		checkValid(t, []byte(in))
	}
}

// FuzzSkip checks Skip plus End against json.Valid on arbitrary input.
func FuzzSkip(f *testing.F) {
	for _, in := range validCorpus {
		if len(in) < 1000 {
			f.Add([]byte(in))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkValid(t, in)
	})
}

// TestSyntaxErrors pins the offsets and messages the decoders report (the
// event package's errors carry them unchanged).
func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		in     string
		offset int
		msg    string
	}{
		{``, 0, "unexpected end of input"},
		{`[1,]`, 3, "expected value, found ']'"},
		{`{"a":1,}`, 7, "expected string after ',' in object"},
		{`{"a" 1}`, 5, "expected ':' after object key"},
		{`{"a":1 "b":2}`, 7, "expected ',' or '}' after object value"},
		{`[1 2]`, 3, "expected ',' or ']' after array element"},
		{`{1:2}`, 1, "expected string or '}' after '{'"},
		{`"a\qb"`, 2, `invalid escape sequence \q in string`},
		{`"\u12G4"`, 5, `invalid \u escape in string: 'G' is not a hex digit`},
		{"\"a\nb\"", 2, "invalid control character 0x0a in string"},
		{`"abc`, 4, "unexpected end of input"},
		{`01`, 1, "unexpected '1' after top-level value"},
		{`1.`, 2, "unexpected end of input"},
		{`1.x`, 2, "expected digit after decimal point in number"},
		{`1ex`, 2, "expected digit in exponent of number"},
		{`-x`, 1, "expected digit in number, found 'x'"},
		{`nul`, 3, "unexpected end of input"},
		{`nulx`, 3, "invalid literal, expected null"},
		{"\x01", 0, "expected value, found byte 0x01"},
		{`{} x`, 3, "unexpected 'x' after top-level value"},
		{strings.Repeat("[", MaxDepth+1), MaxDepth, "nesting depth exceeds 10000"},
	}
	for _, tt := range tests {
		err := valid([]byte(tt.in))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != tt.offset || se.Msg != tt.msg {
			t.Errorf("valid(%q) = %v; want offset %d: %s", tt.in, err, tt.offset, tt.msg)
		}
	}
	if got, want := (&SyntaxError{Offset: 7, Msg: "m"}).Error(), "jsonscan: invalid JSON at offset 7: m"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestSkipDepth checks the nesting limit: a value inside level containers
// may open limit-level more, and the error names the first one too many.
func TestSkipDepth(t *testing.T) {
	for _, tc := range []struct{ level, limit int }{{0, 1}, {0, 256}, {1, 256}, {3, 256}, {1, MaxDepth}, {0, MaxDepth + 5}} {
		room := min(tc.limit, MaxDepth) - tc.level
		for _, open := range []string{"[", `{"k":`} {
			closer := map[string]string{"[": "]", `{"k":`: "}"}[open]
			in := strings.Repeat(open, room) + "0" + strings.Repeat(closer, room)
			if end, err := Skip([]byte(in), 0, tc.level, tc.limit); err != nil || end != len(in) {
				t.Errorf("level %d, limit %d, %d × %s: (%d, %v), want (%d, nil)", tc.level, tc.limit, room, open, end, err, len(in))
			}
			in = strings.Repeat(open, room+1) + "0" + strings.Repeat(closer, room+1)
			_, err := Skip([]byte(in), 0, tc.level, tc.limit)
			var se *SyntaxError
			want := "nesting depth exceeds " + strconv.Itoa(min(tc.limit, MaxDepth))
			if !errors.As(err, &se) || se.Msg != want || se.Offset != room*len(open) {
				t.Errorf("level %d, limit %d, %d × %s: %v, want %q at %d", tc.level, tc.limit, room+1, open, err, want, room*len(open))
			}
		}
	}
}

// TestNumberLeadingZero checks that a leading zero ends a number, leaving
// the next digit to the caller.
func TestNumberLeadingZero(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "01": 1, "-01": 2, "0.5": 3, "10": 2, "0e1": 3} {
		if end, err := Number([]byte(in), 0); err != nil || end != want {
			t.Errorf("Number(%q) = (%d, %v), want (%d, nil)", in, end, err, want)
		}
	}
}

// TestTokens walks objects and arrays with the token functions, as the
// decoders do.
func TestTokens(t *testing.T) {
	b := []byte(` { "a" : [ 1 , "x" ] , "b" : { } } `)
	i, more, err := ObjectStart(b, 1)
	if err != nil || !more || i != 3 {
		t.Fatalf("ObjectStart = (%d, %v, %v)", i, more, err)
	}
	end, _, _ := String(b, i)
	if i, err = Colon(b, end); err != nil || b[i] != '[' {
		t.Fatalf("Colon = (%d, %v)", i, err)
	}
	i, more = ArrayStart(b, i)
	if !more || b[i] != '1' {
		t.Fatalf("ArrayStart = (%d, %v)", i, more)
	}
	i, _ = Number(b, i)
	if i, more, err = ArrayNext(b, i); err != nil || !more || b[i] != '"' {
		t.Fatalf("ArrayNext = (%d, %v, %v)", i, more, err)
	}
	i, _, _ = String(b, i)
	if i, more, err = ArrayNext(b, i); err != nil || more || b[i] != ' ' {
		t.Fatalf("ArrayNext at the end = (%d, %v, %v)", i, more, err)
	}
	if i, more, err = ObjectNext(b, i); err != nil || !more || b[i] != '"' {
		t.Fatalf("ObjectNext = (%d, %v, %v)", i, more, err)
	}
	end, _, _ = String(b, i)
	i, _ = Colon(b, end)
	if j, more, err := ObjectStart(b, i); err != nil || more || b[j-1] != '}' {
		t.Fatalf("ObjectStart of {} = (%d, %v, %v)", j, more, err)
	}
	if _, more := ArrayStart([]byte("[ ]"), 0); more {
		t.Fatal("ArrayStart of [ ] has elements")
	}
	if _, err := Colon([]byte(`"a":`), 3); err == nil {
		t.Fatal("Colon accepts a member without a value")
	}
	if !IsNull([]byte(`[null]`), 1) || IsNull([]byte(`[nul]`), 1) || IsNull([]byte(`nul`), 0) {
		t.Fatal("IsNull")
	}
}

// stringCorpus holds string contents (without quotes) for String and
// AppendUnquoted: plain, escaped, non-ASCII, invalid UTF-8, surrogates, and
// lengths around the eight-byte words.
var stringCorpus = []string{
	``, `a`, `abcdefg`, `abcdefgh`, `abcdefghi`, `abcdefghijklmnopq`, `\"`, `\\`, `\/`, `\b\f\n\r\t`,
	`\u0041`, `\u00e9`, `\u20AC`, `\ud83d\ude00`, `\ud83d`, `\ude00`, `\ud83d\u0041`, `\ud83dx`, `\ud83d\ud83d\ude00`,
	"é", "日本語", "\xff", "\xc3", "\xed\xa0\x80", "abcdefg\xff", "abcdefgh\\n", `0123456789abcdef\u00e9`, "\x7f",
}

// checkString checks String on in, whose first byte is a quote, against
// encoding/json: the same strings are valid, the flags describe the raw
// contents, and AppendUnquoted yields json.Unmarshal's value.
func checkString(t *testing.T, in []byte) {
	t.Helper()
	end, flags, err := String(in, 0)
	if err != nil {
		if end < 0 || end > len(in) {
			t.Fatalf("String(%q): error %v at index %d", in, err, end)
		}
		if json.Valid(in) {
			t.Fatalf("String(%q): %v, but encoding/json accepts it", in, err)
		}
		return
	}
	tok := in[:end]
	var want string
	if err := json.Unmarshal(tok, &want); err != nil {
		t.Fatalf("String(%q) accepts %q, which encoding/json rejects: %v", in, tok, err)
	}
	raw := tok[1 : len(tok)-1]
	var wantFlags uint8
	if strings.Contains(string(raw), `\`) {
		wantFlags |= Escaped
	}
	for _, c := range raw {
		if c >= 0x80 {
			wantFlags |= NonASCII
			break
		}
	}
	if flags != wantFlags {
		t.Fatalf("String(%q): flags %b, want %b", in, flags, wantFlags)
	}
	if got := string(AppendUnquoted([]byte("x"), raw)); got != "x"+want {
		t.Fatalf("AppendUnquoted(%q) = %q, want %q", raw, got[1:], want)
	}
	if n := len(AppendUnquoted(nil, raw)); n > 3*len(raw) {
		t.Fatalf("AppendUnquoted(%q): %d bytes, more than three times %d", raw, n, len(raw))
	}
}

// TestString runs checkString on the corpus, each string complete,
// followed by more input, and cut short.
func TestString(t *testing.T) {
	for _, s := range stringCorpus {
		q := `"` + s + `"`
		for _, in := range []string{q, q + `,"next"`, q[:len(q)-1], "\"" + s + "\x01\""} {
			checkString(t, []byte(in))
		}
	}
}

// FuzzString checks String and AppendUnquoted against encoding/json on
// arbitrary input after an opening quote.
func FuzzString(f *testing.F) {
	for _, s := range stringCorpus {
		f.Add([]byte(s + `"`))
	}
	f.Fuzz(func(t *testing.T, rest []byte) {
		checkString(t, append([]byte{'"'}, rest...))
	})
}

// floatCorpus holds numbers for ParseFloat: timestamps, the edges of its
// fast path, and values strconv must round.
var floatCorpus = []string{"0", "1", "-1", "1796321909.664", "1.796321909664E9", "1.796321909664e+9", "179632190966400e-5",
	"1545084650.987", "9007199254740993", "9007199254740993.5", "0.1", "0.30000000000000004", "123456789012345678901234567890", "1e22", "1e23",
	"1e-22", "1e-23", "4.9e-324", "2.2250738585072014e-308", "1.7976931348623157e308", "0.000000000000000000000000001",
	"1796321909.6640000000000000000001", "-0", "-0.0", "0e99999", "-0e-5", "1e-99999", "1e400", "-1e400", "1e99999999999999999999",
	// 17 to 19 significant digits: nearest's checked division.
	"1716389453.7510002", "1767323045.7180002", "1767323045.7299998", "1716389453.751000213", "9007199254.740993",
	"9007199254740993.5", "9007199254740992.5", "9007199254740994.5", "4503599627370497.5", "1.0000000000000001",
	"1.00000000000000011102230246251565404", "1.0000000000000001110", "1.0000000000000001111", "9999999999999999.999",
	"0.99999999999999999", "0.9999999999999999", "1.9999999999999999", "2.0000000000000001", "1073741823.9999999999", "0.12345678901234567", "123456789012345678.9", "1844674407370955161.5", "-1716389453.7510002"}

// checkParseFloat checks ParseFloat on the number num against
// strconv.ParseFloat, to the bit (the sign of zero included).
func checkParseFloat(t *testing.T, num []byte) {
	t.Helper()
	want, err := strconv.ParseFloat(string(num), 64)
	got, ok := ParseFloat(num)
	if ok != (err == nil) || ok && math.Float64bits(got) != math.Float64bits(want) {
		t.Fatalf("ParseFloat(%s) = %v, %v; strconv: %v, %v", num, got, ok, want, err)
	}
}

// TestParseFloat checks ParseFloat against strconv on the corpus.
func TestParseFloat(t *testing.T) {
	for _, s := range floatCorpus {
		checkParseFloat(t, []byte(s))
	}
}

// TestParseFloatLongMantissas checks ParseFloat against strconv on numbers
// of 17 to 19 significant digits around timestamps, the values nearest
// handles, and on the midpoints between neighbouring float64s, where a
// double rounding would go wrong.
func TestParseFloatLongMantissas(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 2))
	for range 200_000 {
		digits := 17 + rng.IntN(3)
		intDigits := 1 + rng.IntN(digits-1)
		b := []byte(strconv.FormatUint(1+rng.Uint64N(9), 10))
		for len(b) < digits {
			b = append(b, byte('0'+rng.IntN(10)))
		}
		num := append(append(append([]byte{}, b[:intDigits]...), '.'), b[intDigits:]...)
		checkParseFloat(t, num)
	}
	for range 100_000 {
		// The exact midpoint of two neighbouring float64s near a timestamp:
		// q·2^-22 + 2^-23 has 23 fraction digits; cut it to 19 significant
		// digits and nudge the last one.
		f := 1.7e9 + rng.Float64()*1e8
		mid := new(big.Float).SetPrec(200).SetFloat64(f)
		mid.Add(mid, new(big.Float).SetPrec(200).SetFloat64(math.Nextafter(f, math.Inf(1))))
		mid.Quo(mid, big.NewFloat(2))
		s := mid.Text('f', 9) // 10 integer digits + 9 = 19 significant
		for _, d := range []int{-1, 0, 1} {
			n, _ := strconv.ParseUint(strings.Replace(s, ".", "", 1), 10, 64)
			v := strconv.FormatUint(uint64(int64(n)+int64(d)), 10)
			checkParseFloat(t, []byte(v[:10]+"."+v[10:]))
		}
	}
}

// FuzzParseFloat checks ParseFloat against strconv on every input that is
// one JSON number.
func FuzzParseFloat(f *testing.F) {
	for _, s := range floatCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if end, err := Number(in, 0); err != nil || end != len(in) {
			return
		}
		checkParseFloat(t, in)
	})
}

// TestAllocs pins the scanner's success paths at zero allocations.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not pinned under the race detector")
	}
	doc := []byte(`{"a":[1,-2.5e3,true,false,null,"s\u00e9\n","` + strings.Repeat("x", 100) + `"],"b":{"c":{}}}`)
	num := []byte("1796321909.664")
	str := []byte(`"k\u00e9y\ud83d\ude00"`)
	var dst []byte
	allocs := testing.AllocsPerRun(100, func() {
		if err := valid(doc); err != nil {
			t.Fatal(err)
		}
		if _, ok := ParseFloat(num); !ok {
			t.Fatal("ParseFloat")
		}
		end, _, err := String(str, 0)
		if err != nil {
			t.Fatal(err)
		}
		dst = AppendUnquoted(dst[:0], str[1:end-1])
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
}

// BenchmarkParseFloat parses timestamps as Lambda writes them: 13
// significant digits (Clinger's path) and 17 (nearest's).
func BenchmarkParseFloat(b *testing.B) {
	for _, num := range []string{"1796321909.664", "1716389453.7510002"} {
		b.Run(num, func(b *testing.B) {
			in := []byte(num)
			for b.Loop() {
				if _, ok := ParseFloat(in); !ok {
					b.Fatal("not parsed")
				}
			}
		})
	}
}
