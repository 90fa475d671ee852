package getrecords

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/internal/pool"
)

// Data is the storage the records of one answer were decoded into: the
// buffer each record's Data is a slice of, and the Records slice with the
// string pointers and timestamps its records point to. A caller that knows
// when nothing reads the records any more gives it back with Release, and
// a later answer is decoded into it, which spares the garbage collector
// most of an answer; a caller that does not know leaves it to the garbage
// collector, as with any other answer. The strings themselves, the next
// shard iterator, MillisBehindLatest and ChildShards are not part of it.
type Data struct {
	b        []byte
	live     atomic.Bool // taken from the pool and not released
	scribble bool        // overwrite b when released (DecodeWire)

	// The answer's records, string pointers and timestamps, reused with b
	// (nil until an answer used them).
	recs  []types.Record
	strs  []string
	times []time.Time
}

// slices returns zero slices of the lengths given for an answer decoded
// into d, reusing d's when they are large enough.
func (d *Data) slices(nstr, ntime, nrec int) ([]string, []time.Time, []types.Record) {
	if cap(d.strs) < nstr {
		d.strs = make([]string, nstr)
	}
	if cap(d.times) < ntime {
		d.times = make([]time.Time, ntime)
	}
	if cap(d.recs) < nrec {
		d.recs = make([]types.Record, nrec)
	}
	// Zero: Release cleared what the last answer used.
	return d.strs[:nstr:nstr], d.times[:ntime:ntime], d.recs[:nrec:nrec]
}

// dataKey is the key of an answer's Data in its ResultMetadata.
type dataKey struct{}

// DataOf returns the Data the records of out were decoded into by Fast, or
// nil: for an answer the SDK's deserializer decoded, one without record
// data, or one that did not come from a call with Fast.
func DataOf(out *kinesis.GetRecordsOutput) *Data {
	if out == nil {
		return nil
	}
	d, _ := out.ResultMetadata.Get(dataKey{}).(*Data)
	return d
}

// Release gives d back: a later answer may be decoded into it, so nothing
// of d's answer's records (their Data, their fields, the Records slice) may
// be read or written afterwards; the records are cleared at once. It must
// be called at most once per answer; a second call panics. Release of a nil
// Data does nothing.
func (d *Data) Release() {
	if d == nil {
		return
	}
	if !d.live.CompareAndSwap(true, false) {
		panic("getrecords: Data released twice")
	}
	if d.scribble {
		d.scribble = false
		for i := range d.b {
			d.b[i] = 0xDB
		}
	}
	// The records, their string pointers and timestamps are zeroed, so the
	// pool keeps no answer's strings alive (and a record read after the
	// release has none).
	clear(d.recs[:cap(d.recs)])
	clear(d.strs[:cap(d.strs)])
	clear(d.times[:cap(d.times)])
	if cap(d.b) <= maxPooled {
		datas.Put(d)
	}
}

// ScribbleOnRelease makes Release overwrite d's buffer with 0xDB, so that a
// reader that kept a record's Data past the release reads garbage (tests
// of recycled messages).
func (d *Data) ScribbleOnRelease() {
	if d != nil {
		d.scribble = true
	}
}

// ReleaseRecords is Release, except that the buffer the records' Data are
// slices of is left to them: it stays valid and unchanged, and a later
// answer is decoded into new memory. The Records slice, its string
// pointers and timestamps are reused as after Release.
func (d *Data) ReleaseRecords() {
	if d == nil {
		return
	}
	d.b, d.scribble = nil, false
	d.Release()
}

// datas are the released Data buffers.
var datas = sync.Pool{New: func() any { return new(Data) }}

// newData returns a Data of n bytes: a released one when it is large
// enough, else a new buffer. A released buffer that is too small is
// replaced by one a quarter larger than n, so answers that grow a little
// from one to the next do not each allocate anew; a fresh one (nothing was
// released) is exactly n, as before pooling, for callers that never
// release.
func newData(n int) *Data {
	d := datas.Get().(*Data)
	if pool.Oversized(cap(d.b), n) {
		d = new(Data) // see pool.Oversized
	}
	switch {
	case cap(d.b) >= n:
		d.b = d.b[:n]
	case cap(d.b) == 0:
		d.b = make([]byte, n)
	default:
		d.b = make([]byte, n, n+n/4)
	}
	d.live.Store(true)
	return d
}
