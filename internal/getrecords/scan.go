package getrecords

import (
	"encoding/binary"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The scanner below accepts a subset of what the SDK's JSON parser accepts
// (smithy-go's transport/http/protocol/internal/json): RFC 8259 JSON, strings
// with raw bytes that need not be valid UTF-8, escapes \" \\ \/ \b \f \n \r
// \t \uXXXX, no control characters, numbers without leading zeros. Every
// function returns the index just past what it read, or -1 when the input is
// not of that form (the caller then falls back to the SDK).

// maxDepth bounds the nesting of skipped values; deeper input falls back to
// the SDK (whose own limit is 10,000).
const maxDepth = 256

// SWAR constants: one bit or one value in every byte of a uint64.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// special reports, in the high bit of each byte, the bytes of w that end the
// plain run of a string: a quote, a backslash or a control character.
func special(w uint64) uint64 {
	q := w ^ (swarOnes * '"')
	s := w ^ (swarOnes * '\\')
	return ((q-swarOnes)&^q | (s-swarOnes)&^s | (w-swarOnes*0x20)&^w) & swarHigh
}

// ws returns the index of the first byte at or after i that is not JSON
// whitespace.
func ws(b []byte, i int) int {
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

// str validates the string whose opening quote is at i. It returns the
// index just past the closing quote and whether the string has escapes.
func str(b []byte, i int) (end int, escaped bool) {
	j := i + 1
	for {
		for j+8 <= len(b) && special(binary.LittleEndian.Uint64(b[j:])) == 0 {
			j += 8
		}
		if j >= len(b) {
			return -1, false
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, escaped
		case c == '\\':
			escaped = true
			if j+1 >= len(b) {
				return -1, false
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) || hex4(b[j+2:j+6]) < 0 {
					return -1, false
				}
				j += 6
			default:
				return -1, false
			}
		case c < 0x20:
			return -1, false
		default:
			j++
		}
	}
}

// hex4 returns the value of four hexadecimal digits, or -1.
func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendUnquoted appends the value of the contents s of a string that str
// validated, as encoding/json's unquote (and so the SDK) computes it: escapes
// resolved, UTF-16 surrogate pairs combined, a lone surrogate and every byte
// of invalid UTF-8 replaced by U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch e := s[r+1]; e {
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
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != unicode.ReplacementChar {
							r += 6
							dst = utf8.AppendRune(dst, dec)
							continue
						}
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // " \ /
				dst = append(dst, e)
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

// number validates the number at i. It returns the index just past it and
// whether it is an integer (no fraction, no exponent).
func number(b []byte, i int) (end int, integer bool) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j >= len(b) || !isDigit(b[j]):
		return -1, false
	case b[j] == '0':
		j++
		if j < len(b) && isDigit(b[j]) {
			return -1, false // leading zero
		}
	default:
		for j < len(b) && isDigit(b[j]) {
			j++
		}
	}
	integer = true
	if j < len(b) && b[j] == '.' {
		integer = false
		j++
		k := j
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		if j == k {
			return -1, false
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		integer = false
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		k := j
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		if j == k {
			return -1, false
		}
	}
	return j, integer
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// literal reads lit (true, false or null) at i.
func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// isNull reports whether the value at i is null.
func isNull(b []byte, i int) bool {
	return len(b)-i >= 4 && string(b[i:i+4]) == "null"
}

// skip validates the value at i (nested depth levels deep) and returns the
// index just past it.
func skip(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		end, _ := str(b, i)
		return end
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	case '{', '[':
		if depth >= maxDepth {
			return -1
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = ws(b, i+1)
		if i < len(b) && b[i] == closer {
			return i + 1
		}
		for {
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return -1
				}
				if i, _ = str(b, i); i < 0 {
					return -1
				}
				if i = ws(b, i); i >= len(b) || b[i] != ':' {
					return -1
				}
				i = ws(b, i+1)
			}
			if i = skip(b, i, depth+1); i < 0 {
				return -1
			}
			if i = ws(b, i); i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i = ws(b, i+1)
			case closer:
				return i + 1
			default:
				return -1
			}
		}
	default:
		end, _ := number(b, i)
		return end
	}
}
