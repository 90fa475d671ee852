package jsonscan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
)

// MaxDepth is the deepest nesting of objects and arrays Skip accepts,
// counting the top-level value as depth 1. It is the limit encoding/json
// enforces (and smithy-go's decoder too), so a decoder built on this
// package rejects the same inputs.
const MaxDepth = 10000

// SyntaxError reports malformed JSON.
type SyntaxError struct {
	// Offset is the byte offset in the input where the problem was found;
	// it equals the input's length when the input ended early.
	Offset int
	// Msg describes the problem, for example "expected ':' after object
	// key".
	Msg string
}

// Error returns "jsonscan: invalid JSON at offset N: " followed by Msg.
func (e *SyntaxError) Error() string {
	return "jsonscan: invalid JSON at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// EndOfInput reports that b ended where more was required.
func EndOfInput(b []byte) error {
	return &SyntaxError{Offset: len(b), Msg: "unexpected end of input"}
}

// ErrorAt reports msg at offset i of b, or an unexpected end of input when
// i is at or past its end.
func ErrorAt(b []byte, i int, msg string) error {
	if i >= len(b) {
		return EndOfInput(b)
	}
	return &SyntaxError{Offset: i, Msg: msg}
}

// quoteByte renders c for an error message.
func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// Kind names the JSON type of the value that starts with c ("an object",
// "a string", …), for error messages. c must start a valid value.
func Kind(c byte) string {
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

// WS returns the index of the first byte at or after i that is not JSON
// whitespace.
func WS(b []byte, i int) int {
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

// End checks that nothing but whitespace follows the top-level value,
// which ends before i.
func End(b []byte, i int) error {
	if i = WS(b, i); i < len(b) {
		return &SyntaxError{Offset: i, Msg: "unexpected " + quoteByte(b[i]) + " after top-level value"}
	}
	return nil
}

// Flags String reports about a string's raw contents.
const (
	Escaped  = 1 << iota // contains a backslash escape
	NonASCII             // contains a byte >= 0x80 (which may not be valid UTF-8)
)

// SWAR constants: one bit or one value repeated in every byte of a uint64.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// String validates the string whose opening quote is at i. It returns the
// index just past the closing quote and the Escaped and NonASCII flags of
// its contents, b[i+1:end-1].
//
// The fast path finds the closing quote with bytes.IndexByte and then
// checks, eight bytes at a time, that nothing before it is a backslash, a
// control character or non-ASCII; anything else goes to stringSlow.
func String(b []byte, i int) (end int, flags uint8, err error) {
	j := i + 1
	q := bytes.IndexByte(b[j:], '"')
	if q < 0 {
		return stringSlow(b, j)
	}
	end = j + q
	for ; j+8 <= end; j += 8 {
		w := binary.LittleEndian.Uint64(b[j:])
		s := w ^ (swarOnes * '\\')
		if ((w-swarOnes*0x20)|w|((s-swarOnes)&^s))&swarHigh != 0 {
			return stringSlow(b, j)
		}
	}
	for ; j < end; j++ {
		if c := b[j]; c < 0x20 || c == '\\' || c >= 0x80 {
			return stringSlow(b, j)
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

// stringSlow continues String from index i inside the string, where the
// contents need a closer look.
func stringSlow(b []byte, i int) (int, uint8, error) {
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
			return i, flags, EndOfInput(b)
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, flags, nil
		case c == '\\':
			flags |= Escaped
			if i+1 >= len(b) {
				return i, flags, EndOfInput(b)
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k >= len(b) {
						return k, flags, EndOfInput(b)
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
			flags |= NonASCII
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

// Number validates the number starting at i and returns the index just
// past it. A leading zero ends the number: in "01" it is "0", and the "1"
// is left to the caller, for which it cannot follow a value.
func Number(b []byte, i int) (int, error) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, EndOfInput(b)
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
			return i, ErrorAt(b, i, "expected digit after decimal point in number")
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
			return i, ErrorAt(b, i, "expected digit in exponent of number")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

// Literal checks that lit ("true", "false" or "null") starts at i and
// returns the index just past it.
func Literal(b []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) {
			return i + k, EndOfInput(b)
		}
		if b[i+k] != lit[k] {
			return i + k, &SyntaxError{Offset: i + k, Msg: "invalid literal, expected " + lit}
		}
	}
	return i + len(lit), nil
}

// IsNull reports whether the four bytes at i are null. It only looks: what
// follows them is checked by whatever reads on from i+4.
func IsNull(b []byte, i int) bool {
	return len(b)-i >= 4 && string(b[i:i+4]) == "null"
}

// ObjectStart begins the object whose '{' is at i. It returns the index of
// the first key's quote and true, or the index just past the '}' and false
// for an empty object.
func ObjectStart(b []byte, i int) (int, bool, error) {
	i = WS(b, i+1)
	if i < len(b) {
		switch b[i] {
		case '"':
			return i, true, nil
		case '}':
			return i + 1, false, nil
		}
	}
	return i, false, ErrorAt(b, i, "expected string or '}' after '{'")
}

// Colon reads the ':' after an object key that ends before i. It returns
// the index of the member's value, which is inside b.
func Colon(b []byte, i int) (int, error) {
	i = WS(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, ErrorAt(b, i, "expected ':' after object key")
	}
	if i = WS(b, i+1); i >= len(b) {
		return i, EndOfInput(b)
	}
	return i, nil
}

// ObjectNext continues an object after a member's value that ends before
// i. It returns the index of the next key's quote and true, or the index
// just past the '}' and false.
func ObjectNext(b []byte, i int) (int, bool, error) {
	i = WS(b, i)
	if i < len(b) {
		switch b[i] {
		case ',':
			i = WS(b, i+1)
			if i < len(b) && b[i] == '"' {
				return i, true, nil
			}
			return i, false, ErrorAt(b, i, "expected string after ',' in object")
		case '}':
			return i + 1, false, nil
		}
	}
	return i, false, ErrorAt(b, i, "expected ',' or '}' after object value")
}

// ArrayStart begins the array whose '[' is at i. It returns the index of
// the first element and true (the element's reader reports an input that
// ends there), or the index just past the ']' and false for an empty array.
func ArrayStart(b []byte, i int) (int, bool) {
	i = WS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, false
	}
	return i, true
}

// ArrayNext continues an array after an element that ends before i. It
// returns the index of the next element and true, or the index just past
// the ']' and false.
func ArrayNext(b []byte, i int) (int, bool, error) {
	i = WS(b, i)
	if i < len(b) {
		switch b[i] {
		case ',':
			return WS(b, i+1), true, nil
		case ']':
			return i + 1, false, nil
		}
	}
	return i, false, ErrorAt(b, i, "expected ',' or ']' after array element")
}

// Skip validates the value at i, which sits inside level containers, and
// returns the index just past it. A container nested deeper than limit
// levels in all (limit at most MaxDepth) is an error. Skip does not recurse,
// so hostile nesting cannot exhaust the stack.
func Skip(b []byte, i, level, limit int) (int, error) {
	if i >= len(b) {
		return i, EndOfInput(b)
	}
	var err error
	switch b[i] {
	case '{', '[':
		return skipContainer(b, i, level, min(limit, MaxDepth))
	case '"':
		i, _, err = String(b, i)
	case 't':
		i, err = Literal(b, i, "true")
	case 'f':
		i, err = Literal(b, i, "false")
	case 'n':
		i, err = Literal(b, i, "null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		i, err = Number(b, i)
	default:
		return i, unexpectedValue(b, i)
	}
	return i, err
}

// unexpectedValue reports a byte that cannot start a JSON value.
func unexpectedValue(b []byte, i int) error {
	if i >= len(b) {
		return EndOfInput(b)
	}
	return &SyntaxError{Offset: i, Msg: "expected value, found " + quoteByte(b[i])}
}

// skipContainer is Skip for the object or array at i. Its stack of open
// containers (a bit per level: set for an object) lives in its own frame,
// so that Skip on a scalar does not clear it.
func skipContainer(b []byte, i, level, limit int) (int, error) {
	var stack [MaxDepth/64 + 1]uint64
	depth := 0 // containers opened by this call and not yet closed
	var err error
value:
	if i >= len(b) {
		return i, EndOfInput(b)
	}
	switch b[i] {
	case '{':
		depth++
		if level+depth > limit {
			return i, tooDeep(i, limit)
		}
		stack[depth>>6] |= 1 << (depth & 63)
		i = WS(b, i+1)
		if i < len(b) && b[i] == '}' {
			i++
			depth--
			goto after
		}
		if i >= len(b) || b[i] != '"' {
			return i, ErrorAt(b, i, "expected string or '}' after '{'")
		}
		goto key
	case '[':
		depth++
		if level+depth > limit {
			return i, tooDeep(i, limit)
		}
		stack[depth>>6] &^= 1 << (depth & 63)
		i = WS(b, i+1)
		if i < len(b) && b[i] == ']' {
			i++
			depth--
			goto after
		}
		goto value
	case '"':
		if i, _, err = String(b, i); err != nil {
			return i, err
		}
	case 't':
		if i, err = Literal(b, i, "true"); err != nil {
			return i, err
		}
	case 'f':
		if i, err = Literal(b, i, "false"); err != nil {
			return i, err
		}
	case 'n':
		if i, err = Literal(b, i, "null"); err != nil {
			return i, err
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if i, err = Number(b, i); err != nil {
			return i, err
		}
	default:
		return i, unexpectedValue(b, i)
	}
after:
	if depth == 0 {
		return i, nil
	}
	i = WS(b, i)
	if i >= len(b) {
		return i, EndOfInput(b)
	}
	if stack[depth>>6]&(1<<(depth&63)) != 0 {
		switch b[i] {
		case ',':
			i = WS(b, i+1)
			if i >= len(b) || b[i] != '"' {
				return i, ErrorAt(b, i, "expected string after ',' in object")
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
		i = WS(b, i+1)
		goto value
	case ']':
		i++
		depth--
		goto after
	}
	return i, &SyntaxError{Offset: i, Msg: "expected ',' or ']' after array element"}
key:
	if i, _, err = String(b, i); err != nil {
		return i, err
	}
	i = WS(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, ErrorAt(b, i, "expected ':' after object key")
	}
	i = WS(b, i+1)
	goto value
}

// tooDeep reports nesting beyond limit.
func tooDeep(i, limit int) error {
	return &SyntaxError{Offset: i, Msg: "nesting depth exceeds " + strconv.Itoa(limit)}
}
