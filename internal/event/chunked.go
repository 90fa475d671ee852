package event

import (
	"fmt"
	"strings"

	"github.com/shardsettle/lambdaadapter/internal/jsonscan"
)

// chunkRecords is the number of records DecodeKinesisChunked parses before
// it fills them: about 90 KB of a payload of 100-byte records, which the
// filling then reads again from the cache instead of from memory.
const chunkRecords = 128

// DecodeKinesisChunked is DecodeKinesisWith (the same records, the same
// errors, buf used the same way), except for when it fills the records: it
// decodes the data and copies the strings of every chunkRecords records as
// soon as it has parsed them, while the bytes they come from are still in
// the processor's cache, where DecodeKinesisWith does it for all of them
// after the parse. The Data of the records then share a few arenas instead
// of one, and their strings a few allocations.
func DecodeKinesisChunked(payload []byte, buf *Buffers) (*Kinesis, error) {
	return decodeKinesisChunked(payload, buf, chunkRecords)
}

// decodeKinesisChunked is DecodeKinesisChunked filling every size records.
func decodeKinesisChunked(payload []byte, buf *Buffers, size int) (*Kinesis, error) {
	if len(payload) > maxPayload {
		return nil, fmt.Errorf("event: payload of %d bytes exceeds the limit of %d", len(payload), maxPayload)
	}
	k, err := decodeChunks(payload, buf, size, true)
	if err != nil {
		// The error of the full scan (see decoder.lazy).
		k, err = decodeChunks(payload, buf, size, false)
	}
	return k, err
}

// decodeChunks is decodeKinesisChunked with lazy as decoder.lazy.
func decodeChunks(payload []byte, buf *Buffers, size int, lazy bool) (*Kinesis, error) {
	d := decoder{buf: payload, out: buf, recs: workRecs(payload, buf), lazy: lazy}
	c := &d.ck
	c.size = size
	if buf != nil {
		c.out, c.arena = buf.recs[:0], buf.arena[:0]
	}
	err := d.parse()
	if err == nil && d.semErr == nil && d.records == recordsArray {
		d.fillChunk(len(payload)) // the rest
	}
	if se, ok := err.(*jsonscan.SyntaxError); ok {
		err = (*SyntaxError)(se)
	}
	var k *Kinesis
	if err == nil {
		k, err = d.finishChunked()
	}
	keepRecs(d.recs, buf)
	return k, err
}

// filler fills the records of DecodeKinesisChunked.
type filler struct {
	size   int             // records filled at once
	queued int             // records handed to fill
	filled int             // records filled: out[:filled]
	data   int             // dataBound of out[:filled]
	str    int             // strTotal of out[:filled]
	out    []KinesisRecord // the result's records, len filled
	arena  []byte          // the data block: its free room is arena[len:cap]
	sb     strings.Builder // the string block (see decoder.str)
	agg    bool            // the data of a filled record starts with the KPL magic
	err    error           // the first undecodable data among the filled records
}

// fillJob is what fills records: the parsed records (those from
// filler.filled on are filled), the decoder's buffers they point into, and
// the decoder's totals (see decoder.endRecord).
type fillJob struct {
	buf, esc, bin       []byte
	recs                []wrec
	at                  int // the payload offset the parse had reached
	dataTotal, strTotal int
	lazy                bool // decoder.lazy
}

// fillChunk fills the records parsed and not filled yet; at is the payload
// offset the parse reached.
func (d *decoder) fillChunk(at int) {
	c := &d.ck
	if c.queued == d.done {
		return
	}
	c.queued = d.done
	j := fillJob{buf: d.buf, esc: d.esc, bin: d.bin, recs: d.recs[:d.done:d.done], at: at, dataTotal: d.dataTotal, strTotal: d.strTotal, lazy: d.lazy}
	c.fill(j)
}

// fill fills the records of j not filled yet, from j.at predicting the
// room the records after them will need.
func (c *filler) fill(j fillJob) {
	lo, hi := c.filled, len(j.recs)
	if lo == hi || c.err != nil {
		return
	}
	if hi > cap(c.out) {
		n := min(hi+predictRest(hi, j.at, len(j.buf)), max(len(j.buf)/minRecordLen, hi))
		out := make([]KinesisRecord, lo, n)
		copy(out, c.out)
		c.out = out
	}
	c.out = c.out[:hi]
	needData, needStr := j.dataTotal-c.data, j.strTotal-c.str
	if c.arena == nil || cap(c.arena)-len(c.arena) < needData {
		c.arena = make([]byte, 0, needData+predictRest(j.dataTotal, j.at, len(j.buf)))
	}
	arena := c.arena[len(c.arena) : len(c.arena)+needData]
	if c.sb.Cap()-c.sb.Len() < needStr {
		// The strings so far keep the old block; the builder starts anew.
		c.sb = strings.Builder{}
		c.sb.Grow(needStr + predictRest(j.strTotal, j.at, len(j.buf)))
	}
	view := decoder{buf: j.buf, esc: j.esc, bin: j.bin, lazy: j.lazy} // what fill reads
	agg, err := view.fill(c.out, j.recs, lo, arena, &c.sb)
	if err != nil {
		c.err = err
		return
	}
	c.arena = c.arena[:len(c.arena)+needData]
	c.filled, c.data, c.str = hi, j.dataTotal, j.strTotal
	c.agg = c.agg || agg
}

// finishChunked is finish for DecodeKinesisChunked, once every record is
// filled: it reports the first error as finish does.
func (d *decoder) finishChunked() (*Kinesis, error) {
	c := &d.ck
	if d.semErr != nil {
		// Records completed before the error precede it in the payload;
		// report a bad base64 value among them first.
		if c.err != nil {
			return nil, c.err
		}
		if err := d.checkData(d.recs[:d.done], c.filled); err != nil {
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
	if c.err != nil {
		return nil, c.err
	}
	if c.out == nil {
		c.out = []KinesisRecord{} // never nil for a decoded event
	}
	if b := d.out; b != nil {
		if cap(c.out) > cap(b.recs) {
			b.recs = c.out[:0]
		}
		if cap(c.arena) > cap(b.arena) {
			b.arena = c.arena[:0]
		}
	}
	return &Kinesis{Records: c.out, MaybeAggregates: c.agg}, nil
}

// predictRest predicts how much of something the part of a payload of n
// bytes after offset at needs, total being what the part before it needed,
// plus an eighth of the whole for records that vary.
func predictRest(total, at, n int) int {
	if at <= 0 || at >= n {
		return 0
	}
	rest := int(int64(total) * int64(n-at) / int64(at))
	return rest + (total+rest)/8
}
