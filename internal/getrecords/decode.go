package getrecords

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/shardsettle/lambdaadapter/internal/base64"
	"github.com/shardsettle/lambdaadapter/internal/jsonscan"
)

// Decode decodes body, the JSON of a 200 GetRecords answer, into what the
// SDK's own deserializer returns for it (ResultMetadata aside). It reports
// false, and returns nil, for a body it does not accept: one the SDK rejects,
// and a few rare ones the SDK accepts (an empty body, bytes after the JSON
// object, escapes or line breaks inside a record's base64 data, a record
// with two Data members or a body with two Records lists, timestamps given
// as strings, a MillisBehindLatest of more than 18 digits, nesting deeper
// than 256 levels). The result shares no memory with body. Decode is safe for
// concurrent use.
func Decode(body []byte) (*kinesis.GetRecordsOutput, bool) {
	out, _, ok := decodeInto(body, false)
	return out, ok
}

// decode is Decode into a pooled Data, which it also returns (nil when no
// record has data): Fast's way, whose callers may release it (DataOf).
func decode(body []byte) (*kinesis.GetRecordsOutput, *Data, bool) {
	return decodeInto(body, true)
}

// decodeInto is Decode; with pooled, the records' data go into a Data from
// the pool, which it returns, else into a buffer of their own.
func decodeInto(body []byte, pooled bool) (*kinesis.GetRecordsOutput, *Data, bool) {
	if len(body) == 0 || len(body) > math.MaxInt32 {
		return nil, nil, false
	}
	d := decoders.Get().(*decoder)
	d.reset(body)
	var out *kinesis.GetRecordsOutput
	var data *Data
	if d.top() {
		out, data = d.output(pooled)
	}
	d.b = nil
	decoders.Put(d)
	return out, data, out != nil
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

// decoder holds one body's state between its two phases: top reads the
// JSON once and notes where every string and data value is (spans); output
// then allocates exactly what the answer needs and fills it.
type decoder struct {
	b   []byte
	esc []byte // values of strings with escapes; spans with esc set point here

	recs     []rec
	records  bool // Records was a list (possibly empty): the output's slice is not nil
	children []types.ChildShard
	shards   bool // ChildShards was a list
	next     span // NextShardIterator
	millis   int64
	set      uint8 // hasNext, hasMillis
}

func (d *decoder) reset(b []byte) {
	*d = decoder{b: b, esc: d.esc[:0], recs: d.recs[:0]}
}

// span is where a string's value is: b[off:end], or esc[off:end].
type span struct {
	off, end int32
	esc      bool
}

// rec is one record as read; set tells which fields it has.
type rec struct {
	seq, key, enc, data span
	millis              int64 // ApproximateArrivalTimestamp, Unix milliseconds
	set                 uint8
}

const (
	hasSeq = 1 << iota
	hasKey
	hasEnc // enc holds a value other than NONE and KMS
	hasNone
	hasKMS
	hasData
	hasTime
)

const (
	hasNext = 1 << iota
	hasMillis
)

// The decoder reads the JSON with jsonscan, which accepts a subset of what
// the SDK's JSON parser accepts (smithy-go's
// transport/http/protocol/internal/json). Every method below returns the
// index just past what it read, or -1 when the input is not of that form
// (the caller then falls back to the SDK, which reports the error).

// maxDepth bounds the nesting of skipped values; deeper input falls back to
// the SDK (whose own limit is 10,000).
const maxDepth = 256

// skip validates the value at i, nested level containers deep, and returns
// the index just past it, or -1.
func skip(b []byte, i, level int) int {
	end, err := jsonscan.Skip(b, i, level, maxDepth)
	if err != nil {
		return -1
	}
	return end
}

// top reads the body's object.
func (d *decoder) top() bool {
	b := d.b
	i := jsonscan.WS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = d.object(i, func(key []byte, i int) int {
		switch string(key) {
		case "Records":
			return d.recordList(i)
		case "NextShardIterator":
			if jsonscan.IsNull(b, i) {
				return i + 4
			}
			d.set |= hasNext
			return d.string(i, &d.next)
		case "MillisBehindLatest":
			if jsonscan.IsNull(b, i) {
				return i + 4
			}
			end, err := jsonscan.Number(b, i)
			if err != nil || bytes.IndexAny(b[i:end], ".eE") >= 0 || end-i > 18 { // not an integer of at most 18 bytes
				return -1
			}
			n, err := strconv.ParseInt(string(b[i:end]), 10, 64)
			if err != nil {
				return -1
			}
			d.millis = n
			d.set |= hasMillis
			return end
		case "ChildShards":
			return d.childShards(i)
		}
		return skip(b, i, 1)
	})
	return i >= 0 && jsonscan.End(b, i) == nil
}

// object reads the object whose '{' is at i, calling member with each key's
// value (unquoted) and the index of its value; member returns the index just
// past the value, or -1. The SDK skips members whose value is null; members
// must do the same.
func (d *decoder) object(i int, member func(key []byte, i int) int) int {
	b := d.b
	i, more, err := jsonscan.ObjectStart(b, i)
	for more {
		var end int
		var flags uint8
		if end, flags, err = jsonscan.String(b, i); err != nil {
			return -1
		}
		key := b[i+1 : end-1]
		if flags&jsonscan.Escaped != 0 { // rare: unquoted into esc, which is not given back
			k := len(d.esc)
			d.esc = jsonscan.AppendUnquoted(d.esc, key)
			key = d.esc[k:]
		}
		if i, err = jsonscan.Colon(b, end); err != nil {
			return -1
		}
		if i = member(key, i); i < 0 {
			return -1
		}
		if i, more, err = jsonscan.ObjectNext(b, i); err != nil {
			return -1
		}
	}
	if err != nil {
		return -1
	}
	return i
}

// list reads the list whose '[' is at i, calling elem with the index of
// each element; elem returns the index just past it, or -1.
func (d *decoder) list(i int, elem func(i int) int) int {
	b := d.b
	if i >= len(b) || b[i] != '[' {
		return -1
	}
	i, more := jsonscan.ArrayStart(b, i)
	for more {
		if i = elem(i); i < 0 {
			return -1
		}
		var err error
		if i, more, err = jsonscan.ArrayNext(b, i); err != nil {
			return -1
		}
	}
	return i
}

// string reads the string at i into sp.
func (d *decoder) string(i int, sp *span) int {
	b := d.b
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	end, flags, err := jsonscan.String(b, i)
	if err != nil {
		return -1
	}
	if flags&jsonscan.Escaped == 0 {
		*sp = span{off: int32(i + 1), end: int32(end - 1)}
		return end
	}
	off := len(d.esc)
	d.esc = jsonscan.AppendUnquoted(d.esc, b[i+1:end-1])
	if len(d.esc) > math.MaxInt32 {
		return -1
	}
	*sp = span{off: int32(off), end: int32(len(d.esc)), esc: true}
	return end
}

// bytes returns the bytes of sp.
func (d *decoder) bytes(sp span) []byte {
	if sp.esc {
		return d.esc[sp.off:sp.end]
	}
	return d.b[sp.off:sp.end]
}

// newString reads the string at i into a string of its own (ChildShards,
// rare).
func (d *decoder) newString(i int, s *string) int {
	var sp span
	if i = d.string(i, &sp); i >= 0 {
		*s = string(d.bytes(sp))
	}
	return i
}

// recordList reads the Records list at i. Like the SDK, a later Records
// member replaces an earlier one, and a null element is a zero Record.
func (d *decoder) recordList(i int) int {
	b := d.b
	if jsonscan.IsNull(b, i) {
		return i + 4
	}
	if d.records {
		// A second list: the SDK checks the first one's data too, which
		// output would not see.
		return -1
	}
	d.records = true
	return d.list(i, func(i int) int {
		d.recs = append(d.recs, rec{})
		if jsonscan.IsNull(b, i) {
			return i + 4
		}
		if i >= len(b) || b[i] != '{' {
			return -1
		}
		return d.record(i, &d.recs[len(d.recs)-1])
	})
}

// record reads one record's object at i into r.
func (d *decoder) record(i int, r *rec) int {
	b := d.b
	return d.object(i, func(key []byte, i int) int {
		if jsonscan.IsNull(b, i) {
			return i + 4 // the SDK skips null members
		}
		switch string(key) {
		case "SequenceNumber":
			r.set |= hasSeq
			return d.string(i, &r.seq)
		case "ApproximateArrivalTimestamp":
			end, ms, ok := epochMillis(b, i)
			if !ok {
				return -1
			}
			r.millis = ms
			r.set |= hasTime
			return end
		case "Data":
			return d.data(i, r)
		case "PartitionKey":
			r.set |= hasKey
			return d.string(i, &r.key)
		case "EncryptionType":
			end := d.string(i, &r.enc)
			if end < 0 {
				return -1
			}
			r.set &^= hasEnc | hasNone | hasKMS
			switch string(d.bytes(r.enc)) {
			case string(types.EncryptionTypeNone):
				r.set |= hasNone
			case string(types.EncryptionTypeKms):
				r.set |= hasKMS
			default:
				r.set |= hasEnc
			}
			return end
		}
		return skip(b, i, 2)
	})
}

// data notes where the base64 text of the Data string at i is: up to the
// next quote; output decodes it. A record with two Data members is not
// accepted (the SDK decodes both, and fails on either), nor, through the
// decoding, a string with an escape: the span then holds a backslash (up to
// an escaped quote, if any), which base64 rejects, and the whole answer
// falls back. The string's other checks come with the decoding too:
// standard base64 with padding admits no byte that a JSON string may not
// hold raw except CR and LF, which it skips and output rejects by the
// decoded length.
func (d *decoder) data(i int, r *rec) int {
	b := d.b
	if i >= len(b) || b[i] != '"' || r.set&hasData != 0 {
		return -1
	}
	n := bytes.IndexByte(b[i+1:], '"')
	if n < 0 {
		return -1
	}
	r.data = span{off: int32(i + 1), end: int32(i + 1 + n)}
	r.set |= hasData
	return i + 2 + n
}

// childShards reads the ChildShards list at i (rare: once per closed
// shard), straight into SDK types.
func (d *decoder) childShards(i int) int {
	b := d.b
	if jsonscan.IsNull(b, i) {
		return i + 4
	}
	d.children = make([]types.ChildShard, 0)
	d.shards = true
	return d.list(i, func(i int) int {
		d.children = append(d.children, types.ChildShard{})
		if jsonscan.IsNull(b, i) {
			return i + 4
		}
		if i >= len(b) || b[i] != '{' {
			return -1
		}
		c := &d.children[len(d.children)-1]
		return d.object(i, func(key []byte, i int) int {
			if jsonscan.IsNull(b, i) {
				return i + 4
			}
			switch string(key) {
			case "ShardId":
				c.ShardId = new(string)
				return d.newString(i, c.ShardId)
			case "ParentShards":
				c.ParentShards = make([]string, 0)
				return d.list(i, func(i int) int {
					c.ParentShards = append(c.ParentShards, "")
					if jsonscan.IsNull(b, i) {
						return i + 4
					}
					return d.newString(i, &c.ParentShards[len(c.ParentShards)-1])
				})
			case "HashKeyRange":
				if i >= len(b) || b[i] != '{' {
					return -1
				}
				h := &types.HashKeyRange{}
				c.HashKeyRange = h
				return d.object(i, func(key []byte, i int) int {
					if jsonscan.IsNull(b, i) {
						return i + 4
					}
					switch string(key) {
					case "StartingHashKey":
						h.StartingHashKey = new(string)
						return d.newString(i, h.StartingHashKey)
					case "EndingHashKey":
						h.EndingHashKey = new(string)
						return d.newString(i, h.EndingHashKey)
					}
					return skip(b, i, 4)
				})
			}
			return skip(b, i, 3)
		})
	})
}

// output builds the answer from what top read: one allocation each for the
// records, the data, the strings, the string pointers and the timestamps.
// It reports nil when a record's data is not valid base64. The data are
// decoded into a Data from the pool when pooled (nil when no record has
// data), else into a buffer of their own.
func (d *decoder) output(pooled bool) (*kinesis.GetRecordsOutput, *Data) {
	var dataLen, strLen, nptr, ntime int
	if d.set&hasNext != 0 {
		strLen += d.next.len()
		nptr++
	}
	for i := range d.recs {
		r := &d.recs[i]
		if r.set&hasData != 0 {
			n, ok := decodedLen(d.bytes(r.data))
			if !ok {
				return nil, nil
			}
			dataLen += n
		}
		if r.set&hasSeq != 0 {
			strLen += r.seq.len()
			nptr++
		}
		if r.set&hasKey != 0 {
			strLen += r.key.len()
			nptr++
		}
		if r.set&hasEnc != 0 {
			strLen += r.enc.len()
		}
		if r.set&hasTime != 0 {
			ntime++
		}
	}

	// Two bytes more than the data: each record decodes into room for
	// base64.DecodedLen bytes, which counts its padding (up to two bytes
	// beyond the data, written over by the next record's), so that
	// base64.Decode takes its vector path.
	var buf *Data
	var data []byte
	if pooled && dataLen > 0 {
		buf = newData(dataLen + 2)
		data = buf.b
	} else {
		data = make([]byte, dataLen+2) // 2 when all data are empty: a non-nil Data, as the SDK's
	}
	var sb strings.Builder
	sb.Grow(strLen)
	var strs []string
	var times []time.Time
	var recs []types.Record
	if buf != nil {
		// The released answer's slices, when large enough.
		// The next iterator gets a pointer of its own (see below).
		strs, times, recs = buf.slices(nptr-int(d.set&hasNext), ntime, len(d.recs))
	} else {
		strs = make([]string, nptr)
		times = make([]time.Time, ntime)
		if d.records {
			recs = make([]types.Record, len(d.recs))
		}
	}

	// Data first: the only step that can still fail.
	off := 0
	for i := range d.recs {
		r := &d.recs[i]
		if r.set&hasData == 0 {
			continue
		}
		src := d.bytes(r.data)
		n, _ := decodedLen(src)
		if m, err := base64.Decode(data[off:off+base64.DecodedLen(len(src))], src); err != nil || m != n {
			buf.Release()
			return nil, nil
		}
		recs[i].Data = data[off : off+n : off+n]
		off += n
	}

	// Strings: written in the order they are taken out again.
	if d.set&hasNext != 0 {
		sb.Write(d.bytes(d.next))
	}
	for i := range d.recs {
		r := &d.recs[i]
		if r.set&hasSeq != 0 {
			sb.Write(d.bytes(r.seq))
		}
		if r.set&hasKey != 0 {
			sb.Write(d.bytes(r.key))
		}
		if r.set&hasEnc != 0 {
			sb.Write(d.bytes(r.enc))
		}
	}
	all := sb.String()
	soff, p := 0, 0
	take := func(sp span) string {
		s := all[soff : soff+sp.len()]
		soff += sp.len()
		return s
	}
	ptr := func(sp span) *string {
		s := &strs[p]
		p++
		*s = take(sp)
		return s
	}

	out := &kinesis.GetRecordsOutput{Records: recs}
	if d.set&hasNext != 0 {
		if buf != nil {
			// Its own pointer: a caller reads the next iterator after it
			// released the answer's records (the next call), whose string
			// pointers a later answer reuses.
			next := take(d.next)
			out.NextShardIterator = &next
		} else {
			out.NextShardIterator = ptr(d.next)
		}
	}
	t := 0
	for i := range d.recs {
		r, o := &d.recs[i], &recs[i]
		if r.set&hasSeq != 0 {
			o.SequenceNumber = ptr(r.seq)
		}
		if r.set&hasKey != 0 {
			o.PartitionKey = ptr(r.key)
		}
		switch {
		case r.set&hasEnc != 0:
			o.EncryptionType = types.EncryptionType(take(r.enc))
		case r.set&hasNone != 0:
			o.EncryptionType = types.EncryptionTypeNone
		case r.set&hasKMS != 0:
			o.EncryptionType = types.EncryptionTypeKms
		}
		if r.set&hasTime != 0 {
			// As smithy-go's ParseEpochSeconds: whole milliseconds, UTC.
			times[t] = time.Unix(0, r.millis*1e6).UTC()
			o.ApproximateArrivalTimestamp = &times[t]
			t++
		}
	}
	if d.set&hasMillis != 0 {
		m := d.millis
		out.MillisBehindLatest = &m
	}
	if d.shards {
		out.ChildShards = d.children
	}
	return out, buf
}

func (sp span) len() int { return int(sp.end - sp.off) }

// decodedLen returns the length of the standard, padded base64 text s once
// decoded, when its length is whole quanta.
func decodedLen(s []byte) (int, bool) {
	if len(s)%4 != 0 {
		return 0, false
	}
	n := len(s) / 4 * 3
	if len(s) > 0 && s[len(s)-1] == '=' {
		n--
		if s[len(s)-2] == '=' {
			n--
		}
	}
	return n, true
}
