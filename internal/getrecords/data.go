package getrecords

import (
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Data is the buffer the records of one answer were decoded into: each
// record's Data is a slice of it. A caller that knows when nothing reads
// those slices any more gives it back with Release, and a later answer is
// decoded into it, which spares the garbage collector a buffer the size of
// every answer's data; a caller that does not know leaves it to the garbage
// collector, as with any other answer.
type Data struct {
	b        []byte
	live     atomic.Bool // taken from the pool and not released
	scribble bool        // overwrite b when released (DecodeWire)
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

// Release gives d back: a later answer may be decoded into it, so no
// record's Data of d's answer may be read or written afterwards. It must be
// called at most once per answer; a second call panics. Release of a nil
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
	if cap(d.b) <= maxPooled {
		datas.Put(d)
	}
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
