package event

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/shardsettle/lambdaadapter/internal/ascii"
	"github.com/shardsettle/lambdaadapter/internal/base64"
	"github.com/shardsettle/lambdaadapter/internal/jsonscan"
)

// span is a byte range [off, end) of the payload, of decoder.esc or (for
// data held as bytes) of decoder.bin.
type span struct{ off, end uint32 }

// Indexes of the per-record string fields in wrec.span, and their JSON
// paths for error messages.
const (
	fPartitionKey = iota
	fSequenceNumber
	fEventID
	fEventSourceARN
	fAWSRegion
	fEventSource
	fData
	nFields
)

var fieldPath = [nFields]string{
	fPartitionKey:   "kinesis.partitionKey",
	fSequenceNumber: "kinesis.sequenceNumber",
	fEventID:        "eventID",
	fEventSourceARN: "eventSourceARN",
	fAWSRegion:      "awsRegion",
	fEventSource:    "eventSource",
	fData:           "kinesis.data",
}

// How a record's data is held (wrec.dkind).
const (
	dataNone = iota // absent or null: Data is nil
	dataB64         // span[fData] is base64 text in the payload or esc
	dataBin         // span[fData] is the bytes themselves in bin
)

// State of the top-level Records key (decoder.records).
const (
	recordsAbsent = iota
	recordsNull
	recordsArray
	recordsInvalid // present with the wrong type; semErr is set
)

// wrec is a record while the payload is being parsed: spans instead of
// strings, so that all strings can be copied into one allocation at the end.
type wrec struct {
	span  [nFields]span
	ts    float64 // approximateArrivalTimestamp, valid when hasTS
	dhi   uint32  // dataBin: bytes of bin reserved from span[fData].off
	esc   uint8   // bit f: span[f] indexes esc rather than the payload
	set   uint8   // bit f: string field f holds a value
	dup   uint8   // bit f: reuse the previous record's string (fSequenceNumber: the tail of eventID)
	dkind uint8
	hasTS bool
	kin   bool // a kinesis object was seen
	// orig, for the fields scanRepeated reads, is one more than the
	// payload offset of the raw string (quotes included) the field's raw
	// value equals: two records whose orig for a field is the same
	// non-zero value hold equal values there. Zero: not known.
	orig [nFields]uint32
}

// decoder holds the state of one DecodeKinesis call.
type decoder struct {
	buf       []byte // the payload
	recs      []wrec
	done      int    // records that passed endRecord
	esc       []byte // unescaped strings
	bin       []byte // data given as arrays of byte values
	key       []byte // scratch for unescaping object keys
	semErr    error  // first semantic error; parsing continues to find syntax errors
	records   uint8  // state of the Records key
	dataTotal int    // bytes of decoded data of completed records (upper bound)
	strTotal  int    // bytes of strings of completed records, after sharing
	// last holds, per key id, the raw string value (quotes included) last
	// scanned for that key, and lastFlags its jsonscan.String flags:
	// fields that repeat the previous record's value (eventSourceARN,
	// eventName, …) are recognised by comparing bytes instead of scanning
	// them.
	last      [nKeys]span
	lastFlags [nKeys]uint8
	out       *Buffers // where the result's memory may come from, or nil
	// nextRec and nextKin predict the keys of record and kinesis objects:
	// indexed by a key id (nKeys: the object's first key), they hold the
	// id of the key that followed it last time, or keyUnknown. Records of
	// an event have their keys in the same order, so the key predicted is
	// tried first, with exactKey, which is what exactRecordKey or
	// exactKinesisKey would do for it.
	nextRec, nextKin [nKeys + 1]uint8
	// ck fills the records as the parse completes them when its size is
	// not 0 (DecodeKinesisChunked).
	ck filler
	// lazy: a base64 data string without a backslash is taken without
	// checking its bytes (see lazyData), and its decoding, which checks
	// them, reports errLazy for anything the scan would have rejected.
	lazy bool
	// tpl is the template recordFast reads a record by (see template.go),
	// and tb what record gathers of the one it parses field by field.
	tpl  template
	tb   tplBuild
	fast int // records recordFast read
}

// errLazy reports that a data string taken by lazyData did not decode as
// plain base64: what the caller then does is decode again without lazy,
// which gives the error (or the result) of the full scan.
var errLazy = errors.New("event: data string needs the full scan")

// lazyData is the fast path of data for a string whose opening quote is at
// i: when the closing quote bytes.IndexByte finds has no backslash before
// it, that quote ends the string, and the index past it is returned. The
// bytes between are not checked here: base64 has no escapes, and decoding
// the string later checks that every byte is of the base64 alphabet or
// padding (plainBase64), which the string scan accepts too. Anything else
// (a control character, a line break, non-ASCII, bad base64) makes the
// decoding fail, and the whole payload is then decoded again with the full
// scan, so that every error is the one it reports.
func (d *decoder) lazyData(i int) (int, bool) {
	b := d.buf[i+1:]
	q := bytes.IndexByte(b, '"')
	if q < 0 || bytes.IndexByte(b[:q], '\\') >= 0 {
		return 0, false
	}
	return i + 2 + q, true
}

// plainBase64 reports whether m bytes of base64 that decoded without error
// to n bytes held no line breaks, which the decoder skips: then m is a
// multiple of 4 and at most 2 of the m/4*3 bytes are padding, while k > 0
// line breaks need k a multiple of 4 too and leave at most (m-4)/4*3.
func plainBase64(m, n int) bool {
	return m%4 == 0 && n+2 >= m/4*3
}

// lazyPlain reports whether the data of r, which decoded without error to
// n bytes, is what the full scan would also have accepted: always unless
// lazyData took it.
func (d *decoder) lazyPlain(r *wrec, n int) bool {
	if !d.lazy || r.esc&(1<<fData) != 0 {
		return true
	}
	sp := r.span[fData]
	return plainBase64(int(sp.end-sp.off), n)
}

// fail records err unless an earlier semantic error is already recorded.
func (d *decoder) fail(err error) {
	if d.semErr == nil {
		d.semErr = err
	}
}

// recordError builds a RecordError; wrapped is ErrNotKinesis or nil.
func recordError(idx int, field, msg string, wrapped error) *RecordError {
	return &RecordError{Index: idx, Field: field, Msg: msg, err: wrapped}
}

// field returns the unescaped bytes of string field f of r, or nil when it
// holds no value.
func (d *decoder) field(r *wrec, f int) []byte {
	if r.set&(1<<f) == 0 {
		return nil
	}
	sp := r.span[f]
	if r.esc&(1<<f) != 0 {
		return d.esc[sp.off:sp.end]
	}
	return d.buf[sp.off:sp.end]
}

// Object keys DecodeKinesis knows. Keys match like encoding/json: exactly,
// or else case-insensitively (Unicode simple folding, bytes.EqualFold).
const (
	keyUnknown = iota
	// record keys
	keyKinesis
	keyEventSource
	keyEventID
	keyEventSourceARN
	keyAWSRegion
	keyEventName
	keyEventVersion
	keyInvokeIdentityArn
	// kinesis keys
	keyPartitionKey
	keySequenceNumber
	keyData
	keyApproximateArrivalTimestamp
	keyEncryptionType
	keyKinesisSchemaVersion
	nKeys
)

var keyNames = [nKeys][]byte{
	keyKinesis:                     []byte("kinesis"),
	keyEventSource:                 []byte("eventSource"),
	keyEventID:                     []byte("eventID"),
	keyEventSourceARN:              []byte("eventSourceARN"),
	keyAWSRegion:                   []byte("awsRegion"),
	keyEventName:                   []byte("eventName"),
	keyEventVersion:                []byte("eventVersion"),
	keyInvokeIdentityArn:           []byte("invokeIdentityArn"),
	keyPartitionKey:                []byte("partitionKey"),
	keySequenceNumber:              []byte("sequenceNumber"),
	keyData:                        []byte("data"),
	keyApproximateArrivalTimestamp: []byte("approximateArrivalTimestamp"),
	keyEncryptionType:              []byte("encryptionType"),
	keyKinesisSchemaVersion:        []byte("kinesisSchemaVersion"),
}

var recordsName = []byte("Records")

// foldKey returns the key among keyNames[lo:hi] that k equals under case
// folding, or keyUnknown.
func foldKey(k []byte, lo, hi int) int {
	for id := lo; id < hi; id++ {
		if len(k) >= len(keyNames[id]) && bytes.EqualFold(k, keyNames[id]) {
			return id
		}
	}
	return keyUnknown
}

// recordKey classifies a key of a record object.
func recordKey(k []byte) int {
	switch string(k) {
	case "kinesis":
		return keyKinesis
	case "eventSource":
		return keyEventSource
	case "eventID":
		return keyEventID
	case "eventSourceARN":
		return keyEventSourceARN
	case "awsRegion":
		return keyAWSRegion
	case "eventName":
		return keyEventName
	case "eventVersion":
		return keyEventVersion
	case "invokeIdentityArn":
		return keyInvokeIdentityArn
	}
	return foldKey(k, keyKinesis, keyInvokeIdentityArn+1)
}

// kinesisKey classifies a key of a kinesis object.
func kinesisKey(k []byte) int {
	switch string(k) {
	case "partitionKey":
		return keyPartitionKey
	case "sequenceNumber":
		return keySequenceNumber
	case "data":
		return keyData
	case "approximateArrivalTimestamp":
		return keyApproximateArrivalTimestamp
	case "encryptionType":
		return keyEncryptionType
	case "kinesisSchemaVersion":
		return keyKinesisSchemaVersion
	}
	return foldKey(k, keyPartitionKey, nKeys)
}

// keyPattern is a known key as it appears in a payload written without
// whitespace, from its opening quote to the colon ("kinesis":), held as the
// little-endian words of a keyWindow-byte window starting at the quote and
// masks selecting the pattern's bytes in them: the pattern, at most
// keyWindow bytes long, matches when every masked word is equal, which
// needs no loop or branch per word.
type keyPattern struct {
	n     int
	words [keyWindow / 8]uint64
	masks [keyWindow / 8]uint64
}

// keyWindow is the number of bytes keyPattern.match looks at: the longest
// pattern, "approximateArrivalTimestamp":, is 30 bytes.
const keyWindow = 32

// match reports whether b starts with the pattern.
func (p *keyPattern) match(b []byte) bool {
	if len(b) >= keyWindow {
		w := b[:keyWindow:keyWindow]
		return (binary.LittleEndian.Uint64(w)^p.words[0])&p.masks[0]|
			(binary.LittleEndian.Uint64(w[8:])^p.words[1])&p.masks[1]|
			(binary.LittleEndian.Uint64(w[16:])^p.words[2])&p.masks[2]|
			(binary.LittleEndian.Uint64(w[24:])^p.words[3])&p.masks[3] == 0
	}
	// Near the end of the payload: byte by byte.
	if len(b) < p.n {
		return false
	}
	for k := 0; k < p.n; k++ {
		if b[k] != byte(p.words[k>>3]>>(8*(k&7))) {
			return false
		}
	}
	return true
}

// newKeyPattern returns the pattern of the key name.
func newKeyPattern(name []byte) keyPattern {
	pat := []byte(`"` + string(name) + `":`)
	if len(pat) > keyWindow {
		panic("event: key pattern " + string(pat) + " longer than keyWindow")
	}
	p := keyPattern{n: len(pat)}
	for k, c := range pat {
		p.words[k>>3] |= uint64(c) << (8 * (k & 7))
		p.masks[k>>3] |= 0xff << (8 * (k & 7))
	}
	return p
}

// keyPatterns holds the pattern of every known key.
var keyPatterns = func() (kp [nKeys]keyPattern) {
	for id := keyKinesis; id < nKeys; id++ {
		kp[id] = newKeyPattern(keyNames[id])
	}
	return kp
}()

// exactKey reports whether the key whose quote is at i is exactly key id,
// directly followed by its colon, and returns the index of the value
// after it. It is the fast path of objKey plus recordKey or kinesisKey: a
// key spelled exactly like a known one has no escapes, so both classify it
// the same. Anything else (escapes, other letter cases, whitespace before
// the colon or at the end of the input) is left to them.
func (d *decoder) exactKey(i, id int) (int, int) {
	b, p := d.buf, &keyPatterns[id]
	j := i + p.n
	if j >= len(b) || !p.match(b[i:]) {
		return keyUnknown, i
	}
	switch b[j] {
	case ' ', '\t', '\n', '\r':
		if j = jsonscan.WS(b, j); j >= len(b) {
			return keyUnknown, i
		}
	}
	return id, j
}

// exactRecordKey is the fast path for the keys of a record object: it
// returns the key id and the index of its value, or keyUnknown when the
// key must go through objKey and recordKey.
func (d *decoder) exactRecordKey(i int) (int, int) {
	b := d.buf
	if i+7 >= len(b) {
		return keyUnknown, i
	}
	switch b[i+1] {
	case 'k':
		return d.exactKey(i, keyKinesis)
	case 'a':
		return d.exactKey(i, keyAWSRegion)
	case 'i':
		return d.exactKey(i, keyInvokeIdentityArn)
	case 'e':
		switch b[i+6] { // "event?"
		case 'I':
			return d.exactKey(i, keyEventID)
		case 'N':
			return d.exactKey(i, keyEventName)
		case 'V':
			return d.exactKey(i, keyEventVersion)
		case 'S':
			if k, j := d.exactKey(i, keyEventSource); k != keyUnknown {
				return k, j
			}
			return d.exactKey(i, keyEventSourceARN)
		}
	}
	return keyUnknown, i
}

// exactKinesisKey is exactRecordKey for the keys of a kinesis object.
func (d *decoder) exactKinesisKey(i int) (int, int) {
	b := d.buf
	if i+1 >= len(b) {
		return keyUnknown, i
	}
	switch b[i+1] {
	case 'd':
		return d.exactKey(i, keyData)
	case 'p':
		return d.exactKey(i, keyPartitionKey)
	case 's':
		return d.exactKey(i, keySequenceNumber)
	case 'a':
		return d.exactKey(i, keyApproximateArrivalTimestamp)
	case 'e':
		return d.exactKey(i, keyEncryptionType)
	case 'k':
		return d.exactKey(i, keyKinesisSchemaVersion)
	}
	return keyUnknown, i
}

// scanRepeated is jsonscan.String for the value at i of key id key, for
// fields whose value usually repeats from record to record: when the bytes
// at i equal the raw value last scanned for key (quotes included), they are
// the same valid string, with the same flags, and need no scan.
func (d *decoder) scanRepeated(i, key int) (int, uint8, error) {
	b, last := d.buf, d.last[key]
	if n := int(last.end - last.off); n > 0 && i+n <= len(b) && string(b[i:i+n]) == string(b[last.off:last.end]) {
		return i + n, d.lastFlags[key], nil
	}
	end, flags, err := jsonscan.String(b, i)
	if err == nil {
		d.last[key], d.lastFlags[key] = span{uint32(i), uint32(end)}, flags
	}
	return end, flags, err
}

// objKey reads the key whose quote is at i and the ':' after it. It returns
// the unescaped key (valid until the next call) and the index of the value,
// which is inside the payload.
func (d *decoder) objKey(i int) ([]byte, int, error) {
	b := d.buf
	end, flags, err := jsonscan.String(b, i)
	if err != nil {
		return nil, end, err
	}
	key := b[i+1 : end-1]
	if flags&jsonscan.Escaped != 0 {
		d.key = jsonscan.AppendUnquoted(d.key[:0], key)
		key = d.key
	}
	// Unescaped invalid UTF-8 needs no replacement here: bytes.EqualFold
	// already treats it as U+FFFD, which matches no known key.
	j, err := jsonscan.Colon(b, end)
	if err != nil {
		return nil, j, err
	}
	return key, j, nil
}

// skip validates the value at i, nested level containers deep, and returns
// the index just past it: DecodeKinesis accepts nesting up to
// jsonscan.MaxDepth, as encoding/json does.
func (d *decoder) skip(i, level int) (int, error) {
	return jsonscan.Skip(d.buf, i, level, jsonscan.MaxDepth)
}

// parse parses the whole payload. Its syntax errors are
// *jsonscan.SyntaxError.
func (d *decoder) parse() error {
	b := d.buf
	i := jsonscan.WS(b, 0)
	var err error
	if i < len(b) && b[i] == '{' {
		i, err = d.top(i)
	} else {
		start := i
		if i, err = d.skip(i, 0); err == nil {
			d.fail(fmt.Errorf("%w: top-level value is %s, not an object", ErrNotKinesis, jsonscan.Kind(b[start])))
		}
	}
	if err != nil {
		return err
	}
	return jsonscan.End(b, i)
}

// top parses the top-level object whose '{' is at i.
func (d *decoder) top(i int) (int, error) {
	i, more, err := jsonscan.ObjectStart(d.buf, i)
	for more {
		var key []byte
		if key, i, err = d.objKey(i); err != nil {
			return i, err
		}
		if string(key) == "Records" || bytes.EqualFold(key, recordsName) {
			i, err = d.recordsValue(i)
		} else {
			i, err = d.skip(i, 1)
		}
		if err != nil {
			return i, err
		}
		i, more, err = jsonscan.ObjectNext(d.buf, i)
	}
	return i, err
}

// recordsValue parses the value of the Records key at i.
func (d *decoder) recordsValue(i int) (int, error) {
	b := d.buf
	if d.records != recordsAbsent {
		j, err := d.skip(i, 1)
		if err == nil {
			d.fail(fmt.Errorf("%w: Records key repeated at offset %d", ErrNotKinesis, i))
		}
		return j, err
	}
	switch c := b[i]; c {
	case '[':
		d.records = recordsArray
		return d.recordsArray(i)
	case 'n':
		d.records = recordsNull
		return jsonscan.Literal(b, i, "null")
	default:
		d.records = recordsInvalid
		j, err := d.skip(i, 1)
		if err == nil {
			d.fail(fmt.Errorf("%w: Records is %s, not an array", ErrNotKinesis, jsonscan.Kind(c)))
		}
		return j, err
	}
}

// recordsArray parses the Records array whose '[' is at i.
func (d *decoder) recordsArray(i int) (int, error) {
	i, more := jsonscan.ArrayStart(d.buf, i)
	if !more {
		return i, nil
	}
	return d.elements(i)
}

// elements parses the records of the Records array from the element at i
// to the array's end, numbering them from 0.
func (d *decoder) elements(i int) (int, error) {
	b := d.buf
	for idx := 0; ; idx++ {
		if i >= len(b) {
			return i, jsonscan.EndOfInput(b)
		}
		var err error
		if d.semErr != nil {
			i, err = d.skip(i, 2) // the result is an error already; only check syntax
		} else {
			i, err = d.record(i, idx)
		}
		if err != nil {
			return i, err
		}
		if d.ck.size > 0 && d.done-d.ck.queued >= d.ck.size && d.semErr == nil {
			d.fillChunk(i)
		}
		var more bool
		if i, more, err = jsonscan.ArrayNext(b, i); !more {
			return i, err
		}
	}
}

// record parses record idx, the value at i inside the Records array.
func (d *decoder) record(i, idx int) (int, error) {
	b := d.buf
	switch c := b[i]; c {
	case '{':
	case 'n':
		j, err := jsonscan.Literal(b, i, "null")
		if err == nil {
			d.fail(recordError(idx, "", "not a Kinesis record (null)", ErrNotKinesis))
		}
		return j, err
	default:
		j, err := d.skip(i, 2)
		if err == nil {
			d.fail(recordError(idx, "", "not a Kinesis record ("+jsonscan.Kind(c)+", not an object)", ErrNotKinesis))
		}
		return j, err
	}
	if len(d.recs) == cap(d.recs) {
		d.growRecs(i)
	}
	d.recs = append(d.recs, wrec{})
	r := &d.recs[idx]
	if d.tpl.ok && !noTemplates {
		if end, ok := d.recordFast(i, r); ok {
			d.fast++
			d.endRecord(r, idx)
			return end, nil
		}
	}
	start := i
	d.tb = tplBuild{}
	i, more, err := jsonscan.ObjectStart(b, i)
	prev := nKeys // no key yet
	for more {
		k, j := keyUnknown, i
		if p := d.nextRec[prev]; p != keyUnknown {
			k, j = d.exactKey(i, int(p))
		}
		if k == keyUnknown {
			if k, j = d.exactRecordKey(i); k == keyUnknown {
				var key []byte
				if key, j, err = d.objKey(i); err != nil {
					return j, err
				}
				k = recordKey(key)
			}
			d.nextRec[prev] = uint8(k)
		}
		d.tb.key(k)
		prev = k
		i = j
		switch k {
		case keyKinesis:
			i, err = d.kinesis(i, r, idx)
		case keyEventSource:
			i, err = d.stringField(i, 3, r, idx, fEventSource, k)
		case keyEventID:
			i, err = d.stringField(i, 3, r, idx, fEventID, keyUnknown)
		case keyEventSourceARN:
			i, err = d.stringField(i, 3, r, idx, fEventSourceARN, k)
		case keyAWSRegion:
			i, err = d.stringField(i, 3, r, idx, fAWSRegion, k)
		case keyEventName, keyEventVersion, keyInvokeIdentityArn:
			i, err = d.checkString(i, 3, idx, k)
		default:
			i, err = d.skip(i, 3)
		}
		if err != nil {
			return i, err
		}
		i, more, err = jsonscan.ObjectNext(b, i)
	}
	if err == nil && d.semErr == nil {
		d.endRecord(r, idx)
		if d.semErr == nil {
			d.keep(r, start, i)
		}
	}
	return i, err
}

// growRecs makes room in d.recs for the record at i and the rest: as many
// more as the records so far, at their average length, predict for the
// payload after i (an eighth more, for records that vary), but at least
// double, so that append's gentler growth for large slices does not
// allocate several times the final size in total, and at most what
// estimateRecords allows.
func (d *decoder) growRecs(i int) {
	n := len(d.recs)
	want := max(2*n, 16)
	if n > 0 && i > 0 {
		predicted := n + (len(d.buf)-i)/max(i/n, 1)
		want = max(want, predicted+predicted/8)
	}
	want = min(want, max(len(d.buf)/minRecordLen, n+1))
	recs := make([]wrec, n, want)
	copy(recs, d.recs)
	d.recs = recs
}

// kinesis parses the value at i of record idx's kinesis key.
func (d *decoder) kinesis(i int, r *wrec, idx int) (int, error) {
	b := d.buf
	switch b[i] {
	case '{':
	case 'n':
		return jsonscan.Literal(b, i, "null") // leaves the record as it was
	default:
		return d.mismatch(i, 3, idx, "kinesis", "an object")
	}
	r.kin = true
	i, more, err := jsonscan.ObjectStart(b, i)
	prev := nKeys // no key yet
	for more {
		k, j := keyUnknown, i
		if p := d.nextKin[prev]; p != keyUnknown {
			k, j = d.exactKey(i, int(p))
		}
		if k == keyUnknown {
			if k, j = d.exactKinesisKey(i); k == keyUnknown {
				var key []byte
				if key, j, err = d.objKey(i); err != nil {
					return j, err
				}
				k = kinesisKey(key)
			}
			d.nextKin[prev] = uint8(k)
		}
		d.tb.key(k)
		prev = k
		i = j
		switch k {
		case keyPartitionKey:
			i, err = d.stringField(i, 4, r, idx, fPartitionKey, keyUnknown)
		case keySequenceNumber:
			i, err = d.stringField(i, 4, r, idx, fSequenceNumber, keyUnknown)
		case keyData:
			i, err = d.data(i, r, idx)
		case keyApproximateArrivalTimestamp:
			i, err = d.timestamp(i, r, idx)
		case keyEncryptionType, keyKinesisSchemaVersion:
			i, err = d.checkString(i, 4, idx, k)
		default:
			i, err = d.skip(i, 4)
		}
		if err != nil {
			return i, err
		}
		i, more, err = jsonscan.ObjectNext(b, i)
	}
	return i, err
}

// mismatch skips the value at i (inside containers nested level deep),
// which has the wrong JSON type for field of record idx, and records the
// error.
func (d *decoder) mismatch(i, level, idx int, field, want string) (int, error) {
	c := d.buf[i]
	j, err := d.skip(i, level)
	if err == nil {
		d.fail(recordError(idx, field, field+": expected "+want+", found "+jsonscan.Kind(c), nil))
	}
	return j, err
}

// stringField parses the value at i of string field f of record idx. Null
// leaves the field as it was, as in encoding/json. key, unless keyUnknown,
// is the field's key id for scanRepeated: a field whose value usually
// repeats from record to record.
func (d *decoder) stringField(i, level int, r *wrec, idx, f, key int) (int, error) {
	b := d.buf
	switch b[i] {
	case '"':
		var end int
		var flags uint8
		var err error
		if key == keyUnknown {
			end, flags, err = jsonscan.String(b, i)
		} else {
			end, flags, err = d.scanRepeated(i, key)
		}
		if err != nil {
			return end, err
		}
		d.setString(r, f, i+1, end-1, flags)
		if key != keyUnknown {
			r.orig[f] = d.last[key].off + 1 // scanRepeated saw the raw value there
		} else if flags == 0 {
			d.tb.add(i, end, slotString, uint8(f)) // a value that varies
		} else {
			d.tb.bad = true
		}
		return end, nil
	case 'n':
		return jsonscan.Literal(b, i, "null")
	}
	return d.mismatch(i, level, idx, fieldPath[f], "a string")
}

// checkString validates the value at i of the string field with key id
// key, which DecodeKinesis does not keep; encoding/json would reject a value
// of another type.
func (d *decoder) checkString(i, level, idx, key int) (int, error) {
	b := d.buf
	switch b[i] {
	case '"':
		end, _, err := d.scanRepeated(i, key)
		return end, err
	case 'n':
		return jsonscan.Literal(b, i, "null")
	}
	field := string(keyNames[key])
	if key >= keyPartitionKey {
		field = "kinesis." + field
	}
	return d.mismatch(i, level, idx, field, "a string")
}

// setString points field f of r at the raw string payload[start:end],
// unescaping it into esc when it has escapes or invalid UTF-8.
func (d *decoder) setString(r *wrec, f, start, end int, flags uint8) {
	raw := d.buf[start:end]
	bit := uint8(1) << f
	if flags&jsonscan.Escaped != 0 || flags&jsonscan.NonASCII != 0 && !utf8.Valid(raw) {
		off := len(d.esc)
		// Unescaping at most triples the length (an invalid byte becomes
		// U+FFFD); reserve that so AppendUnquoted never grows the buffer.
		d.esc = grow(d.esc, 3*len(raw))
		d.esc = jsonscan.AppendUnquoted(d.esc, raw)
		r.span[f] = span{uint32(off), uint32(len(d.esc))}
		r.esc |= bit
	} else {
		r.span[f] = span{uint32(start), uint32(end)}
		r.esc &^= bit
	}
	r.set |= bit
}

// data parses the value at i of record idx's kinesis.data.
func (d *decoder) data(i int, r *wrec, idx int) (int, error) {
	b := d.buf
	switch b[i] {
	case '"':
		if d.lazy {
			if end, ok := d.lazyData(i); ok {
				d.retireData(r, idx)
				d.setString(r, fData, i+1, end-1, 0)
				r.dkind = dataB64
				d.tb.add(i, end, slotData, fData)
				return end, nil
			}
		}
		end, flags, err := jsonscan.String(b, i)
		if err != nil {
			return end, err
		}
		d.retireData(r, idx)
		d.setString(r, fData, i+1, end-1, flags)
		r.dkind = dataB64
		if flags == 0 {
			d.tb.add(i, end, slotData, fData)
		} else {
			d.tb.bad = true
		}
		return end, nil
	case 'n':
		end, err := jsonscan.Literal(b, i, "null")
		if err != nil {
			return end, err
		}
		d.retireData(r, idx)
		r.dkind = dataNone
		return end, nil
	case '[':
		return d.dataArray(i, r, idx)
	}
	return d.mismatch(i, 4, idx, "kinesis.data", "a base64 string")
}

// retireData checks base64 data about to be replaced by a repeated data
// key: encoding/json fails on it even though a later value wins.
func (d *decoder) retireData(r *wrec, idx int) {
	if r.dkind != dataB64 || d.semErr != nil {
		return
	}
	off := len(d.bin)
	if _, err := d.decodeToBin(r); err != nil {
		d.fail(base64Error(idx, err))
	}
	d.bin = d.bin[:off]
}

// decodeToBin appends the base64 decoding of r's data to bin and returns
// the number of bytes appended.
func (d *decoder) decodeToBin(r *wrec) (int, error) {
	src := d.field(r, fData)
	off := len(d.bin)
	need := base64.DecodedLen(len(src))
	d.bin = grow(d.bin, need)
	n, err := base64.Decode(d.bin[off:off+need], src)
	if err == nil && !d.lazyPlain(r, n) {
		err = errLazy
	}
	if err != nil {
		n = 0
	}
	d.bin = d.bin[:off+n]
	return n, err
}

// dataArray parses data given as an array of byte values, whose '[' is at
// i. Like encoding/json it decodes into the current value: element k
// replaces byte k, a null element keeps it, and bytes beyond the current
// length that an earlier, longer value held come back into view.
func (d *decoder) dataArray(i int, r *wrec, idx int) (int, error) {
	b := d.buf
	var off, hi int // the value's bytes are bin[off:off+hi]
	switch r.dkind {
	case dataB64:
		off = len(d.bin)
		n, err := d.decodeToBin(r)
		if err != nil {
			d.fail(base64Error(idx, err))
		}
		hi = n
	case dataBin:
		off, hi = int(r.span[fData].off), int(r.dhi)
	default:
		off = len(d.bin)
	}
	k := 0
	i, more := jsonscan.ArrayStart(b, i)
	if !more {
		// An empty array makes a new empty slice.
		r.dkind, r.span[fData], r.dhi = dataBin, span{uint32(len(d.bin)), uint32(len(d.bin))}, 0
		return i, nil
	}
	for {
		if i >= len(b) {
			return i, jsonscan.EndOfInput(b)
		}
		var v byte
		keep := false
		var err error
		switch c := b[i]; {
		case c == '-' || isDigit(c):
			start := i
			if i, err = jsonscan.Number(b, i); err != nil {
				return i, err
			}
			var ok bool
			if v, ok = byteValue(b[start:i]); !ok {
				d.fail(recordError(idx, "kinesis.data", fmt.Sprintf("kinesis.data: array element %d: %s is not a byte value", k, clip(b[start:i])), nil))
			}
		case c == 'n':
			if i, err = jsonscan.Literal(b, i, "null"); err != nil {
				return i, err
			}
			keep = true
		default:
			if i, err = d.skip(i, 5); err != nil {
				return i, err
			}
			d.fail(recordError(idx, "kinesis.data", fmt.Sprintf("kinesis.data: array element %d is %s, not a byte value", k, jsonscan.Kind(c)), nil))
		}
		switch {
		case k < hi:
			if !keep {
				d.bin[off+k] = v
			}
		default:
			if off+hi != len(d.bin) { // move the value to the end of bin to extend it
				nOff := len(d.bin)
				d.bin = grow(d.bin, hi+1)
				d.bin = append(d.bin, d.bin[off:off+hi]...)
				off = nOff
			}
			d.bin = grow(d.bin, 1)
			d.bin = append(d.bin, v)
			hi++
		}
		k++
		if i, more, err = jsonscan.ArrayNext(b, i); !more {
			if err == nil {
				r.dkind, r.span[fData], r.dhi = dataBin, span{uint32(off), uint32(off + k)}, uint32(hi)
			}
			return i, err
		}
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// grow returns b with room for n more bytes, at least doubling its capacity
// when it must reallocate, so that the total allocated stays within twice
// the final size.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), max(2*cap(b), len(b)+n, 64))
	copy(nb, b)
	return nb
}

// byteValue converts a validated JSON number to a byte the way encoding/json
// decodes a uint8: digits only, at most 255.
func byteValue(num []byte) (byte, bool) {
	if len(num) > 3 {
		return 0, false
	}
	v := 0
	for _, c := range num {
		if !isDigit(c) {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return byte(v), v <= 255
}

// timestamp parses the value at i of record idx's
// approximateArrivalTimestamp.
func (d *decoder) timestamp(i int, r *wrec, idx int) (int, error) {
	b := d.buf
	switch c := b[i]; {
	case c == '-' || isDigit(c):
		end, err := jsonscan.Number(b, i)
		if err != nil {
			return end, err
		}
		f, ok := jsonscan.ParseFloat(b[i:end])
		if !ok {
			const field = "kinesis.approximateArrivalTimestamp"
			d.fail(recordError(idx, field, field+": number "+clip(b[i:end])+" is out of range", nil))
		}
		r.ts, r.hasTS = f, true
		d.tb.add(i, end, slotTS, 0)
		return end, nil
	case c == 'n':
		// events.SecondsEpochTime turns null into 0 seconds.
		r.ts, r.hasTS = 0, true
		return jsonscan.Literal(b, i, "null")
	}
	return d.mismatch(i, 4, idx, "kinesis.approximateArrivalTimestamp", "a number")
}

// endRecord checks a complete record and accounts for its output sizes.
func (d *decoder) endRecord(r *wrec, idx int) {
	if src := d.field(r, fEventSource); len(src) > 0 && string(src) != "aws:kinesis" {
		d.fail(recordError(idx, "eventSource", "not a Kinesis record (eventSource "+strconv.Quote(clip(src))+")", ErrNotKinesis))
		return
	}
	if !r.kin {
		d.fail(recordError(idx, "kinesis", "not a Kinesis record (no kinesis object)", ErrNotKinesis))
		return
	}
	seq := d.field(r, fSequenceNumber)
	if len(seq) == 0 {
		d.fail(recordError(idx, "kinesis.sequenceNumber", "kinesis.sequenceNumber missing", nil))
		return
	}
	if !ascii.Digits(seq) {
		d.fail(recordError(idx, "kinesis.sequenceNumber", "kinesis.sequenceNumber "+strconv.Quote(clip(seq))+" is not a decimal number", nil))
		return
	}
	d.done++

	d.dataTotal += dataBound(r)

	// Strings: eventID, then the sequence number unless it is eventID's
	// tail, then the rest unless equal to the previous record's.
	id := d.field(r, fEventID)
	d.strTotal += len(id)
	if n := len(id) - len(seq); n > 0 && id[n-1] == ':' && bytes.Equal(id[n:], seq) {
		r.dup |= 1 << fSequenceNumber
	} else {
		d.strTotal += len(seq)
	}
	var prev *wrec
	if idx > 0 {
		prev = &d.recs[idx-1]
	}
	for _, f := range [...]int{fPartitionKey, fEventSourceARN, fAWSRegion, fEventSource} {
		if prev != nil && r.orig[f] != 0 && r.orig[f] == prev.orig[f] {
			r.dup |= 1 << f // the same raw string, so the same value
			continue
		}
		v := d.field(r, f)
		if prev != nil && bytes.Equal(v, d.field(prev, f)) {
			r.dup |= 1 << f
			continue
		}
		d.strTotal += len(v)
	}
}

// dataBound is the most bytes r's decoded data can take.
func dataBound(r *wrec) int {
	sp := r.span[fData]
	switch r.dkind {
	case dataB64:
		return base64.DecodedLen(int(sp.end - sp.off))
	case dataBin:
		return int(sp.end - sp.off)
	}
	return 0
}

// clip shortens b for quoting in an error message.
func clip(b []byte) string {
	const limit = 64
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}
