package envelope

import (
	"iter"
	"slices"
	"strings"
)

// Header is one header line: a lower-case name and its value.
type Header struct {
	Name  string
	Value string
}

// Headers is an ordered list of headers with unique lower-case names. The
// zero value is empty and ready to use. Order is insertion order; setting a
// name that is already present replaces its value in place, so the order of
// first insertion is kept (the ruststream HeaderMap behaviour).
//
// Names are compared and lower-cased in ASCII only, as ruststream does:
// "Content-Type" and "content-type" are the same header, while a non-ASCII
// letter is kept and compared as it is.
//
// Headers is a plain slice: it is not safe for concurrent mutation, and a copy
// of a Headers value shares its backing array until one of them grows.
// Reading methods (Get, Lookup, Len, All) may run concurrently with each
// other.
type Headers []Header

// Get returns the value of the header name (matched case-insensitively), or
// "" when it is absent.
func (h Headers) Get(name string) string {
	v, _ := h.Lookup(name)
	return v
}

// Lookup returns the value of the header name (matched case-insensitively)
// and whether it is present.
func (h Headers) Lookup(name string) (string, bool) {
	if i := h.index(name); i >= 0 {
		return h[i].Value, true
	}
	return "", false
}

// Set sets the header name (lower-cased) to value. A name already present
// keeps its position and takes the new value; a new name is appended.
// Set does not validate: Encode refuses names and values it cannot frame.
func (h *Headers) Set(name, value string) {
	if i := h.index(name); i >= 0 {
		(*h)[i].Value = value
		return
	}
	*h = append(*h, Header{Name: lower(name), Value: value})
}

// Del removes the header name, keeping the order of the others. Del works in
// place: another Headers sharing the backing array sees the change.
func (h *Headers) Del(name string) {
	if i := h.index(name); i >= 0 {
		*h = slices.Delete(*h, i, i+1)
	}
}

// Len returns the number of headers.
func (h Headers) Len() int { return len(h) }

// All iterates over the headers in order as name, value pairs.
func (h Headers) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, x := range h {
			if !yield(x.Name, x.Value) {
				return
			}
		}
	}
}

// Clone returns a copy of h that shares no storage with it. The clone of a
// nil Headers is nil.
func (h Headers) Clone() Headers {
	if h == nil {
		return nil
	}
	return append(Headers(make([]Header, 0, len(h))), h...)
}

// index returns the position of the header name, compared ASCII
// case-insensitively (so a hand-built Headers with upper-case names is still
// found), or -1.
func (h Headers) index(name string) int {
	for i := range h {
		if equalFoldASCII(h[i].Name, name) {
			return i
		}
	}
	return -1
}

// equalFoldASCII reports whether a and b are equal when ASCII letters are
// folded to lower case; other bytes must match exactly.
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// lower returns s with its ASCII letters lower-cased, without allocating when
// it has none in upper case. Other bytes, including invalid UTF-8, are kept.
func lower(s string) string {
	if isLower(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		b.WriteByte(lowerByte(s[i]))
	}
	return b.String()
}

// isLower reports whether s has no ASCII upper-case letter.
func isLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
