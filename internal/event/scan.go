package event

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the deepest nesting of objects and arrays DecodeKinesis
// accepts, counting the top-level value as depth 1. It is the limit
// encoding/json enforces, so both decoders reject the same inputs.
const maxDepth = 10000

// Flags reported by scanString about a string's raw contents.
const (
	strEscaped  = 1 << iota // contains a backslash escape
	strNonASCII             // contains a byte >= 0x80
)

// SWAR constants: one bit or one value repeated in every byte of a uint64.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// ws returns the index of the first byte at or after i that is not JSON
// whitespace.
func (d *decoder) ws(i int) int {
	b := d.buf
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// eof reports that the input ended where more was required.
func (d *decoder) eof() error {
	return &SyntaxError{Offset: len(d.buf), Msg: "unexpected end of input"}
}

// syntax reports msg at offset i, or unexpected end of input when i is past
// the end.
func (d *decoder) syntax(i int, msg string) error {
	if i >= len(d.buf) {
		return d.eof()
	}
	return &SyntaxError{Offset: i, Msg: msg}
}

// unexpectedValue reports a byte that cannot start a JSON value.
func (d *decoder) unexpectedValue(i int) error {
	if i >= len(d.buf) {
		return d.eof()
	}
	return &SyntaxError{Offset: i, Msg: "expected value, found " + quoteByte(d.buf[i])}
}

// quoteByte renders c for an error message.
func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// scanString validates the JSON string whose opening quote is at i. It
// returns the index just past the closing quote and strEscaped/strNonASCII
// flags for the contents.
//
// The fast path finds the closing quote with bytes.IndexByte and then
// checks, eight bytes at a time, that nothing before it is a backslash, a
// control character or non-ASCII; anything else goes to scanStringSlow.
func (d *decoder) scanString(i int) (int, uint8, error) {
	b := d.buf
	j := i + 1
	q := bytes.IndexByte(b[j:], '"')
	if q < 0 {
		return d.scanStringSlow(j)
	}
	end := j + q
	for ; j+8 <= end; j += 8 {
		w := binary.LittleEndian.Uint64(b[j:])
		s := w ^ (swarOnes * '\\')
		if ((w-swarOnes*0x20)|w|((s-swarOnes)&^s))&swarHigh != 0 {
			return d.scanStringSlow(j)
		}
	}
	for ; j < end; j++ {
		if c := b[j]; c < 0x20 || c == '\\' || c >= 0x80 {
			return d.scanStringSlow(j)
		}
	}
	return end + 1, 0, nil
}

// special returns a word whose lowest set bit marks the first byte of w
// (little-endian) that is '"', '\\', a control character or non-ASCII. It
// is zero when w holds none. Higher bits may be false positives.
func special(w uint64) uint64 {
	q := w ^ (swarOnes * '"')
	s := w ^ (swarOnes * '\\')
	return (((q - swarOnes) &^ q) | ((s - swarOnes) &^ s) | ((w - swarOnes*0x20) &^ w) | w) & swarHigh
}

// scanStringSlow continues scanString from index i inside the string, where
// the contents need a closer look.
func (d *decoder) scanStringSlow(i int) (int, uint8, error) {
	b := d.buf
	var flags uint8
	for {
		for i+8 <= len(b) {
			if t := special(binary.LittleEndian.Uint64(b[i:])); t != 0 {
				i += bits.TrailingZeros64(t) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			return i, flags, d.eof()
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, flags, nil
		case c == '\\':
			flags |= strEscaped
			if i+1 >= len(b) {
				return i, flags, d.eof()
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k >= len(b) {
						return k, flags, d.eof()
					}
					if !isHex(b[k]) {
						return k, flags, &SyntaxError{Offset: k, Msg: "invalid \\u escape in string: " + quoteByte(b[k]) + " is not a hex digit"}
					}
				}
				i += 6
			default:
				return i, flags, &SyntaxError{Offset: i, Msg: "invalid escape sequence \\" + string(rune(b[i+1])) + " in string"}
			}
		case c < 0x20:
			return i, flags, &SyntaxError{Offset: i, Msg: fmt.Sprintf("invalid control character 0x%02x in string", c)}
		case c >= 0x80:
			flags |= strNonASCII
			i++
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber validates the JSON number starting at i and returns the index
// just past it.
func (d *decoder) scanNumber(i int) (int, error) {
	b := d.buf
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, d.eof()
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i++
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return i, &SyntaxError{Offset: i, Msg: "expected digit in number, found " + quoteByte(b[i])}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, d.syntax(i, "expected digit after decimal point in number")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, d.syntax(i, "expected digit in exponent of number")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

// literal checks that lit ("true", "false" or "null") starts at i and
// returns the index just past it.
func (d *decoder) literal(i int, lit string) (int, error) {
	b := d.buf
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) {
			return i + k, d.eof()
		}
		if b[i+k] != lit[k] {
			return i + k, &SyntaxError{Offset: i + k, Msg: "invalid literal, expected " + lit}
		}
	}
	return i + len(lit), nil
}

// kindOf names the JSON type of the value that starts with c, for error
// messages. c must start a syntactically valid value.
func kindOf(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// skip validates the JSON value starting at i, which sits inside containers
// nested level deep, and returns the index just past it. It does not recurse,
// so hostile nesting cannot exhaust the stack.
func (d *decoder) skip(i, level int) (int, error) {
	b := d.buf
	depth := 0 // containers opened by this call and not yet closed
	var err error
value:
	if i >= len(b) {
		return i, d.eof()
	}
	switch b[i] {
	case '{':
		depth++
		if level+depth > maxDepth {
			return i, d.tooDeep(i)
		}
		d.stack[depth>>6] |= 1 << (depth & 63)
		i = d.ws(i + 1)
		if i < len(b) && b[i] == '}' {
			i++
			depth--
			goto after
		}
		if i >= len(b) || b[i] != '"' {
			return i, d.syntax(i, "expected string or '}' after '{'")
		}
		goto key
	case '[':
		depth++
		if level+depth > maxDepth {
			return i, d.tooDeep(i)
		}
		d.stack[depth>>6] &^= 1 << (depth & 63)
		i = d.ws(i + 1)
		if i < len(b) && b[i] == ']' {
			i++
			depth--
			goto after
		}
		goto value
	case '"':
		if i, _, err = d.scanString(i); err != nil {
			return i, err
		}
	case 't':
		if i, err = d.literal(i, "true"); err != nil {
			return i, err
		}
	case 'f':
		if i, err = d.literal(i, "false"); err != nil {
			return i, err
		}
	case 'n':
		if i, err = d.literal(i, "null"); err != nil {
			return i, err
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if i, err = d.scanNumber(i); err != nil {
			return i, err
		}
	default:
		return i, d.unexpectedValue(i)
	}
after:
	if depth == 0 {
		return i, nil
	}
	i = d.ws(i)
	if i >= len(b) {
		return i, d.eof()
	}
	if d.stack[depth>>6]&(1<<(depth&63)) != 0 {
		switch b[i] {
		case ',':
			i = d.ws(i + 1)
			if i >= len(b) || b[i] != '"' {
				return i, d.syntax(i, "expected string after ',' in object")
			}
			goto key
		case '}':
			i++
			depth--
			goto after
		}
		return i, &SyntaxError{Offset: i, Msg: "expected ',' or '}' after object value"}
	}
	switch b[i] {
	case ',':
		i = d.ws(i + 1)
		goto value
	case ']':
		i++
		depth--
		goto after
	}
	return i, &SyntaxError{Offset: i, Msg: "expected ',' or ']' after array element"}
key:
	if i, _, err = d.scanString(i); err != nil {
		return i, err
	}
	i = d.ws(i)
	if i >= len(b) || b[i] != ':' {
		return i, d.syntax(i, "expected ':' after object key")
	}
	i = d.ws(i + 1)
	goto value
}

// tooDeep reports nesting beyond maxDepth.
func (d *decoder) tooDeep(i int) error {
	return &SyntaxError{Offset: i, Msg: "nesting depth exceeds " + strconv.Itoa(maxDepth)}
}

// appendUnquoted appends the contents of the raw JSON string s (without its
// quotes, already validated by scanString) to dst, unescaped exactly as
// encoding/json does: invalid UTF-8 bytes and unpaired surrogate escapes
// become U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch s[r+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := hex4(s[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != utf8.RuneError {
							dst = utf8.AppendRune(dst, dec)
							r += 6
							continue
						}
					}
					rr = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, s[r+1])
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst
}

// hex4 decodes the four hex digits at the start of s (validated already).
func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// float64pow10 holds the powers of ten that are exact in a float64.
var float64pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseFloat converts a validated JSON number to the float64 that
// strconv.ParseFloat returns (correctly rounded), reporting false when it is
// out of range. Plain decimals with at most 15 digits, the shape of every
// approximateArrivalTimestamp Lambda sends, take an exact fast path that
// neither allocates nor calls strconv.
func parseFloat(b []byte) (float64, bool) {
	i, neg := 0, false
	if b[0] == '-' {
		i, neg = 1, true
	}
	var mant uint64
	nd, frac, dot := 0, 0, false
	for ; i < len(b); i++ {
		c := b[i]
		if c == '.' {
			dot = true
			continue
		}
		if c < '0' || c > '9' || nd == 15 {
			f, err := strconv.ParseFloat(string(b), 64)
			return f, err == nil
		}
		mant = mant*10 + uint64(c-'0')
		nd++
		if dot {
			frac++
		}
	}
	// mant < 1e15 < 2^53 and 10^frac are exact, so one IEEE division is
	// correctly rounded (the same exact path strconv takes).
	f := float64(mant) / float64pow10[frac]
	if neg {
		f = -f
	}
	return f, true
}
