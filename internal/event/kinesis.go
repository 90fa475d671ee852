package event

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/base64"
	"github.com/shardsettle/lambdaadapter/internal/jsonscan"
	"github.com/shardsettle/lambdaadapter/internal/kpl"
)

// KinesisRecord is one record of a Kinesis invocation: the fields the
// adapter needs from the record and its kinesis object.
//
// A KinesisRecord is plain data, safe to read from many goroutines. Its
// strings and Data share memory with the other records of the same event
// (see DecodeKinesis); copy them (strings.Clone, bytes.Clone) to keep one
// field alive without the rest.
type KinesisRecord struct {
	// Data is the base64-decoded kinesis.data. It is nil when data is
	// absent or null and empty but non-nil when data is "". It aliases one
	// arena shared by the whole event; its capacity equals its length, so
	// appending to it copies instead of overwriting the next record's data.
	Data []byte
	// PartitionKey is kinesis.partitionKey.
	PartitionKey string
	// SequenceNumber is kinesis.sequenceNumber: a non-empty string of ASCII
	// digits (DecodeKinesis rejects anything else).
	SequenceNumber string
	// ArrivalTime is kinesis.approximateArrivalTimestamp (float seconds
	// since the Unix epoch) rounded to the nearest millisecond, in UTC. It
	// is the zero time when the field is absent. A JSON null yields the
	// Unix epoch, as it does for encoding/json and events.SecondsEpochTime.
	ArrivalTime time.Time
	// EventID is the record's eventID, "shardId-000000000006:4959...".
	EventID string
	// ShardID is EventID before its first ':', or "" when EventID has no
	// ':'.
	ShardID string
	// EventSourceARN is the stream ARN from eventSourceARN.
	EventSourceARN string
	// AWSRegion is awsRegion.
	AWSRegion string
	// EventSource is eventSource: "aws:kinesis", or "" when absent.
	EventSource string
}

// Kinesis is a decoded Kinesis invocation of a Lambda function. It is
// plain data: safe for concurrent reads, owned by the caller.
type Kinesis struct {
	// Records holds the records in the order of the Records array. It is
	// never nil for a successfully decoded event, but may be empty.
	Records []KinesisRecord
	// MaybeAggregates reports whether the data of some record starts with
	// the KPL aggregate magic (kpl.Magic), noted while the data was decoded:
	// when it is false no record is a KPL aggregate, and a caller need not
	// look at each record's data again to know.
	MaybeAggregates bool
}

// ErrNotKinesis reports a payload that is valid JSON but not a Kinesis
// event: it has no Records array, or one of its records is not a Kinesis
// record. DecodeKinesis wraps it, so test for it with errors.Is; a
// *RecordError for a non-Kinesis record also matches it.
var ErrNotKinesis = errors.New("event: not a Kinesis event")

// SyntaxError reports malformed JSON. It has the fields of the shared
// scanner's jsonscan.SyntaxError, which DecodeKinesis converts it from.
type SyntaxError struct {
	// Offset is the byte offset in the payload where the problem was
	// found; it equals the payload length when the input ended early.
	Offset int
	// Msg describes the problem, for example "expected ':' after object
	// key".
	Msg string
}

// Error returns "event: invalid JSON at offset N: " followed by Msg.
func (e *SyntaxError) Error() string {
	return "event: invalid JSON at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// RecordError reports a record that is well-formed JSON but cannot be
// delivered: a missing or non-numeric sequence number, undecodable data, a
// field of the wrong JSON type, or a record that is not a Kinesis record.
// The last kind also matches ErrNotKinesis under errors.Is.
type RecordError struct {
	// Index is the record's position in the Records array.
	Index int
	// Field is the JSON path of the offending field inside the record, such
	// as "kinesis.sequenceNumber" or "eventSource", or "" when the record
	// as a whole is at fault.
	Field string
	// Msg is the complete description, naming the field, for example
	// "kinesis.sequenceNumber missing" or "kinesis.data: illegal base64
	// data at input byte 4".
	Msg string

	err error // ErrNotKinesis or nil
}

// Error returns "event: record N: " followed by Msg.
func (e *RecordError) Error() string {
	return "event: record " + strconv.Itoa(e.Index) + ": " + e.Msg
}

// Unwrap returns ErrNotKinesis for a record that is not a Kinesis record,
// and nil otherwise.
func (e *RecordError) Unwrap() error { return e.err }

// maxPayload is the largest payload DecodeKinesis accepts; offsets are kept
// as uint32. Lambda's own limit is 6 MB.
const maxPayload = math.MaxInt32

// DecodeKinesis decodes the raw JSON of a Lambda Kinesis invocation (the
// events.KinesisEvent shape, optionally with the tumbling-window fields,
// which it ignores).
//
// It accepts what encoding/json accepts into events.KinesisEvent and decodes
// it to the same values: keys match exactly or, failing that,
// case-insensitively; unknown fields of any type are skipped; a null string
// field leaves the field as it was; strings are unescaped with invalid UTF-8
// and unpaired surrogates replaced by U+FFFD; data may be a base64 string
// (standard alphabet, padded, CR and LF ignored) or an array of byte values.
// On top of that it enforces what the adapter relies on, returning an error
// wrapping ErrNotKinesis or a *RecordError otherwise:
//
//   - the top-level value is an object with exactly one Records key (in any
//     letter case), whose value is an array;
//   - every record is an object with a kinesis object, and its eventSource,
//     when present and non-empty, is "aws:kinesis";
//   - every kinesis.sequenceNumber is a non-empty string of ASCII digits.
//
// Malformed JSON, including trailing data after the top-level value and
// nesting deeper than 10,000 levels, yields a *SyntaxError, which takes
// precedence over the semantic errors. A *RecordError always names the
// first bad record in the Records array.
//
// The strings of all records share one allocation holding only the bytes
// they need, and all Data slices share one arena; DecodeKinesis neither
// retains nor modifies payload. The number of allocations per call does not
// depend on the number of records, except that strings containing escape
// sequences need buffer space of their own.
//
// DecodeKinesis runs on the caller's goroutine alone. A decoding of
// payloads from 256 KiB by two goroutines (a helper parsing from a record
// boundary near the middle) was measured and removed
// (benchmarks/parallel-decode-2026-12-05.txt): with GOMAXPROCS=2 it took
// 13% (7 MB) to 31% (1.2 MB) more CPU time in all, and a Lambda function
// below 1,769 MB, which gets less than one vCPU's worth of time, still sees
// two vCPUs and runs with GOMAXPROCS=2, so it paid that CPU time in wall
// time. Only with two whole CPUs did it save wall time: 28% of the decoding
// of a 7 MB payload, nothing at 1.2 MB.
//
// DecodeKinesis is safe for concurrent use. Payloads larger than 2 GiB are
// rejected.
func DecodeKinesis(payload []byte) (*Kinesis, error) {
	return DecodeKinesisWith(payload, nil)
}

// Buffers is memory DecodeKinesisWith reuses from one call to the next: the
// Records slice and the data arena of the last result decoded with it, and
// the decoder's working records. Its zero value is ready to use. A Buffers
// is not safe for concurrent use.
type Buffers struct {
	recs  []KinesisRecord
	arena []byte
	// work is the working records of the last call (see workRecs). They
	// hold no pointers, so keeping them keeps nothing else alive.
	work []wrec
}

// GiveUpData leaves the data of the last result decoded with b to its
// records: the next call decodes into new memory, so that the records'
// Data (and what aliases it) stay valid and unchanged. The Records slice is
// still reused.
func (b *Buffers) GiveUpData() { b.arena = nil }

// Scribble overwrites the data memory b holds with 0xDB, so that a reader
// that kept a Data slice of an earlier result past its reuse reads garbage
// (tests of recycled messages).
func (b *Buffers) Scribble() {
	a := b.arena[:cap(b.arena)]
	for i := range a {
		a[i] = 0xDB
	}
}

// DecodeKinesisWith is DecodeKinesis, except that the result's Records
// slice and the memory of its Data come from buf when they fit there, and
// are kept in buf for the next call (nil buf: fresh memory, as
// DecodeKinesis). Once it is called again with buf, the Records and Data of
// the result of the call before must no longer be used: they are
// overwritten. Strings are never reused.
func DecodeKinesisWith(payload []byte, buf *Buffers) (*Kinesis, error) {
	if len(payload) > maxPayload {
		return nil, fmt.Errorf("event: payload of %d bytes exceeds the limit of %d", len(payload), maxPayload)
	}
	k, err := decodeKinesisWith(payload, buf, true)
	if err != nil {
		// The error of the full scan (see decoder.lazy).
		k, err = decodeKinesisWith(payload, buf, false)
	}
	return k, err
}

// decodeKinesisWith is DecodeKinesisWith, with lazy as decoder.lazy.
func decodeKinesisWith(payload []byte, buf *Buffers, lazy bool) (*Kinesis, error) {
	d := decoder{buf: payload, out: buf, recs: workRecs(payload, buf), lazy: lazy}
	err := d.parse()
	if se, ok := err.(*jsonscan.SyntaxError); ok {
		err = (*SyntaxError)(se) // the same fields, with this package's message
	}
	var k *Kinesis
	if err == nil {
		k, err = d.finish()
	}
	keepRecs(d.recs, buf)
	return k, err
}

// recsPool holds working-record slices (*[]wrec) for reuse. A wrec holds
// no pointers, so a pooled slice keeps nothing else alive.
var recsPool sync.Pool

// getRecs returns an empty slice for the working records of payload: the
// pooled one of an earlier call, whatever its size (the records of one
// function's invocations are alike, and record grows a slice that is too
// small to the size the records parsed so far predict), or else one sized by
// estimateRecords. Counting braces is a pass over the whole payload, which
// a pooled slice spares.
func getRecs(payload []byte) []wrec {
	if p, _ := recsPool.Get().(*[]wrec); p != nil {
		recs := (*p)[:0]
		*p = nil
		ptrPool.Put(p)
		return recs
	}
	return make([]wrec, 0, estimateRecords(payload))
}

// putRecs gives recs back for reuse.
func putRecs(recs []wrec) {
	if cap(recs) == 0 {
		return
	}
	p, _ := ptrPool.Get().(*[]wrec)
	if p == nil {
		p = new([]wrec)
	}
	*p = recs[:0]
	recsPool.Put(p)
}

// ptrPool holds the boxes recsPool's slices travel in, so that putting a
// slice back allocates nothing either.
var ptrPool sync.Pool

// workRecs returns an empty slice for the working records of payload: the
// one the last call with buf kept in it (keepRecs), when buf holds one,
// else getRecs's. A Buffers keeps them apart from recsPool because a pooled
// slice is kept for the processor that put it back, and a goroutine that
// moved to another processor meanwhile (with GOMAXPROCS ≥ 2, often) misses
// it: it then allocates the slice again and counts the payload's braces to
// size it.
func workRecs(payload []byte, buf *Buffers) []wrec {
	if buf != nil && cap(buf.work) > 0 {
		recs := buf.work[:0]
		buf.work = nil
		return recs
	}
	return getRecs(payload)
}

// keepRecs gives the working records of a call back for reuse: to buf,
// where the next call with it finds them (workRecs), or to recsPool when
// buf is nil.
func keepRecs(recs []wrec, buf *Buffers) {
	if buf == nil {
		putRecs(recs)
		return
	}
	if cap(recs) > 0 {
		buf.work = recs[:0]
	}
}

// minRecordLen is the length of the shortest record DecodeKinesis accepts:
// {"kinesis":{"sequenceNumber":"1"}}.
const minRecordLen = 34

// estimateRecords guesses the number of records so the working slice is
// allocated once: a Kinesis record has two objects (the record and its
// kinesis object). The guess is capped so hostile input cannot make it
// allocate more than a few bytes per input byte.
func estimateRecords(p []byte) int {
	n := bytes.Count(p, []byte{'{'}) / 2
	return min(n, len(p)/minRecordLen)
}

// finish turns the working records into the result, or reports the first
// semantic error.
func (d *decoder) finish() (*Kinesis, error) {
	if d.semErr != nil {
		// Records completed before the error precede it in the payload;
		// report a bad base64 value among them first.
		if err := d.checkData(d.recs[:d.done], 0); err != nil {
			return nil, err
		}
		return nil, d.semErr
	}
	switch d.records {
	case recordsAbsent:
		return nil, fmt.Errorf("%w: no Records array", ErrNotKinesis)
	case recordsNull:
		return nil, fmt.Errorf("%w: Records is null", ErrNotKinesis)
	}
	recs := d.recs
	var out []KinesisRecord
	var arena []byte
	if b := d.out; b != nil {
		// fill sets every field of a record; the arena's bytes are all
		// written before they are read.
		if cap(b.recs) >= len(recs) {
			out = b.recs[:len(recs)]
		}
		if cap(b.arena) >= d.dataTotal {
			arena = b.arena[:d.dataTotal]
		}
	}
	if out == nil {
		out = make([]KinesisRecord, len(recs))
	}
	if arena == nil {
		arena = make([]byte, d.dataTotal)
	}
	if b := d.out; b != nil {
		if cap(out) > cap(b.recs) {
			b.recs = out[:0]
		}
		if cap(arena) > cap(b.arena) {
			b.arena = arena[:0]
		}
	}
	var sb strings.Builder
	sb.Grow(d.strTotal)
	agg, err := d.fill(out, recs, 0, arena, &sb)
	if err != nil {
		return nil, err
	}
	return &Kinesis{Records: out, MaybeAggregates: agg}, nil
}

// fill sets every field of out[i] from recs[i], for i from lo on: their
// data into arena, which holds at least their dataBound, their strings into
// sb, grown to hold them. It reports whether the data of one of them starts
// with the KPL magic.
func (d *decoder) fill(out []KinesisRecord, recs []wrec, lo int, arena []byte, sb *strings.Builder) (agg bool, err error) {
	off := 0
	for i := lo; i < len(recs); i++ {
		r, o := &recs[i], &out[i]
		switch r.dkind {
		case dataB64:
			n, err := base64.Decode(arena[off:], d.field(r, fData))
			if err != nil {
				return false, base64Error(i, err)
			}
			if !d.lazyPlain(r, n) {
				return false, errLazy
			}
			o.Data = arena[off : off+n : off+n]
			off += n
		case dataBin:
			sp := r.span[fData]
			n := copy(arena[off:], d.bin[sp.off:sp.end])
			o.Data = arena[off : off+n : off+n]
			off += n
		default:
			o.Data = nil
		}
		agg = agg || kpl.HasMagic(o.Data)
		if r.hasTS {
			o.ArrivalTime = epochTime(r.ts)
		} else {
			o.ArrivalTime = time.Time{}
		}
		dup := r.dup // bits other than fSequenceNumber's refer to the previous record, so never set on the first
		var p *KinesisRecord
		if i > 0 {
			p = &out[i-1]
		}
		o.EventID = d.str(sb, r, fEventID)
		if p != nil && len(o.EventID) > len(p.ShardID) && o.EventID[len(p.ShardID)] == ':' && strings.HasPrefix(o.EventID, p.ShardID) {
			// The previous record's shard, which has no ':' of its own.
			o.ShardID = p.ShardID
		} else {
			o.ShardID = ShardIDOf(o.EventID)
		}
		if dup&(1<<fSequenceNumber) != 0 {
			sp := r.span[fSequenceNumber]
			o.SequenceNumber = o.EventID[len(o.EventID)-int(sp.end-sp.off):]
		} else {
			o.SequenceNumber = d.str(sb, r, fSequenceNumber)
		}
		if dup&(1<<fPartitionKey) != 0 {
			o.PartitionKey = p.PartitionKey
		} else {
			o.PartitionKey = d.str(sb, r, fPartitionKey)
		}
		if dup&(1<<fEventSourceARN) != 0 {
			o.EventSourceARN = p.EventSourceARN
		} else {
			o.EventSourceARN = d.str(sb, r, fEventSourceARN)
		}
		if dup&(1<<fAWSRegion) != 0 {
			o.AWSRegion = p.AWSRegion
		} else {
			o.AWSRegion = d.str(sb, r, fAWSRegion)
		}
		if dup&(1<<fEventSource) != 0 {
			o.EventSource = p.EventSource
		} else {
			o.EventSource = d.str(sb, r, fEventSource)
		}
	}
	return agg, nil
}

// str appends string field f of r to sb and returns it as a substring of
// sb's buffer, which was grown up front and so never moves.
func (d *decoder) str(sb *strings.Builder, r *wrec, f int) string {
	v := d.field(r, f)
	if len(v) == 0 {
		return ""
	}
	start := sb.Len()
	sb.Write(v)
	return sb.String()[start:]
}

// checkData reports the first record among recs[lo:] whose base64 data
// does not decode. It runs only on the error path.
func (d *decoder) checkData(recs []wrec, lo int) error {
	var scratch []byte
	for i := lo; i < len(recs); i++ {
		r := &recs[i]
		if r.dkind != dataB64 {
			continue
		}
		src := d.field(r, fData)
		if n := base64.DecodedLen(len(src)); cap(scratch) < n {
			scratch = make([]byte, n)
		}
		if _, err := base64.Decode(scratch[:cap(scratch)], src); err != nil {
			return base64Error(i, err)
		}
	}
	return nil
}

// base64Error reports undecodable data in record i.
func base64Error(i int, err error) error {
	return &RecordError{Index: i, Field: "kinesis.data", Msg: "kinesis.data: " + err.Error()}
}

// epochTime converts float seconds to a time exactly as
// events.SecondsEpochTime does, then rounds to the millisecond in UTC.
func epochTime(f float64) time.Time {
	sec := int64(f)
	nsec := int64((f - float64(sec)) * 1e9)
	if sec < -maxEpochSec || sec > maxEpochSec {
		return time.Unix(sec, nsec).Round(time.Millisecond).UTC()
	}
	// Round's arithmetic for these times, without its general division:
	// the nanoseconds into [0, 1e9), then to the nearest millisecond,
	// halfway up (Time.Round counts from year 1, a whole number of seconds
	// before the Unix epoch, so the remainder is the same).
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	ms := (nsec + 500_000) / 1_000_000
	return time.Unix(sec, ms*1_000_000).UTC()
}

// maxEpochSec bounds the seconds epochTime rounds itself: far inside the
// range Time represents, past which Round is left to do it (float values
// that large, or NaN and infinities, which int64 cannot hold).
const maxEpochSec = 1 << 40

// ShardIDOf returns the shard id of a Lambda Kinesis eventID
// ("shardId-000000000006:4959…"): the part before the first ':', or "" when
// there is none.
func ShardIDOf(eventID string) string {
	if c := strings.IndexByte(eventID, ':'); c >= 0 {
		return eventID[:c]
	}
	return ""
}
