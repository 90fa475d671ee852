package emf

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// The limits of the embedded metric format and of CloudWatch Logs that the
// encoder keeps.
const (
	// maxMetrics is the most metric definitions one directive may hold.
	maxMetrics = 100
	// maxValues is the most values one metric may carry in one document.
	maxValues = 100
	// maxDimensions is the most dimension names in one dimension set.
	maxDimensions = 30
	// lineLimit is the largest line written, newline included. A CloudWatch
	// Logs event holds 256 KiB (minus 26 bytes of overhead); the margin
	// leaves room for whatever a log driver adds.
	lineLimit = 200 << 10
)

// unit is a CloudWatch unit. Only the values below are used: each is on
// the specification's list.
type unit string

const (
	unitCount        unit = "Count"
	unitMilliseconds unit = "Milliseconds"
)

// metric is one metric of a document being packed: a scalar (integer) or a
// value array, of which off values went into earlier documents.
type metric struct {
	name   string
	unit   unit
	scalar bool
	n      int64
	vals   []float64
	off    int
	done   bool
}

// line is one encoded document in encoder.out. A priority line carries
// counts or gauges (or is the first document of its dimension values); the
// others carry only further values of value arrays.
type line struct {
	start, end int
	priority   bool
}

// encoder builds the documents of one Flush into out. Its buffers are kept
// from one Flush to the next, so that a steady stream of flushes does not
// allocate. It is owned by whoever holds Exporter.flushMu.
type encoder struct {
	limit int    // largest line, newline included
	ts    []byte // `{"_aws":{"Timestamp":TS,"CloudWatchMetrics":[{"Namespace":NS,"Dimensions":`
	out   []byte
	lines []line

	ms    []metric
	dims  []byte // the Dimensions value
	root  []byte // the dimension members, each with a leading comma
	extra []byte // further root members of the first document, each with a leading comma
	decl  []byte
	body  []byte
}

// begin starts the documents of one Flush.
func (enc *encoder) begin(namespace string, ms int64) {
	enc.out = enc.out[:0]
	enc.lines = enc.lines[:0]
	b := enc.ts[:0]
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, `,"CloudWatchMetrics":[{"Namespace":`...)
	b = appendString(b, namespace)
	b = append(b, `,"Dimensions":`...)
	enc.ts = b
}

// reset clears the per-document-group state (metrics, dimensions and root
// members) for the next group.
func (enc *encoder) reset() {
	clear(enc.ms) // drop references to value slices
	enc.ms = enc.ms[:0]
	enc.dims = enc.dims[:0]
	enc.root = enc.root[:0]
	enc.extra = enc.extra[:0]
}

func (enc *encoder) addScalar(name string, u unit, n int64) {
	enc.ms = append(enc.ms, metric{name: name, unit: u, scalar: true, n: n})
}

func (enc *encoder) addValues(name string, u unit, vals []float64) {
	if len(vals) == 0 {
		return
	}
	enc.ms = append(enc.ms, metric{name: name, unit: u, vals: vals})
}

// dimensions sets the dimension sets of the group: each element of sets is
// a list of dimension names.
func (enc *encoder) dimensions(sets ...[]string) {
	b := append(enc.dims[:0], '[')
	for i, set := range sets {
		if len(set) > maxDimensions {
			panic("emf: more than 30 dimensions in a set")
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j, name := range set {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, name)
		}
		b = append(b, ']')
	}
	enc.dims = append(b, ']')
}

// dimension adds the value of a dimension as a root member.
func (enc *encoder) dimension(name, value string) {
	enc.root = appendMember(enc.root, name, value)
}

// member adds a string root member to the group's first document, unless
// value is empty.
func (enc *encoder) member(name, value string) {
	if value != "" {
		enc.extra = appendMember(enc.extra, name, value)
	}
}

func appendMember(b []byte, name, value string) []byte {
	b = append(b, ',')
	b = appendString(b, name)
	b = append(b, ':')
	return appendString(b, value)
}

// flush packs the group's metrics into as few documents as the limits
// allow: at most maxMetrics metrics and maxValues values per metric per
// document, each line within enc.limit. Scalars are added before value
// arrays, so the first document carries every count (lines of hundreds of
// kilobytes are never needed for them); a value array with more values
// than fit continues in the next document. The group is reset afterwards.
func (enc *encoder) flush() {
	const (
		metricsOpen  = `,"Metrics":[`
		metricsClose = `]}]}`
		closing      = "}\n"
	)
	// Scalars first, then value arrays, each in the order added.
	slices.SortStableFunc(enc.ms, func(a, b metric) int {
		switch {
		case a.scalar == b.scalar:
			return 0
		case a.scalar:
			return -1
		}
		return 1
	})
	first := true
	for {
		fixed := len(enc.ts) + len(enc.dims) + len(metricsOpen) + len(metricsClose) + len(enc.root) + len(closing)
		if first {
			fixed += len(enc.extra)
		}
		decl, body := enc.decl[:0], enc.body[:0]
		n := 0
		priority := first
	pack:
		for i := range enc.ms {
			m := &enc.ms[i]
			if m.done {
				continue
			}
			if n == maxMetrics {
				break
			}
			declMark, bodyMark := len(decl), len(body)
			if n > 0 {
				decl = append(decl, ',')
			}
			decl = append(decl, `{"Name":`...)
			decl = appendString(decl, m.name)
			decl = append(decl, `,"Unit":"`...)
			decl = append(decl, m.unit...)
			decl = append(decl, `"}`...)
			body = append(body, ',')
			body = appendString(body, m.name)
			body = append(body, ':')
			if m.scalar {
				body = strconv.AppendInt(body, m.n, 10)
				if fixed+len(decl)+len(body) > enc.limit && n > 0 {
					decl, body = decl[:declMark], body[:bodyMark]
					break pack
				}
				m.done = true
				priority = true
				n++
				continue
			}
			body = append(body, '[')
			k := 0
			for m.off < len(m.vals) && k < maxValues {
				mark := len(body)
				if k > 0 {
					body = append(body, ',')
				}
				body = appendFloat(body, m.vals[m.off])
				// +1: the closing bracket.
				if fixed+len(decl)+len(body)+1 > enc.limit && (n > 0 || k > 0) {
					body = body[:mark]
					break
				}
				m.off++
				k++
			}
			if k == 0 {
				decl, body = decl[:declMark], body[:bodyMark]
				break pack
			}
			body = append(body, ']')
			n++
			if m.off == len(m.vals) {
				m.done = true
			}
			if k < maxValues && !m.done {
				break pack // the line is full
			}
		}
		enc.decl, enc.body = decl, body
		if n == 0 {
			break
		}
		start := len(enc.out)
		o := append(enc.out, enc.ts...)
		o = append(o, enc.dims...)
		o = append(o, metricsOpen...)
		o = append(o, decl...)
		o = append(o, metricsClose...)
		o = append(o, enc.root...)
		if first {
			o = append(o, enc.extra...)
		}
		o = append(o, body...)
		o = append(o, closing...)
		enc.out = o
		enc.lines = append(enc.lines, line{start: start, end: len(o), priority: priority})
		first = false
	}
	enc.reset()
}

// appendFloat appends v as a JSON number.
func appendFloat(b []byte, v float64) []byte {
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
