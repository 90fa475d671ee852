package envelope

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Magic is the four bytes that open an enveloped record. A record that does
// not start with them is a raw payload without headers.
const Magic = "RSK1"

// PartitionKeyHeader is the header that carries a record's Kinesis partition
// key. It never enters the header block: Append skips it, because the key
// travels as the record's own partition key, and a receiver sets it from
// there.
const PartitionKeyHeader = "partition-key"

// SequenceNumberHeader is the delivery header a receiver sets to the
// record's Kinesis sequence number. It is not part of what a publisher
// sends; Append does not skip it, so a caller writing a copy of a delivered
// record removes it first.
const SequenceNumberHeader = "kinesis-sequence-number"

// ShardIDHeader is the delivery header a receiver sets to the ID of the
// shard the record was read from. Like SequenceNumberHeader it is not
// skipped by Append, so a caller writing a copy removes it first.
const ShardIDHeader = "kinesis-shard-id"

// SubSequenceNumberHeader is the delivery header a receiver sets, on a user
// record of a KPL aggregated record only, to the user record's index in the
// aggregate (its sub-sequence number, decimal from 0). Like
// SequenceNumberHeader it is not skipped by Append, so a caller writing a
// copy removes it first.
const SubSequenceNumberHeader = "kinesis-sub-sequence-number"

// IsDeliveryHeader reports whether name (compared without regard to ASCII
// case, as Headers compares names) is one of the delivery headers a
// receiver sets from the record itself — PartitionKeyHeader,
// SequenceNumberHeader, ShardIDHeader and SubSequenceNumberHeader — which a
// copy of a delivered record must not carry.
func IsDeliveryHeader(name string) bool {
	return equalFoldASCII(name, PartitionKeyHeader) || equalFoldASCII(name, SequenceNumberHeader) ||
		equalFoldASCII(name, ShardIDHeader) || equalFoldASCII(name, SubSequenceNumberHeader)
}

// RetryCountHeader is the header in which ruststream counts the copies of a
// delivery it has republished for a retry, as a decimal number. A record
// without it (or with a malformed value) has been republished zero times.
// This package only names it: Append writes it like any other header.
const RetryCountHeader = "x-ruststream-retry-count"

// prefixLen is the length of the magic plus the u32 block length.
const prefixLen = len(Magic) + 4

// ErrInvalidHeader is matched (with errors.Is) by every error Append and
// Encode return: a header the envelope cannot frame.
var ErrInvalidHeader = errors.New("envelope: invalid header")

// HeaderError describes a header Append refused. It matches ErrInvalidHeader
// with errors.Is.
type HeaderError struct {
	// Name is the refused header's name as given, or "" when the refusal is
	// about the whole header block.
	Name string
	// Reason says what is wrong, e.g. "value contains newline".
	Reason string
}

// Reasons a HeaderError gives.
const (
	reasonNameBlank  = "name is blank"
	reasonNameColon  = "name contains colon"
	reasonNameLF     = "name contains newline"
	reasonValueLF    = "value contains newline"
	reasonBlockLong  = "block is longer than 4294967295 bytes"
	reasonRecordLong = "block and payload are too long for this platform"
)

// Error returns the message, e.g. `envelope: header "x-a" value contains
// newline`.
func (e *HeaderError) Error() string {
	if e.Name == "" {
		return "envelope: header " + e.Reason
	}
	return "envelope: header " + strconv.Quote(e.Name) + " " + e.Reason
}

// Unwrap returns ErrInvalidHeader.
func (e *HeaderError) Unwrap() error { return ErrInvalidHeader }

// maxBlockLen is the longest header block the u32 length prefix can state.
const maxBlockLen = math.MaxUint32

// Append appends the encoded record for headers h and payload to dst and
// returns the extended slice. Headers other than PartitionKeyHeader are
// written in order as "name: value\n" lines, names lower-cased (ASCII), after
// Magic and the block's length as a big-endian u32; the payload follows. When
// h has no header other than PartitionKeyHeader, the record is the payload
// alone, without envelope. For headers Append accepts whose values are valid
// UTF-8, the output is byte for byte what ruststream-kinesis writes.
//
// Append refuses, with a *HeaderError and dst returned unchanged, what
// would break the framing or not read back as the same name: a name
// containing ':' or '\n', a value containing '\n', a name that is blank but
// not empty (whitespace only), and a header block longer than
// math.MaxUint32 bytes. It writes what ruststream-kinesis writes and reads
// back: an empty name (": value"), and '\r' inside a name or value. It does not check
// that names are unique (a decoder keeps the last value of a repeated name),
// nor does it skip the kinesis-* delivery headers. Values are written as they
// are: surrounding whitespace is accepted but trimmed by Decode, and bytes
// that are not UTF-8 are kept (ruststream would replace them with U+FFFD).
//
// Append allocates only when dst lacks the capacity; EncodedLen gives the
// size it needs. It is safe for concurrent use as long as dst is not shared.
func Append(dst []byte, h Headers, payload []byte) ([]byte, error) {
	n, err := measure(h)
	if err != nil {
		return dst, err
	}
	if n > 0 && uint64(prefixLen)+n+uint64(len(payload)) > math.MaxInt-uint64(len(dst)) {
		return dst, &HeaderError{Reason: reasonRecordLong}
	}
	return appendRecord(dst, h, int(n), payload), nil
}

// appendRecord appends the record for the valid headers h, whose block is n
// bytes long, and payload.
func appendRecord(dst []byte, h Headers, n int, payload []byte) []byte {
	if n == 0 {
		return append(dst, payload...)
	}
	dst = slices.Grow(dst, prefixLen+n+len(payload))
	dst = append(dst, Magic...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	for i := range h {
		x := &h[i]
		if isPartitionKey(x.Name) {
			continue
		}
		if isLower(x.Name) {
			dst = append(dst, x.Name...)
		} else {
			for j := 0; j < len(x.Name); j++ {
				dst = append(dst, lowerByte(x.Name[j]))
			}
		}
		dst = append(dst, ':', ' ')
		dst = append(dst, x.Value...)
		dst = append(dst, '\n')
	}
	return append(dst, payload...)
}

// Encode returns the encoded record for headers h and payload in a new slice
// of exactly EncodedLen(h, payload) bytes, allocated once. It never aliases
// payload, even when the record is the payload alone. It refuses the headers
// Append refuses, returning nil and a *HeaderError. It is safe for concurrent
// use.
func Encode(h Headers, payload []byte) ([]byte, error) {
	n, err := measure(h)
	if err != nil {
		return nil, err
	}
	size := uint64(len(payload))
	if n > 0 {
		size += uint64(prefixLen) + n
	}
	if size > math.MaxInt {
		return nil, &HeaderError{Reason: reasonRecordLong}
	}
	return appendRecord(make([]byte, 0, int(size)), h, int(n), payload), nil
}

// EncodedLen returns the size of the record Encode and Append produce for
// headers h and payload, for size checks such as Kinesis's 1 MiB record
// limit. It does not validate h: for headers Append refuses, the result is
// meaningless. It is safe for concurrent use.
func EncodedLen(h Headers, payload []byte) int {
	var n int
	for i := range h {
		if !isPartitionKey(h[i].Name) {
			n += len(h[i].Name) + len(h[i].Value) + len(": \n")
		}
	}
	if n == 0 {
		return len(payload)
	}
	return prefixLen + n + len(payload)
}

// measure validates h and returns the length of its header block.
func measure(h Headers) (uint64, error) { return measureWithin(h, maxBlockLen) }

// measureWithin is measure with a block of at most limit bytes.
func measureWithin(h Headers, limit uint64) (uint64, error) {
	var n uint64
	for i := range h {
		x := &h[i]
		if isPartitionKey(x.Name) {
			continue
		}
		if r := refusal(x.Name, x.Value); r != "" {
			return 0, &HeaderError{Name: x.Name, Reason: r}
		}
		n += uint64(len(x.Name)) + uint64(len(x.Value)) + uint64(len(": \n"))
		if n > limit {
			return 0, &HeaderError{Reason: reasonBlockLong}
		}
	}
	return n, nil
}

// refusal returns why the header name: value cannot be framed, or "".
func refusal(name, value string) string {
	switch {
	case strings.IndexByte(name, ':') >= 0:
		return reasonNameColon
	case strings.IndexByte(name, '\n') >= 0:
		return reasonNameLF
	case name != "" && strings.TrimSpace(name) == "":
		return reasonNameBlank
	case strings.IndexByte(value, '\n') >= 0:
		return reasonValueLF
	}
	return ""
}

func isPartitionKey(name string) bool {
	return equalFoldASCII(name, PartitionKeyHeader)
}

// Decode splits a record into its headers and payload. It is DecodeInto(nil,
// data), except that it returns nil Headers when the record carries none.
func Decode(data []byte) (Headers, []byte) {
	h, payload := DecodeInto(nil, data)
	if len(h) == 0 {
		h = nil
	}
	return h, payload
}

// DecodeInto splits a record into its headers and payload, appending the
// headers to dst and returning the extended slice; the record's headers are
// the returned slice from len(dst) on. This lets a caller decode many records
// into one backing array; such a caller hands each record its own part with a
// full slice expression (h[start:len(h):len(h)]) so that growing one record's
// headers cannot overwrite the next one's.
//
// Like ruststream-kinesis, DecodeInto is lenient: data shorter than 8 bytes,
// not starting with Magic, or whose length prefix points past its end has no
// headers and is the payload as a whole. Otherwise the header block is split
// into lines at '\n'; a line without ':' is ignored; the name is what comes
// before the first ':' and the value what comes after it, both trimmed of
// surrounding whitespace; names are lower-cased (ASCII); a repeated name
// replaces the earlier value in place. A line with an empty name (": v")
// is a header named "", and '\r' inside a name or value is kept, as
// ruststream reads them; every header DecodeInto returns is one Append
// accepts, so a decoded record can always be encoded again (copies and
// dead letters keep every header). One departure from ruststream, on input
// its encoder never writes: the bytes of names and values are kept as they
// are where ruststream replaces invalid UTF-8 with U+FFFD. A
// PartitionKeyHeader line in the block is kept; a receiver overrides it
// with the record's own key.
//
// The payload aliases data. The headers share one string copied from the
// header block, so they stay valid when data is reused. DecodeInto allocates
// nothing for a raw payload or a block without header lines, and otherwise
// O(len(data)) bytes whatever the length prefix says. It is safe for
// concurrent use as long as dst is not shared.
func DecodeInto(dst Headers, data []byte) (Headers, []byte) {
	return decodeInto(dst, data, nil)
}

// DecodeIntoBuilder is DecodeInto, except that the header block is written
// to sb and the headers are substrings of what sb holds instead of a string
// of their own. A strings.Builder never changes what it wrote (it copies
// when it grows), so the headers stay valid whatever is written to sb later;
// a caller that decodes many records with one builder grown ahead (sb.Grow)
// makes one allocation for all their headers instead of one for each
// record that has any. sb is written only when the record has header lines.
func DecodeIntoBuilder(dst Headers, data []byte, sb *strings.Builder) (Headers, []byte) {
	return decodeInto(dst, data, sb)
}

// decodeInto is DecodeInto, with the header block copied into sb when it
// is not nil.
func decodeInto(dst Headers, data []byte, sb *strings.Builder) (Headers, []byte) {
	if len(data) < prefixLen || string(data[:len(Magic)]) != Magic {
		return dst, data
	}
	n := uint64(binary.BigEndian.Uint32(data[len(Magic):prefixLen]))
	if n > uint64(len(data)-prefixLen) {
		return dst, data
	}
	end := prefixLen + int(n)
	block, payload := data[prefixLen:end], data[end:]
	most := countCandidates(block)
	if most == 0 {
		return dst, payload
	}
	dst = slices.Grow(dst, most)
	start := len(dst)
	var index map[string]int // name to position in dst, once there are many
	var text string
	if sb == nil {
		text = string(block)
	} else {
		at := sb.Len()
		sb.Write(block)
		text = sb.String()[at:]
	}
	for text != "" {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if index == nil {
			if i := dst[start:].index(name); i >= 0 {
				dst[start+i].Value = value
				continue
			}
			name = lower(name)
			if len(dst)-start == linearLimit {
				index = make(map[string]int, 2*linearLimit)
				for j := start; j < len(dst); j++ {
					index[dst[j].Name] = j
				}
				index[name] = len(dst)
			}
		} else {
			name = lower(name)
			if i, ok := index[name]; ok {
				dst[i].Value = value
				continue
			}
			index[name] = len(dst)
		}
		dst = append(dst, Header{Name: name, Value: value})
	}
	return dst, payload
}

// linearLimit is the number of distinct names up to which DecodeInto finds a
// repeated name by scanning; past it, a map keeps a hostile block with many
// names from costing quadratic time.
const linearLimit = 32

// countCandidates returns the number of lines of block that have a ':': an
// upper bound on the number of headers the block holds.
func countCandidates(block []byte) int {
	count := 0
	for {
		i := bytes.IndexByte(block, ':')
		if i < 0 {
			return count
		}
		count++
		j := bytes.IndexByte(block[i:], '\n')
		if j < 0 {
			return count
		}
		block = block[i+j+1:]
	}
}
