package event

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
)

// Decoding in two halves. A large payload is parsed by two goroutines: the
// caller parses the Records array from its start, and a helper parses it
// from a guessed element boundary near the middle (the first "},{" after
// it) to its end. The guess is only trusted when the caller's own parse
// arrives at exactly that offset at the start of an element, with no error
// so far: the helper ran the same code from the same parser state (inside
// the Records array, at an element), so its records and errors are the ones
// the caller would have found. When the caller passes the offset inside a
// value (the "},{" was inside a string), or has an error to report already,
// it stops the helper, waits for it and parses on alone: the guess costs
// time, never the result. The result is then built in two halves too, each
// half into its own part of the data arena. Both goroutines end before
// DecodeKinesis returns.

// parallelMin is the payload size from which DecodeKinesis uses two
// goroutines (when GOMAXPROCS allows more than one): below it, starting one
// costs more than it saves.
const parallelMin = 256 << 10

// errAbandoned ends a helper whose owner no longer needs its records.
var errAbandoned = errors.New("event: helper abandoned")

// splitPoint returns the offset of the element a helper starts parsing at:
// the '{' of the first "},{" in the second half of p, or -1 when there is
// none (Lambda sends compact JSON, so records are joined by "},{").
func splitPoint(p []byte) int {
	mid := len(p) / 2
	if k := bytes.Index(p[mid:], []byte("},{")); k >= 0 {
		return mid + k + 2
	}
	return -1
}

// ahead is a helper parsing the Records array from offset at.
type ahead struct {
	d     decoder
	at    int
	end   int   // where its parse ended (past the array's ']')
	err   error // its syntax error, or errAbandoned
	stop  atomic.Bool
	wg    sync.WaitGroup
	whole []wrec // the working records of both: the owner's first, the helper's from index first
	first int
}

// startAhead starts a helper at offset split. The owner's and the helper's
// working records share one allocation, the owner's capped at its estimated
// count, so that, when the estimate holds, joining them copies nothing.
func (d *decoder) startAhead(split int) {
	p := d.buf
	first := bytes.Count(p[:split], []byte{'{'}) / 2
	// The rest is estimated from the first part's density (counting it
	// would cost the caller another pass), with some slack.
	rest := int(int64(first) * int64(len(p)-split) / int64(split))
	total := min(first+rest+rest/16+16, len(p)/minRecordLen)
	first = min(first, total)
	h := &ahead{at: split, whole: getRecs(total), first: first}
	h.d = decoder{buf: p, recs: h.whole[first:first], stop: &h.stop}
	d.recs = h.whole[:0:first]
	d.ahead = h
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.end, h.err = h.d.elements(split)
	}()
}

// abandon stops the helper, if any, and waits for it. The owner's records
// may then grow into the helper's part of the shared allocation.
func (d *decoder) abandon() {
	h := d.ahead
	if h == nil {
		return
	}
	h.stop.Store(true)
	h.wg.Wait()
	d.ahead = nil
	if len(d.recs) == 0 || startsAt(d.recs, h.whole, 0) {
		d.recs = h.whole[:len(d.recs)]
	}
}

// join takes over the helper's result when the owner's parse reached the
// helper's first element (record idx) without an error. It returns the
// helper's end and syntax error, as if the owner had parsed on.
func (d *decoder) join(h *ahead, idx int) (int, error) {
	h.wg.Wait()
	d.ahead, d.joined = nil, true
	if h.err != nil {
		return h.end, h.err
	}
	hd := &h.d
	if hd.semErr != nil {
		var re *RecordError
		if errors.As(hd.semErr, &re) {
			shifted := *re
			shifted.Index += idx
			d.semErr = &shifted
		} else {
			d.semErr = hd.semErr
		}
	}
	// The helper's spans into its own esc and bin move behind the owner's.
	escOff, binOff := uint32(len(d.esc)), uint32(len(d.bin))
	if escOff > 0 && len(hd.esc) > 0 || binOff > 0 && len(hd.bin) > 0 {
		for k := range hd.recs {
			r := &hd.recs[k]
			for f := range nFields {
				off := uint32(0)
				switch {
				case f == fData && r.dkind == dataBin:
					off = binOff
				case r.esc&(1<<f) != 0:
					off = escOff
				}
				r.span[f].off += off
				r.span[f].end += off
			}
		}
	}
	d.esc = append(d.esc, hd.esc...)
	d.bin = append(d.bin, hd.bin...)
	switch {
	case len(hd.recs) == 0:
	case len(d.recs) == 0:
		d.recs = hd.recs
	case len(d.recs) == h.first && startsAt(d.recs, h.whole, 0) && startsAt(hd.recs, h.whole, h.first):
		d.recs = h.whole[:h.first+len(hd.recs)]
	default:
		d.recs = append(d.recs, hd.recs...)
	}
	d.done += hd.done
	d.dataTotal += hd.dataTotal
	d.strTotal += hd.strTotal
	return h.end, nil
}

// startsAt reports whether s starts at element k of whole's array.
func startsAt(s, whole []wrec, k int) bool {
	return len(s) > 0 && k < cap(whole) && &s[0] == &whole[k : k+1][0]
}
