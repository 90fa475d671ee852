package envelope

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// record returns an envelope whose length prefix states the true length of
// block.
func record(block, payload string) []byte {
	return prefixed(uint32(len(block)), block+payload)
}

// prefixed returns Magic, the length prefix n (whatever the rest holds) and
// rest.
func prefixed(n uint32, rest string) []byte {
	b := binary.BigEndian.AppendUint32([]byte(Magic), n)
	return append(b, rest...)
}

// workedExample is the record of the package documentation.
func workedExample() (Headers, []byte) {
	var h Headers
	h.Set("content-type", "application/json")
	h.Set("x-tenant", "acme")
	h.Set(PartitionKeyHeader, "user-42")
	return h, []byte(`{"id":1}`)
}

func TestEncodeWorkedExample(t *testing.T) {
	h, payload := workedExample()
	want := mustHex(t, "52534b310000002e")
	want = append(want, "content-type: application/json\nx-tenant: acme\n"...)
	want = append(want, `{"id":1}`...)

	got, err := Encode(h, payload)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if len(got) != 62 {
		t.Errorf("len(Encode) = %d, want 62", len(got))
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Encode =\n%s\nwant\n%s", hex.Dump(got), hex.Dump(want))
	}
	if cap(got) != len(got) {
		t.Errorf("cap(Encode) = %d, want exactly %d", cap(got), len(got))
	}
	if n := EncodedLen(h, payload); n != 62 {
		t.Errorf("EncodedLen = %d, want 62", n)
	}

	// Append keeps what dst holds and appends the same bytes.
	dst := []byte("prefix")
	got, err = Append(dst, h, payload)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Errorf("Append = %q, want prefix then %q", got, want)
	}
}

func TestDecodeWorkedExample(t *testing.T) {
	data := mustHex(t, "52534b310000002e")
	data = append(data, "content-type: application/json\nx-tenant: acme\n{\"id\":1}"...)

	h, payload := Decode(data)
	want := Headers{{"content-type", "application/json"}, {"x-tenant", "acme"}}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("Decode headers (-want +got):\n%s", diff)
	}
	if string(payload) != `{"id":1}` {
		t.Errorf("Decode payload = %q, want %q", payload, `{"id":1}`)
	}
}

func TestEncodeWithoutEnvelope(t *testing.T) {
	payload := []byte(`{"id":1}`)
	tests := []struct {
		name string
		h    Headers
	}{
		{"nil headers", nil},
		{"empty headers", Headers{}},
		{"partition key only", Headers{{PartitionKeyHeader, "user-42"}}},
		{"partition key in upper case", Headers{{"Partition-Key", "user-42"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encode(tt.h, payload)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if !bytes.Equal(got, payload) {
				t.Errorf("Encode = %q, want the raw payload %q", got, payload)
			}
			if &got[0] == &payload[0] {
				t.Error("Encode aliases the payload, want a new slice")
			}
			if n := EncodedLen(tt.h, payload); n != len(payload) {
				t.Errorf("EncodedLen = %d, want %d", n, len(payload))
			}
			got, err = Append([]byte("x"), tt.h, payload)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			if want := `x{"id":1}`; string(got) != want {
				t.Errorf("Append = %q, want %q", got, want)
			}
		})
	}
}

func TestEncodeEmptyPayloadAndNothing(t *testing.T) {
	got, err := Encode(nil, nil)
	if err != nil || len(got) != 0 {
		t.Errorf("Encode(nil, nil) = %q, %v; want empty, nil", got, err)
	}
	got, err = Encode(Headers{{"a", "1"}}, nil)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if want := record("a: 1\n", ""); !bytes.Equal(got, want) {
		t.Errorf("Encode = %q, want %q", got, want)
	}
}

func TestEncodeHeaderBlock(t *testing.T) {
	tests := []struct {
		name      string
		h         Headers
		wantBlock string
	}{
		{
			name:      "upper-case names of a hand-built list are written lower-case",
			h:         Headers{{"Content-Type", "text/plain"}, {"X-TENANT", "Acme"}},
			wantBlock: "content-type: text/plain\nx-tenant: Acme\n",
		},
		{
			name:      "non-ASCII letters are kept as they are",
			h:         Headers{{"x-Ü", "Ü"}},
			wantBlock: "x-Ü: Ü\n",
		},
		{
			name:      "delivery headers are not skipped",
			h:         Headers{{ShardIDHeader, "shardId-000"}, {SequenceNumberHeader, "49"}, {RetryCountHeader, "2"}},
			wantBlock: "kinesis-shard-id: shardId-000\nkinesis-sequence-number: 49\nx-ruststream-retry-count: 2\n",
		},
		{
			name:      "partition key is skipped wherever it stands",
			h:         Headers{{"a", "1"}, {PartitionKeyHeader, "k"}, {"b", "2"}},
			wantBlock: "a: 1\nb: 2\n",
		},
		{
			name:      "values are written as they are",
			h:         Headers{{"a", "  padded\t"}, {"b", ""}, {"c", "x: y"}, {"d", "\xff\xfe"}},
			wantBlock: "a:   padded\t\nb: \nc: x: y\nd: \xff\xfe\n",
		},
		{
			name:      "repeated names are all written",
			h:         Headers{{"a", "1"}, {"A", "2"}},
			wantBlock: "a: 1\na: 2\n",
		},
		{
			name:      "names with inner spaces are accepted",
			h:         Headers{{"x a", "1"}},
			wantBlock: "x a: 1\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encode(tt.h, []byte("p"))
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if want := record(tt.wantBlock, "p"); !bytes.Equal(got, want) {
				t.Errorf("Encode = %q, want %q", got, want)
			}
			if n := EncodedLen(tt.h, []byte("p")); n != len(got) {
				t.Errorf("EncodedLen = %d, want %d", n, len(got))
			}
		})
	}
}

func TestAppendRefuses(t *testing.T) {
	tests := []struct {
		name       string
		h          Headers
		wantName   string
		wantReason string
		wantMsg    string
	}{
		{
			name:       "newline in value",
			h:          Headers{{"x-a", "1\n2"}},
			wantName:   "x-a",
			wantReason: "value contains newline",
			wantMsg:    `envelope: header "x-a" value contains newline`,
		},
		{
			name:       "newline in name",
			h:          Headers{{"x\na", "1"}},
			wantName:   "x\na",
			wantReason: "name contains newline",
			wantMsg:    `envelope: header "x\na" name contains newline`,
		},
		{
			name:       "colon in name",
			h:          Headers{{"x:a", "1"}},
			wantName:   "x:a",
			wantReason: "name contains colon",
			wantMsg:    `envelope: header "x:a" name contains colon`,
		},
		{
			name:       "blank name",
			h:          Headers{{" \t", "1"}},
			wantName:   " \t",
			wantReason: "name is blank",
			wantMsg:    `envelope: header " \t" name is blank`,
		},
		{
			name:       "a bad header after good ones",
			h:          Headers{{"a", "1"}, {"b", "2"}, {"c", "3\n"}},
			wantName:   "c",
			wantReason: "value contains newline",
			wantMsg:    `envelope: header "c" value contains newline`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]byte, 3, 256)
			copy(dst, "abc")
			got, err := Append(dst, tt.h, []byte("payload"))
			checkHeaderError(t, err, tt.wantName, tt.wantReason, tt.wantMsg)
			if string(got) != "abc" || &got[0] != &dst[0] {
				t.Errorf("Append returned %q, want dst unchanged", got)
			}
			if tail := dst[3:cap(dst)]; bytes.ContainsFunc(tail, func(r rune) bool { return r != 0 }) {
				t.Errorf("Append wrote %q into the spare capacity of dst", bytes.TrimRight(tail, "\x00"))
			}

			enc, err := Encode(tt.h, []byte("payload"))
			checkHeaderError(t, err, tt.wantName, tt.wantReason, tt.wantMsg)
			if enc != nil {
				t.Errorf("Encode returned %q with its error, want nil", enc)
			}
		})
	}
}

// The partition key is never written, so it is never refused either.
func TestAppendIgnoresBadPartitionKey(t *testing.T) {
	got, err := Encode(Headers{{PartitionKeyHeader, "a\nb"}}, []byte("p"))
	if err != nil || string(got) != "p" {
		t.Errorf("Encode = %q, %v; want %q, nil", got, err, "p")
	}
}

// A header block longer than the u32 prefix can state is refused: measured
// against a limit of 10 bytes instead of 4 GiB (Append and Encode refuse
// whatever measure refuses, TestAppendRefuses).
func TestAppendRefusesLongBlock(t *testing.T) {
	for _, c := range []struct {
		h    Headers
		want uint64
	}{
		{Headers{{"a", "12345"}}, 9},   // "a: 12345\n"
		{Headers{{"a", "123456"}}, 10}, // the limit
	} {
		if n, err := measureWithin(c.h, 10); n != c.want || err != nil {
			t.Errorf("measureWithin(%q, 10) = %d, %v; want %d, nil", c.h, n, err, c.want)
		}
	}
	long := Headers{{"a", "1"}, {"b", "2"}, {"c", "3"}} // 15 bytes
	_, err := measureWithin(long, 10)
	checkHeaderError(t, err, "", "block is longer than 4294967295 bytes",
		"envelope: header block is longer than 4294967295 bytes")
}

func checkHeaderError(t *testing.T, err error, name, reason, msg string) {
	t.Helper()
	if !errors.Is(err, ErrInvalidHeader) {
		t.Fatalf("error = %v, want one matching ErrInvalidHeader", err)
	}
	var he *HeaderError
	if !errors.As(err, &he) {
		t.Fatalf("error = %T, want *HeaderError", err)
	}
	if he.Name != name || he.Reason != reason {
		t.Errorf("HeaderError = {Name: %q, Reason: %q}, want {%q, %q}", he.Name, he.Reason, name, reason)
	}
	if err.Error() != msg {
		t.Errorf("message = %q, want %q", err.Error(), msg)
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name        string
		data        []byte
		want        Headers
		wantPayload string
	}{
		// Not an envelope: no headers, the whole data is the payload.
		{"nil", nil, nil, ""},
		{"empty", []byte{}, nil, ""},
		{"plain payload", []byte(`{"id":1}`), nil, `{"id":1}`},
		{"magic alone", []byte("RSK1"), nil, "RSK1"},
		{"seven bytes", []byte("RSK1\x00\x00\x00"), nil, "RSK1\x00\x00\x00"},
		{"wrong magic", []byte("RSK2\x00\x00\x00\x04a: 1"), nil, "RSK2\x00\x00\x00\x04a: 1"},
		{"lower-case magic", []byte("rsk1\x00\x00\x00\x04a: 1"), nil, "rsk1\x00\x00\x00\x04a: 1"},
		{"truncated block", prefixed(10, "a: 1"), nil, string(prefixed(10, "a: 1"))},
		{"prefix one past the end", prefixed(5, "a: 1"), nil, string(prefixed(5, "a: 1"))},
		{"prefix 0xFFFFFFFF", prefixed(math.MaxUint32, "a: 1\n"), nil, string(prefixed(math.MaxUint32, "a: 1\n"))},
		{"prefix 0x7FFFFFFF", prefixed(math.MaxInt32, "a: 1\n"), nil, string(prefixed(math.MaxInt32, "a: 1\n"))},

		// An envelope.
		{"zero-length block", record("", "payload"), nil, "payload"},
		{"zero-length block, empty payload", record("", ""), nil, ""},
		{"block is the whole record", record("a: 1\n", ""), Headers{{"a", "1"}}, ""},
		{"payload is not parsed", record("a: 1\n", "b: 2\n"), Headers{{"a", "1"}}, "b: 2\n"},
		{"nested envelope in payload stays payload", record("a: 1\n", string(record("b: 2\n", "p"))),
			Headers{{"a", "1"}}, string(record("b: 2\n", "p"))},
		{"last line without newline", record("a: 1\nb: 2", "p"), Headers{{"a", "1"}, {"b", "2"}}, "p"},
		{"lines without colon are ignored", record("junk\na: 1\n\n  \nmore junk\nb: 2\n", "p"),
			Headers{{"a", "1"}, {"b", "2"}}, "p"},
		{"only lines without colon", record("junk\n\n", "p"), nil, "p"},
		{"CRLF lines", record("a: 1\r\nb: 2\r\n", "p"), Headers{{"a", "1"}, {"b", "2"}}, "p"},
		{"whitespace is trimmed", record("  a \t:   1  \t\n", "p"), Headers{{"a", "1"}}, "p"},
		{"no space after colon", record("a:1\n", "p"), Headers{{"a", "1"}}, "p"},
		{"Unicode whitespace is trimmed", record("a:\u00a0x\u3000\n\u2003b : y\n", "p"),
			Headers{{"a", "x"}, {"b", "y"}}, "p"},
		{"value keeps colons after the first", record("url: http://h:80/a\na::b\n", "p"),
			Headers{{"url", "http://h:80/a"}, {"a", ":b"}}, "p"},
		{"empty value", record("a:\nb:   \n", "p"), Headers{{"a", ""}, {"b", ""}}, "p"},
		{"repeated name replaces in place", record("a: 1\nb: 2\na: 3\n", "p"),
			Headers{{"a", "3"}, {"b", "2"}}, "p"},
		{"upper-case names are lowered", record("Content-Type: x\nX-TENANT: Acme\n", "p"),
			Headers{{"content-type", "x"}, {"x-tenant", "Acme"}}, "p"},
		{"names differing in case are one header", record("Content-Type: x\nb: 1\ncontent-type: y\nCONTENT-TYPE: z\n", "p"),
			Headers{{"content-type", "z"}, {"b", "1"}}, "p"},
		{"non-ASCII letters are kept", record("X-Ü: Ü\n", "p"), Headers{{"x-Ü", "Ü"}}, "p"},
		{"invalid UTF-8 is kept", record("a: \xff\xfe\n\xc3: 1\n", "p"), Headers{{"a", "\xff\xfe"}, {"\xc3", "1"}}, "p"},
		{"partition key in the block is kept", record("partition-key: k\n", "p"), Headers{{PartitionKeyHeader, "k"}}, "p"},
		{"inner spaces in a name are kept", record("x  a: 1\n", "p"), Headers{{"x  a", "1"}}, "p"},

		// What ruststream-kinesis writes and reads, kept as it reads it.
		{"empty name", record(": v\na: 1\n", "p"), Headers{{"", "v"}, {"a", "1"}}, "p"},
		{"blank name reads as empty", record(" \t : v\n", "p"), Headers{{"", "v"}}, "p"},
		{"colons only", record("::::\n:\n", "p"), Headers{{"", ""}}, "p"},
		{"carriage return inside a value", record("a: x\ry\nb: 1\n", "p"), Headers{{"a", "x\ry"}, {"b", "1"}}, "p"},
		{"carriage return inside a name", record("a\rb: 1\n", "p"), Headers{{"a\rb", "1"}}, "p"},
		{"carriage return at the edges is whitespace", record("\ra\r:\r1\r\n", "p"), Headers{{"a", "1"}}, "p"},
		{"bare carriage returns do not split lines", record("a: 1\rb: 2\n", "p"), Headers{{"a", "1\rb: 2"}}, "p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, payload := Decode(tt.data)
			if diff := cmp.Diff(tt.want, h); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if string(payload) != tt.wantPayload {
				t.Errorf("payload = %q, want %q", payload, tt.wantPayload)
			}
			if len(payload) > 0 && &payload[0] != &tt.data[len(tt.data)-len(payload)] {
				t.Error("payload does not alias the end of data")
			}
			if diff := cmp.Diff(referenceDecode(tt.data), h); diff != "" {
				t.Errorf("Decode differs from referenceDecode (-ref +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeHeadersOutliveData(t *testing.T) {
	data := record("a: 1\nb: 2\n", "p")
	h, _ := Decode(data)
	for i := range data {
		data[i] = 'X'
	}
	if diff := cmp.Diff(Headers{{"a", "1"}, {"b", "2"}}, h); diff != "" {
		t.Errorf("headers changed with data (-want +got):\n%s", diff)
	}
}

// A block with more distinct names than linearLimit switches to a map to
// find repeats; order and replacement must not change.
func TestDecodeManyNames(t *testing.T) {
	var block strings.Builder
	var want Headers
	for i := range 3 * linearLimit {
		fmt.Fprintf(&block, "N%d: %d\n", i, i)
		want = append(want, Header{fmt.Sprintf("n%d", i), fmt.Sprint(i)})
	}
	// Repeat some early and some late names, in another case.
	for _, i := range []int{0, 5, linearLimit - 1, linearLimit, 2 * linearLimit, 3*linearLimit - 1} {
		fmt.Fprintf(&block, "n%d: again-%d\n", i, i)
		want[i].Value = fmt.Sprintf("again-%d", i)
	}
	h, payload := Decode(record(block.String(), "p"))
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if string(payload) != "p" {
		t.Errorf("payload = %q, want %q", payload, "p")
	}
}

func TestDecodeInto(t *testing.T) {
	recs := [][]byte{
		record("a: 1\nb: 2\n", "one"),
		[]byte("two"),
		record("a: 3\nA: 4\n", "three"),
	}
	backing := Headers{{"pre", "x"}}
	var parts []Headers
	var payloads []string
	for _, data := range recs {
		start := len(backing)
		var p []byte
		backing, p = DecodeInto(backing, data)
		parts = append(parts, backing[start:len(backing):len(backing)])
		payloads = append(payloads, string(p))
	}
	// A name repeated across records is not a repeat: each record's headers
	// are its own.
	want := []Headers{{{"a", "1"}, {"b", "2"}}, {}, {{"a", "4"}}}
	if diff := cmp.Diff(want, parts); diff != "" {
		t.Errorf("headers per record (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"one", "two", "three"}, payloads); diff != "" {
		t.Errorf("payloads (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Header{"pre", "x"}, backing[0]); diff != "" {
		t.Errorf("DecodeInto changed what dst held (-want +got):\n%s", diff)
	}

	// A name in dst that a record repeats is not replaced either.
	got, _ := DecodeInto(Headers{{"a", "old"}}, record("a: new\n", ""))
	if diff := cmp.Diff(Headers{{"a", "old"}, {"a", "new"}}, got); diff != "" {
		t.Errorf("DecodeInto over a dst holding the name (-want +got):\n%s", diff)
	}

	// With room in dst, DecodeInto does not reallocate it.
	dst := make(Headers, 0, 8)
	got, _ = DecodeInto(dst, record("a: 1\nb: 2\n", ""))
	if &got[0] != &dst[:1][0] {
		t.Error("DecodeInto reallocated a dst with room to spare")
	}
}

func TestDecodeIntoBuilder(t *testing.T) {
	var sb strings.Builder
	sb.Grow(64)
	first, _ := DecodeIntoBuilder(nil, record("a: 1\nb: 2\n", "one"), &sb)
	before := sb.String()
	// A raw payload and a block without header lines write nothing.
	if _, p := DecodeIntoBuilder(nil, []byte("two"), &sb); string(p) != "two" || sb.String() != before {
		t.Errorf("a raw payload wrote %q to the builder", sb.String()[len(before):])
	}
	DecodeIntoBuilder(nil, record("no colon\n", ""), &sb)
	if sb.String() != before {
		t.Errorf("a block without headers wrote %q to the builder", sb.String()[len(before):])
	}
	// The headers of many records share the builder's one allocation.
	rec := record("a: 1\nb: 2\n", "p")
	if n := testing.AllocsPerRun(100, func() {
		sb := strings.Builder{}
		sb.Grow(256)
		dst := make(Headers, 0, 16)
		for range 4 {
			dst, _ = DecodeIntoBuilder(dst, rec, &sb)
		}
	}); n > 2 {
		t.Errorf("4 records into one builder: %v allocations, want at most 2 (the builder and dst; DecodeInto makes 4 more)", n)
	}
	// What the builder held before stays, and growing it later (here
	// past its room) does not change the headers handed out.
	DecodeIntoBuilder(nil, record(strings.Repeat("x: y\n", 40), ""), &sb)
	if diff := cmp.Diff(Headers{{"a", "1"}, {"b", "2"}}, first); diff != "" || !strings.HasPrefix(sb.String(), before) {
		t.Errorf("headers after the builder grew (-want +got):\n%s", diff)
	}
}

func TestDecodeRoundTripsEncode(t *testing.T) {
	h := Headers{{"content-type", "application/json"}, {"x-tenant", "acme"}, {RetryCountHeader, "3"}}
	for _, payload := range []string{"", "p", string(record("x: y\n", "nested")), "RSK1"} {
		data, err := Encode(h, []byte(payload))
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		got, p := Decode(data)
		if diff := cmp.Diff(h, got); diff != "" {
			t.Errorf("payload %q: headers (-want +got):\n%s", payload, diff)
		}
		if string(p) != payload {
			t.Errorf("payload = %q, want %q", p, payload)
		}
	}
}

// hostileInputs are records built to make a decoder allocate or work much
// more than their size warrants.
func hostileInputs() map[string][]byte {
	const size = 256 << 10
	manyNames := func(upper bool) []byte {
		var b strings.Builder
		for i := 0; b.Len() < size; i++ {
			if upper {
				fmt.Fprintf(&b, "X%x:\n", i)
			} else {
				fmt.Fprintf(&b, "x%x:\n", i)
			}
		}
		return record(b.String(), "")
	}
	return map[string][]byte{
		"prefix 0xFFFFFFFF":        prefixed(math.MaxUint32, strings.Repeat("a: 1\n", 1000)),
		"prefix 0x7FFFFFFF":        prefixed(math.MaxInt32, strings.Repeat("a: 1\n", 1000)),
		"prefix one past the end":  prefixed(5001, strings.Repeat("a: 1\n", 1000)),
		"newlines only":            record(strings.Repeat("\n", size), ""),
		"colon lines":              record(strings.Repeat(":\n", size/2), ""),
		"colons on one line":       record(strings.Repeat(":", size), ""),
		"one name repeated":        record(strings.Repeat("a:1\n", size/4), ""),
		"upper-case name repeated": record(strings.Repeat("A:1\n", size/4), ""),
		"many names":               manyNames(false),
		"many names, then one repeated": record(string(manyNames(false)[8:8+linearLimit*5])+
			strings.Repeat("a:\n", size/3), ""),
		"many names, then colon lines": record(string(manyNames(false)[8:8+linearLimit*5])+
			strings.Repeat(":\n", size/2), ""),
		"many upper-case names": manyNames(true),
	}
}

// TestDecodeAllocationBound measures the bytes Decode allocates for hostile
// records: linear in the record's size, whatever its length prefix claims.
func TestDecodeAllocationBound(t *testing.T) {
	const (
		perByte = 40  // bytes allocated per byte of data, at most
		fixed   = 512 // plus this much per decode
		runs    = 10
	)
	for name, data := range hostileInputs() {
		t.Run(name, func(t *testing.T) {
			Decode(data) // warm up
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range runs {
				Decode(data)
			}
			runtime.ReadMemStats(&after)
			per := (after.TotalAlloc - before.TotalAlloc) / runs
			limit := uint64(perByte*len(data) + fixed)
			t.Logf("%d bytes of data: %d bytes allocated per decode (%.1f per byte)", len(data), per, float64(per)/float64(len(data)))
			if per > limit {
				t.Errorf("Decode allocated %d bytes for %d bytes of data, want at most %d", per, len(data), limit)
			}
		})
	}
}

// A length prefix that does not fit is no envelope, so Decode allocates
// nothing for it however large it claims to be.
func TestDecodeHostilePrefixAllocatesNothing(t *testing.T) {
	if race {
		t.Skip("allocation counts are not pinned under the race detector")
	}
	for _, n := range []uint32{math.MaxUint32, math.MaxInt32, 1 << 20, 6} {
		data := prefixed(n, "a: 1\n")
		if allocs := testing.AllocsPerRun(100, func() { Decode(data) }); allocs != 0 {
			t.Errorf("prefix %#x: %v allocations per Decode, want 0", n, allocs)
		}
	}
}

func TestAllocations(t *testing.T) {
	if race {
		t.Skip("allocation counts are not pinned under the race detector")
	}
	h, payload := benchHeaders()
	enveloped, err := Encode(h, payload)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	backing := make(Headers, 0, 16)
	tests := []struct {
		name string
		want float64
		f    func()
	}{
		{"Decode of a raw payload", 0, func() { Decode(payload) }},
		{"Decode of an envelope: the block string and the header slice", 2, func() { Decode(enveloped) }},
		{"DecodeInto a backing array with room: the block string", 1, func() { DecodeInto(backing, enveloped) }},
		{"Append into a buffer with room", 0, func() { _, _ = Append(buf[:0], h, payload) }},
		{"Encode: the record", 1, func() { _, _ = Encode(h, payload) }},
		{"EncodedLen", 0, func() { EncodedLen(h, payload) }},
		{"Append refusing a header: the error", 1, func() { _, _ = Append(buf[:0], Headers{{"a", "\n"}}, payload) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testing.AllocsPerRun(100, tt.f); got != tt.want {
				t.Errorf("%v allocations per run, want %v", got, tt.want)
			}
		})
	}
}

// referenceDecode is decode_envelope of ruststream-kinesis transcribed as
// plainly as possible (str::lines, split_once, trim, HeaderMap::insert), with
// this package's one documented departure: bytes are kept as they are.
func referenceDecode(data []byte) Headers {
	if len(data) < 8 || string(data[:4]) != "RSK1" {
		return nil
	}
	n := uint64(binary.BigEndian.Uint32(data[4:8]))
	if uint64(len(data)) < 8+n {
		return nil
	}
	text := string(data[8 : 8+n])
	// str::lines: split at '\n', drop one '\r' before it, no empty last line.
	lines := strings.Split(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var h Headers
	for _, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		i := strings.Index(line, ":")
		if i < 0 {
			continue
		}
		name, value := strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
		// HeaderMap::insert: ASCII lower-case key, replace in place.
		lowered := []byte(name)
		for j, c := range lowered {
			if 'A' <= c && c <= 'Z' {
				lowered[j] = c + 'a' - 'A'
			}
		}
		name = string(lowered)
		replaced := false
		for j := range h {
			if h[j].Name == name {
				h[j].Value = value
				replaced = true
				break
			}
		}
		if !replaced {
			h = append(h, Header{name, value})
		}
	}
	return h
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRustHeaderVectors: headers ruststream-kinesis writes although this
// package used to refuse them — an empty name, '\r' inside a name or a
// value — as its encode_envelope frames them ("name: value\n" lines after
// RSK1 and the block's length). Decode reads them as ruststream reads them,
// Append accepts them and writes the same bytes, so copies and dead letters
// of such a record keep them.
func TestRustHeaderVectors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		vector string // hex of what ruststream-kinesis writes
		h      Headers
	}{
		// ": v\n": an empty name.
		{"empty name", "52534b3100000004" + "3a20760a" + "7061796c6f6164", Headers{{"", "v"}}},
		// "x-a: 1\r2\n": a carriage return inside a value.
		{"carriage return in a value", "52534b3100000009" + "782d613a2031 0d 320a" + "7061796c6f6164", Headers{{"x-a", "1\r2"}}},
		// "a\rb: 3\n" then ": \n": a carriage return inside a name, an empty name and value.
		{"carriage return in a name, then an empty header", "52534b310000000a" + "610d623a20330a" + "3a200a" + "7061796c6f6164", Headers{{"a\rb", "3"}, {"", ""}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vector := mustHex(t, strings.ReplaceAll(tt.vector, " ", ""))
			h, payload := Decode(vector)
			if diff := cmp.Diff(tt.h, h); diff != "" || string(payload) != "payload" {
				t.Errorf("Decode: headers (-want +got):\n%s\npayload %q", diff, payload)
			}
			if diff := cmp.Diff(referenceDecode(vector), h); diff != "" {
				t.Errorf("Decode differs from referenceDecode (-ref +got):\n%s", diff)
			}
			enc, err := Encode(h, payload)
			if err != nil {
				t.Fatalf("Encode of the decoded headers: %v", err)
			}
			if !bytes.Equal(enc, vector) {
				t.Errorf("Encode wrote %x, want ruststream's %x", enc, vector)
			}
		})
	}
}
