package envelope

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func FuzzDecode(f *testing.F) {
	h, payload := workedExample()
	example, err := Encode(h, payload)
	if err != nil {
		f.Fatal(err)
	}
	var many strings.Builder
	for i := range linearLimit + 4 {
		fmt.Fprintf(&many, "h%d:%d\nH%d:\n", i, i, i%5)
	}
	for _, seed := range [][]byte{
		nil,
		[]byte("RSK1"),
		[]byte("RSK1\x00\x00\x00"),
		[]byte(`{"id":1}`),
		example,
		prefixed(math.MaxUint32, "a: 1\n"),
		prefixed(math.MaxInt32, "a: 1\n"),
		prefixed(0x80000000, "a: 1\n"),
		prefixed(6, "a: 1\n"), // one past the end
		prefixed(5, "a: 1\n"), // exactly the end
		// Large inputs slow the fuzzer's minimization down; the unit tests
		// decode hostile records of 256 KiB.
		record(strings.Repeat("\n", 64), "p"),
		record(strings.Repeat(":\n", 64), "p"),
		record("::::", ""),
		record(": v\n \t: w\n", "p"),
		record("a: 1\r\nB: 2\r\nb: 3\r\n", "p"),
		record("a: x\ry\nb\rc: 1\n\ra\r:\r1\r", "p"),
		record("  a \t:  1 : 2  \nno colon\n\n", "p"),
		record("a:\u00a0x\u3000\n\u0085b: y\u2028\n", "p"),
		record("a: \xff\xfe\n\xc3: 1\n", "p"),
		record("partition-key: k\nx: 1\n", "p"),
		record("", string(record("a: 1\n", "nested"))),
		record("a: 1\n", string(record("b: 2\n", "nested"))),
		record(many.String(), "p"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, payload := Decode(data)

		// The payload is the part of data after the envelope, aliased.
		wantPayload := data
		if n, ok := envelopeBlockLen(data); ok {
			wantPayload = data[prefixLen+n:]
			// The count that sizes the header slice is an upper bound.
			if c := countCandidates(data[prefixLen : prefixLen+n]); c < len(h) {
				t.Fatalf("countCandidates = %d, but the block holds %d headers", c, len(h))
			}
		}
		if len(payload) != len(wantPayload) || !bytes.Equal(payload, wantPayload) {
			t.Fatalf("payload = %q, want %q", payload, wantPayload)
		}
		if len(payload) > 0 && &payload[0] != &data[len(data)-len(payload)] {
			t.Fatal("payload does not alias the end of data")
		}

		// The headers are what the plain transcription of ruststream reads.
		if diff := cmp.Diff(referenceDecode(data), h); diff != "" {
			t.Fatalf("Decode differs from referenceDecode (-ref +got):\n%s", diff)
		}
		checkDecoded(t, h)
		// DecodeIntoBuilder reads the same, its headers written after what
		// the builder held, which it keeps.
		var sb strings.Builder
		sb.WriteString("held")
		hb, pb := DecodeIntoBuilder(nil, data, &sb)
		if len(hb) == 0 {
			hb = nil
		}
		if diff := cmp.Diff(h, hb); diff != "" || !bytes.Equal(pb, payload) {
			t.Fatalf("DecodeIntoBuilder differs from Decode (-Decode +DecodeIntoBuilder):\n%s", diff)
		}
		if !strings.HasPrefix(sb.String(), "held") || (len(h) == 0) != (sb.Len() == len("held")) {
			t.Fatalf("DecodeIntoBuilder left the builder holding %q for %d headers", sb.String(), len(h))
		}
		// The header slice is sized from the data, not from the prefix.
		if cap(h) > len(data) {
			t.Fatalf("cap(headers) = %d for %d bytes of data", cap(h), len(data))
		}

		// Every decoded header can be encoded again, and the record read back.
		enc, err := Encode(h, payload)
		if err != nil {
			t.Fatalf("Encode of decoded headers %q: %v", h, err)
		}
		want := h.Clone()
		want.Del(PartitionKeyHeader) // travels as the record's key, not in the block
		if len(want) == 0 {
			// No envelope is written, so the record is the payload; a payload
			// that looks like an envelope itself is the format's documented
			// ambiguity, which a further Decode would not resolve.
			if !bytes.Equal(enc, payload) {
				t.Fatalf("Encode without headers = %q, want the payload %q", enc, payload)
			}
			return
		}
		h2, p2 := Decode(enc)
		if diff := cmp.Diff(want, h2); diff != "" {
			t.Fatalf("headers after a round trip (-want +got):\n%s", diff)
		}
		if !bytes.Equal(p2, payload) {
			t.Fatalf("payload after a round trip = %q, want %q", p2, payload)
		}
	})
}

// envelopeBlockLen returns the length of data's header block, and whether
// data is an envelope at all.
func envelopeBlockLen(data []byte) (int, bool) {
	if len(data) < 8 || string(data[:4]) != Magic {
		return 0, false
	}
	n := uint64(binary.BigEndian.Uint32(data[4:8]))
	if n > uint64(len(data)-8) {
		return 0, false
	}
	return int(n), true
}

// checkDecoded checks what holds for every header list Decode returns:
// unique, lower-case, trimmed names (the empty name among them) and
// trimmed values, nothing Append would refuse.
func checkDecoded(t *testing.T, h Headers) {
	t.Helper()
	seen := make(map[string]bool)
	for _, x := range h {
		if seen[x.Name] {
			t.Fatalf("name %q appears twice in %q", x.Name, h)
		}
		seen[x.Name] = true
		if x.Name != lower(x.Name) {
			t.Fatalf("name %q is not lower-case", x.Name)
		}
		if x.Name != strings.TrimSpace(x.Name) || x.Value != strings.TrimSpace(x.Value) {
			t.Fatalf("header %q: %q is not trimmed", x.Name, x.Value)
		}
		if r := refusal(x.Name, x.Value); r != "" {
			t.Fatalf("decoded header %q: %q would be refused: %s", x.Name, x.Value, r)
		}
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add("content-type", "application/json", "x-tenant", "acme", PartitionKeyHeader, "user-42", []byte(`{"id":1}`))
	f.Add("Content-Type", " padded\t", "CONTENT-TYPE", "replaced", "x", "", []byte(nil))
	f.Add("x-a", "1\n2", "b", "2", "c", "3", []byte("p"))
	f.Add("x:a", "1", "", "2", " ", "3", []byte("p"))
	f.Add(" partition-key ", "k", "Partition-Key", "skipped", "x-Ü", "\xff", []byte("RSK1\x00\x00\x00\x00"))
	f.Add(PartitionKeyHeader, "k", PartitionKeyHeader, "k2", PartitionKeyHeader, "\n", []byte("RSK1\x00\x00\x00\x04a: 1"))
	f.Add("a\rb", "1", "b", "\r", "\u00a0", "x", []byte{})
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2, n3, v3 string, payload []byte) {
		h := Headers{{n1, v1}, {n2, v2}, {n3, v3}}
		orig := h.Clone()

		dst := []byte("dst")
		got, err := Append(dst, h, payload)
		if diff := cmp.Diff(orig, h); diff != "" {
			t.Fatalf("Append changed its headers (-before +after):\n%s", diff)
		}

		// The reference: the headers that go into the block, and why one
		// must be refused.
		var block []Header
		var refused *Header
		for i := range h {
			if equalFoldASCII(h[i].Name, PartitionKeyHeader) {
				continue
			}
			if refused == nil && modelRefuses(h[i].Name, h[i].Value) {
				refused = &h[i]
			}
			block = append(block, h[i])
		}

		if refused != nil {
			var he *HeaderError
			if !errors.As(err, &he) || !errors.Is(err, ErrInvalidHeader) {
				t.Fatalf("Append(%q) error = %v, want a *HeaderError for %q", h, err, refused.Name)
			}
			if he.Name != refused.Name {
				t.Fatalf("HeaderError names %q, want the first bad header %q", he.Name, refused.Name)
			}
			if string(got) != "dst" {
				t.Fatalf("Append appended %q with its error", got[3:])
			}
			if enc, err := Encode(h, payload); enc != nil || !errors.Is(err, ErrInvalidHeader) {
				t.Fatalf("Encode = %q, %v; want nil and the error Append gave", enc, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Append(%q) = %v, want it accepted", h, err)
		}
		enc, err := Encode(h, payload)
		if err != nil {
			t.Fatalf("Encode refused what Append accepted: %v", err)
		}
		if !bytes.Equal(got, append([]byte("dst"), enc...)) {
			t.Fatalf("Append = %q, want dst then Encode's %q", got, enc)
		}
		if EncodedLen(h, payload) != len(enc) || cap(enc) != len(enc) {
			t.Fatalf("EncodedLen = %d, len = %d, cap = %d; want all equal", EncodedLen(h, payload), len(enc), cap(enc))
		}

		if len(block) == 0 {
			if !bytes.Equal(enc, payload) {
				t.Fatalf("Encode without headers = %q, want the payload %q", enc, payload)
			}
			return
		}
		// Decode gives back the headers, trimmed, names lower-cased, a
		// repeated name in the first one's place with the last one's value.
		var want Headers
		for _, x := range block {
			want.Set(lower(strings.TrimSpace(x.Name)), strings.TrimSpace(x.Value))
		}
		dec, p := Decode(enc)
		if diff := cmp.Diff(want, dec); diff != "" {
			t.Fatalf("Decode(Encode(%q)) (-want +got):\n%s", h, diff)
		}
		if !bytes.Equal(p, payload) {
			t.Fatalf("payload after a round trip = %q, want %q", p, payload)
		}
		// When nothing needed trimming or lowering, the encoding is the
		// canonical one: encoding the decoded headers gives the same bytes.
		again, err := Encode(dec, p)
		if err != nil {
			t.Fatalf("Encode of decoded headers %q: %v", dec, err)
		}
		if canonical(block) && !bytes.Equal(again, enc) {
			t.Fatalf("re-encoding %q = %q, want %q", dec, again, enc)
		}
	})
}

// modelRefuses says, independently of refusal, whether Append must refuse
// the header name: value.
func modelRefuses(name, value string) bool {
	blank := name != "" && strings.TrimFunc(name, func(r rune) bool { return strings.ContainsRune(" \t\v\f\r\n\u0085\u00a0", r) || isSpaceRune(r) }) == ""
	return blank || strings.ContainsAny(name, ":\n") || strings.ContainsAny(value, "\n")
}

// isSpaceRune reports the White_Space runes outside Latin-1, those
// strings.TrimSpace and Rust's str::trim remove.
func isSpaceRune(r rune) bool {
	switch r {
	case '\u1680', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000':
		return true
	}
	return '\u2000' <= r && r <= '\u200a'
}

// canonical reports whether every header is written the way Decode returns
// it: unique lower-case trimmed names, trimmed values.
func canonical(block []Header) bool {
	seen := make(map[string]bool)
	for _, x := range block {
		if seen[x.Name] || x.Name != lower(x.Name) || x.Name != strings.TrimSpace(x.Name) ||
			x.Value != strings.TrimSpace(x.Value) {
			return false
		}
		seen[x.Name] = true
	}
	return true
}
