package event

import "github.com/shardsettle/lambdaadapter/internal/jsonscan"

// The records of an invocation are written by one producer, Lambda: the
// same keys in the same order, and the same values in all but a few
// fields. recordFast uses that. When record has parsed a record field by
// field, it keeps it as the template of the next one if its shape allows
// (see tplBuild): its bytes, the places of the values that vary from
// record to record (its slots: partition key, sequence number, event id,
// data, arrival time) and the working record the parse made of it. The next
// record is then read as the template's bytes between the slots, each
// stretch compared as a whole, and a value scanned in each slot by the
// scanner the field-by-field parse uses for it. Bytes equal between the
// slots mean the same keys, in the same order, with the same values
// outside the slots, so the parse field by field would end in the same
// state but for the slots' values and the places of the fields between
// them; anything else (other bytes, a slot's value with escapes, of
// another type or out of range) is left to the parse field by field,
// whose result and errors are therefore the only ones there are.

// noTemplates turns recordFast off, for tests that compare it with the
// field by field parse.
var noTemplates bool

// Kinds of a template's slots.
const (
	slotString = iota // a string field (slot.f) without escapes
	slotData          // kinesis.data as a string without escapes
	slotTS            // kinesis.approximateArrivalTimestamp as a number
)

// maxSlots is the number of slots a template holds at most: a record's
// partitionKey, sequenceNumber, eventID, data and approximateArrivalTimestamp.
const maxSlots = 5

// slot is the place of a varying value in a template record: the payload
// bytes [start, end) (a string's quotes included).
type slot struct {
	start, end uint32
	kind, f    uint8
}

// template is a record parsed field by field that recordFast reads the
// next records by.
type template struct {
	ok         bool
	start, end uint32 // the record's bytes, '{' to '}'
	n          int
	slots      [maxSlots]slot
	rec        wrec // what record made of it
	// before, for each field of rec between the slots (keptFields), is the
	// number of slots before it: the field moves by what they gain.
	before [nFields]uint8
}

// keptFields are the string fields a template's record holds between its
// slots, whose values the next record repeats byte for byte.
var keptFields = [...]int{fEventSource, fEventSourceARN, fAWSRegion}

// tplBuild gathers the template of the record being parsed field by field.
// A record is a template when each known key appears in it once at most,
// no string it keeps has escapes (or invalid UTF-8, which record unescapes
// too) and its data is a string, null or absent: then the fields a record
// of the same bytes between the slots holds are the template's, apart from
// the slots' values, and the decoder's other state (d.last, d.nextRec,
// d.nextKin) is left as parsing it field by field would leave it.
type tplBuild struct {
	bad   bool
	seen  uint16 // bit k: key id k appeared
	n     int
	slots [maxSlots]slot
}

// key notes key id k of the record being parsed.
func (t *tplBuild) key(k int) {
	if k == keyUnknown {
		return
	}
	if t.seen&(1<<k) != 0 {
		t.bad = true
	}
	t.seen |= 1 << k
}

// add notes a slot of the record being parsed.
func (t *tplBuild) add(start, end int, kind, f uint8) {
	if t.n == maxSlots { // cannot happen with each key once; be safe
		t.bad = true
		return
	}
	t.slots[t.n] = slot{uint32(start), uint32(end), kind, f}
	t.n++
}

// keep makes the record r, parsed field by field from payload bytes
// [start, end), the template when its shape allows it, or leaves no
// template.
func (d *decoder) keep(r *wrec, start, end int) {
	t, b := &d.tpl, &d.tb
	t.ok = !b.bad && r.esc == 0 && r.dkind != dataBin
	if !t.ok {
		return
	}
	t.start, t.end, t.n, t.slots, t.rec = uint32(start), uint32(end), b.n, b.slots, *r
	t.rec.dup = 0
	for _, f := range keptFields {
		k := 0
		for k < t.n && t.slots[k].start < r.span[f].off {
			k++
		}
		t.before[f] = uint8(k)
	}
}

// repeats reports whether b holds lit at pos.
func repeats(b []byte, pos int, lit []byte) bool {
	return len(b)-pos >= len(lit) && string(b[pos:pos+len(lit)]) == string(lit)
}

// plainString returns the index past the string whose quote is at pos
// when it has no escapes and is ASCII (jsonscan.String's flags 0), as a
// template's slot requires.
func plainString(b []byte, pos int) (int, bool) {
	if b[pos] != '"' {
		return 0, false
	}
	end, flags, err := jsonscan.String(b, pos)
	return end, err == nil && flags == 0
}

// recordFast reads the record whose '{' is at i by the template into r,
// which is zero. It returns the index past the record's '}' and true, or
// false having changed nothing (r included) when the record's bytes between
// the slots differ from the template's or a slot's value is not what the
// template's was (a string with escapes, data or a number of another
// form): record then parses it field by field.
func (d *decoder) recordFast(i int, r *wrec) (int, bool) {
	t, b := &d.tpl, d.buf
	var out wrec
	var shift [maxSlots + 1]int // shift[k]: the length the slots before k gained over the template's
	pos, seg := i, int(t.start)
	for k := 0; k < t.n; k++ {
		s := &t.slots[k]
		if !repeats(b, pos, b[seg:s.start]) {
			return i, false
		}
		pos += int(s.start) - seg
		if pos >= len(b) {
			return i, false
		}
		var end int
		var ok bool
		switch s.kind {
		case slotTS:
			if c := b[pos]; c != '-' && !isDigit(c) {
				return i, false
			}
			var err error
			if end, err = jsonscan.Number(b, pos); err != nil {
				return i, false
			}
			if out.ts, ok = jsonscan.ParseFloat(b[pos:end]); !ok {
				return i, false
			}
			out.hasTS = true
		case slotData:
			if d.lazy && b[pos] == '"' {
				end, ok = d.lazyData(pos)
			}
			if !ok {
				if end, ok = plainString(b, pos); !ok {
					return i, false
				}
			}
			out.span[fData] = span{uint32(pos + 1), uint32(end - 1)}
		default:
			if end, ok = plainString(b, pos); !ok {
				return i, false
			}
			out.span[s.f] = span{uint32(pos + 1), uint32(end - 1)}
		}
		shift[k+1] = shift[k] + (end - pos) - int(s.end-s.start)
		pos, seg = end, int(s.end)
	}
	if !repeats(b, pos, b[seg:t.end]) {
		return i, false
	}
	pos += int(t.end) - seg
	// The fields between the slots are where the template's are, moved by
	// what the slots before them gained.
	tr := &t.rec
	for _, f := range keptFields {
		if tr.set&(1<<f) == 0 {
			continue
		}
		sp := tr.span[f]
		off := int(sp.off) - int(t.start) + i + shift[t.before[f]]
		out.span[f] = span{uint32(off), uint32(off + int(sp.end-sp.off))}
		out.orig[f] = tr.orig[f]
	}
	out.set, out.dkind, out.kin = tr.set, tr.dkind, tr.kin
	if !out.hasTS {
		out.ts, out.hasTS = tr.ts, tr.hasTS // null (0) or absent, as in the template
	}
	*r = out
	return pos, true
}
