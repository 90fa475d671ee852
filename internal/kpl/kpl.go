package kpl

import (
	"crypto/fips140"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Record is one user record of an aggregate.
//
// A Record returned by Deaggregate is plain data, safe to read from many
// goroutines; see Deaggregate for the memory it shares.
type Record struct {
	// PartitionKey is the user record's partition key.
	PartitionKey string
	// ExplicitHashKey is the user record's explicit hash key (a decimal
	// number, as the KPL writes it), or "" when the record has none.
	ExplicitHashKey string
	// Data is the user record's payload. From Deaggregate it aliases the
	// aggregate passed in (no copy) and its capacity equals its length, so
	// appending to it copies instead of overwriting the bytes that follow.
	// It is empty but non-nil for a user record with empty data.
	Data []byte
}

// Magic is the 4-byte prefix of every aggregated record.
var Magic = [4]byte{0xF3, 0x89, 0x9A, 0xC2}

// ErrMalformed is matched (with errors.Is) by every error Deaggregate
// returns: the data has the magic prefix and a matching MD5 digest, so it
// is an aggregate, but its protobuf message is not a valid
// AggregatedRecord.
var ErrMalformed = errors.New("kpl: malformed aggregated record")

// Field numbers of the KPL's messages.
const (
	fieldPartitionKeyTable    protowire.Number = 1 // AggregatedRecord.partition_key_table
	fieldExplicitHashKeyTable protowire.Number = 2 // AggregatedRecord.explicit_hash_key_table
	fieldRecords              protowire.Number = 3 // AggregatedRecord.records

	fieldPartitionKeyIndex    protowire.Number = 1 // Record.partition_key_index
	fieldExplicitHashKeyIndex protowire.Number = 2 // Record.explicit_hash_key_index
	fieldData                 protowire.Number = 3 // Record.data
	fieldTags                 protowire.Number = 4 // Record.tags

	fieldTagKey   protowire.Number = 1 // Tag.key
	fieldTagValue protowire.Number = 2 // Tag.value
)

const (
	digestSize = md5.Size
	// overhead is the length of the framing around the protobuf message.
	overhead = len(Magic) + digestSize
	// minRecordLen is the length of the smallest valid Record message: a
	// one-byte tag and one-byte varint for partition_key_index, a one-byte
	// tag and one-byte length for empty data.
	minRecordLen = 4
)

// malformedError is the error Deaggregate returns. It matches ErrMalformed.
type malformedError struct {
	record int // index of the user record, or -1 for the aggregate itself
	msg    string
}

func (e *malformedError) Error() string {
	if e.record < 0 {
		return "kpl: aggregated record: " + e.msg
	}
	return fmt.Sprintf("kpl: user record %d: %s", e.record, e.msg)
}

func (e *malformedError) Unwrap() error { return ErrMalformed }

func malformed(record int, format string, args ...any) error {
	return &malformedError{record: record, msg: fmt.Sprintf(format, args...)}
}

// digest returns the MD5 digest of b. The KPL format uses MD5 as a
// checksum, not for security, so it is computed even when the program runs
// with GODEBUG=fips140=only (where crypto/md5 would otherwise panic).
func digest(b []byte) (sum [digestSize]byte) {
	fips140.WithoutEnforcement(func() { sum = md5.Sum(b) })
	return sum
}

// HasMagic reports whether data starts with Magic: it may be an aggregated
// record (IsAggregate says whether it is one).
func HasMagic(data []byte) bool {
	return len(data) >= len(Magic) && [len(Magic)]byte(data) == Magic
}

// IsAggregate reports whether data is an aggregated record: it starts with
// Magic, is longer than Magic plus an MD5 digest, and its last 16 bytes are
// the MD5 digest of the bytes between. Data with the magic prefix whose
// digest does not match is not an aggregate: user data may start with these
// bytes, and the KCL treats it the same way. IsAggregate does not parse the
// protobuf message, so Deaggregate may still report it malformed.
//
// IsAggregate is safe for concurrent use and does not retain data.
func IsAggregate(data []byte) bool {
	if len(data) <= overhead || !HasMagic(data) {
		return false
	}
	msg := data[len(Magic) : len(data)-digestSize]
	return digest(msg) == [digestSize]byte(data[len(data)-digestSize:])
}

// Deaggregate splits an aggregated record into its user records, in the
// order they appear in the aggregate.
//
// It returns (nil, false, nil) when data is not an aggregate (see
// IsAggregate): the caller handles data as one ordinary record. When data is
// an aggregate it returns (records, true, nil), or (nil, true, err) when the
// protobuf message is malformed; err matches ErrMalformed and names the
// problem, the user record (counted from 0) and the byte offset in data.
// See the package documentation for what counts as malformed.
//
// The records' Data alias data, and their keys are shared between records
// using the same table entry; nothing is copied. Deaggregate allocates a
// constant number of times per call (the result slice, the key tables and
// one buffer holding all keys), and at most about ten times len(data) bytes
// even for hostile input. It never panics, is safe for concurrent use and
// does not modify data.
func Deaggregate(data []byte) ([]Record, bool, error) {
	if !IsAggregate(data) {
		return nil, false, nil
	}
	d := decoder{msg: data[len(Magic) : len(data)-digestSize]}
	records, err := d.decode()
	if err != nil {
		return nil, true, err
	}
	return records, true, nil
}

// decoder decodes one AggregatedRecord message in three passes over its
// top-level fields: the first validates the framing and counts table entries
// and records, the second fills the key tables, the third decodes the
// records. Protobuf allows fields in any order, so the tables must be
// complete before a record's indexes can be resolved.
type decoder struct {
	msg []byte
}

// off returns the offset in the aggregate (magic included) of b, a suffix of
// d.msg.
func (d *decoder) off(b []byte) int { return len(Magic) + len(d.msg) - len(b) }

func (d *decoder) decode() ([]Record, error) {
	// Pass 1: framing and counts.
	var nPK, nEHK, nRecords, keyBytes int
	for b := d.msg; len(b) > 0; {
		at := d.off(b)
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, malformed(-1, "field tag at byte %d: %v", at, wireError(n))
		}
		b = b[n:]
		switch num {
		case fieldPartitionKeyTable, fieldExplicitHashKeyTable, fieldRecords:
			name := topLevelName(num)
			if typ != protowire.BytesType {
				return nil, malformed(-1, "%s at byte %d: wire type %s, want bytes", name, at, typeName(typ))
			}
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, malformed(-1, "%s at byte %d: %v", name, at, wireError(n))
			}
			b = b[n:]
			switch num {
			case fieldPartitionKeyTable:
				nPK++
				keyBytes += len(v)
			case fieldExplicitHashKeyTable:
				nEHK++
				keyBytes += len(v)
			default:
				if len(v) < minRecordLen {
					// Necessarily malformed: report why now, before
					// allocating for records that cannot be valid.
					if _, err := d.record(v, nRecords, at, nil, nil); err != nil {
						return nil, err
					}
				}
				nRecords++
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, malformed(-1, "field %d at byte %d: %v", num, at, wireError(n))
			}
			b = b[n:]
		}
	}
	if nRecords == 0 {
		return nil, malformed(-1, "no user records")
	}

	// Pass 2: the key tables, as substrings of one string (a Builder never
	// changes bytes it has written, so earlier substrings stay valid).
	var keys strings.Builder
	keys.Grow(keyBytes)
	table := make([]string, nPK+nEHK)
	pks, ehks := table[:nPK:nPK], table[nPK:]
	pk, ehk := 0, 0
	for b := d.msg; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b) // validated in pass 1
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if num == fieldPartitionKeyTable || num == fieldExplicitHashKeyTable {
			v, _ := protowire.ConsumeBytes(b)
			keys.Write(v)
			all := keys.String()
			if num == fieldPartitionKeyTable {
				pks[pk] = all[len(all)-len(v):]
				pk++
			} else {
				ehks[ehk] = all[len(all)-len(v):]
				ehk++
			}
		}
		b = b[n:]
	}

	// Pass 3: the records.
	records := make([]Record, nRecords)
	i := 0
	for b := d.msg; len(b) > 0; {
		at := d.off(b)
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if num == fieldRecords {
			v, _ := protowire.ConsumeBytes(b)
			r, err := d.record(v, i, at, pks, ehks)
			if err != nil {
				return nil, err
			}
			records[i] = r
			i++
		}
		b = b[n:]
	}
	return records, nil
}

// record decodes the Record message b, user record i whose field starts at
// byte start, resolving its key indexes in pks and ehks.
func (d *decoder) record(b []byte, i, start int, pks, ehks []string) (Record, error) {
	var (
		r             Record
		pkIndex       uint64
		ehkIndex      uint64
		hasPK, hasEHK bool
		hasData       bool
	)
	for len(b) > 0 {
		at := d.off(b)
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Record{}, malformed(i, "field tag at byte %d: %v", at, wireError(n))
		}
		b = b[n:]
		var want protowire.Type
		switch num {
		case fieldPartitionKeyIndex, fieldExplicitHashKeyIndex:
			want = protowire.VarintType
		case fieldData, fieldTags:
			want = protowire.BytesType
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return Record{}, malformed(i, "field %d at byte %d: %v", num, at, wireError(n))
			}
			b = b[n:]
			continue
		}
		name := recordFieldName(num)
		if typ != want {
			return Record{}, malformed(i, "%s at byte %d: wire type %s, want %s", name, at, typeName(typ), typeName(want))
		}
		if want == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return Record{}, malformed(i, "%s at byte %d: %v", name, at, wireError(n))
			}
			b = b[n:]
			// A repeated scalar field: the last value wins, as in protobuf.
			if num == fieldPartitionKeyIndex {
				pkIndex, hasPK = v, true
			} else {
				ehkIndex, hasEHK = v, true
			}
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return Record{}, malformed(i, "%s at byte %d: %v", name, at, wireError(n))
		}
		b = b[n:]
		if num == fieldData {
			r.Data, hasData = v[:len(v):len(v)], true
			continue
		}
		if err := d.tag(v, i, at); err != nil {
			return Record{}, err
		}
	}
	switch {
	case !hasPK:
		return Record{}, malformed(i, "no partition key index (record at byte %d)", start)
	case !hasData:
		return Record{}, malformed(i, "no data (record at byte %d)", start)
	case pkIndex >= uint64(len(pks)):
		return Record{}, malformed(i, "partition key index %d out of range (table has %d)", pkIndex, len(pks))
	case hasEHK && ehkIndex >= uint64(len(ehks)):
		return Record{}, malformed(i, "explicit hash key index %d out of range (table has %d)", ehkIndex, len(ehks))
	}
	r.PartitionKey = pks[pkIndex]
	if hasEHK {
		r.ExplicitHashKey = ehks[ehkIndex]
	}
	return r, nil
}

// tag validates the Tag message b of user record i, whose field starts at
// byte start: a key is required, and both fields are strings.
func (d *decoder) tag(b []byte, i, start int) error {
	hasKey := false
	for len(b) > 0 {
		at := d.off(b)
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return malformed(i, "tag field tag at byte %d: %v", at, wireError(n))
		}
		b = b[n:]
		if (num == fieldTagKey || num == fieldTagValue) && typ != protowire.BytesType {
			return malformed(i, "tag %s at byte %d: wire type %s, want bytes", tagFieldName(num), at, typeName(typ))
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return malformed(i, "tag field %d at byte %d: %v", num, at, wireError(n))
		}
		b = b[n:]
		hasKey = hasKey || num == fieldTagKey
	}
	if !hasKey {
		return malformed(i, "tag without key (tag at byte %d)", start)
	}
	return nil
}

// wireError describes protowire's error code n. The texts are ours:
// protowire's own carry a "proto:" prefix with a deliberately unstable
// space. Its error values are identified by comparing them with the ones
// it returns for known bad input.
func wireError(n int) string {
	switch protowire.ParseError(n) {
	case io.ErrUnexpectedEOF:
		return "truncated"
	case errFieldNumber:
		return "invalid field number"
	case errOverflow:
		return "varint longer than 64 bits"
	case errReserved:
		return "reserved wire type"
	case errEndGroup:
		return "end group without matching start group"
	default:
		return "invalid protobuf encoding"
	}
}

var (
	errFieldNumber = protowire.ParseError(consumeTagN([]byte{0x00}))
	errOverflow    = protowire.ParseError(consumeTagN([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}))
	errReserved    = protowire.ParseError(protowire.ConsumeFieldValue(1, 6, nil))
	errEndGroup    = protowire.ParseError(protowire.ConsumeFieldValue(1, protowire.EndGroupType, nil))
)

func consumeTagN(b []byte) int {
	_, _, n := protowire.ConsumeTag(b)
	return n
}

func topLevelName(num protowire.Number) string {
	switch num {
	case fieldPartitionKeyTable:
		return "partition_key_table entry"
	case fieldExplicitHashKeyTable:
		return "explicit_hash_key_table entry"
	default:
		return "record"
	}
}

func recordFieldName(num protowire.Number) string {
	switch num {
	case fieldPartitionKeyIndex:
		return "partition_key_index"
	case fieldExplicitHashKeyIndex:
		return "explicit_hash_key_index"
	case fieldData:
		return "data"
	default:
		return "tags"
	}
}

func tagFieldName(num protowire.Number) string {
	if num == fieldTagKey {
		return "key"
	}
	return "value"
}

func typeName(typ protowire.Type) string {
	switch typ {
	case protowire.VarintType:
		return "varint"
	case protowire.Fixed32Type:
		return "fixed32"
	case protowire.Fixed64Type:
		return "fixed64"
	case protowire.BytesType:
		return "bytes"
	case protowire.StartGroupType:
		return "start group"
	case protowire.EndGroupType:
		return "end group"
	default:
		return fmt.Sprintf("%d (reserved)", typ)
	}
}

// Aggregate encodes records as one aggregated record: Magic, the protobuf
// AggregatedRecord message, and the MD5 digest of the message. The partition
// key and explicit hash key tables hold each distinct key once, in order of
// first use; a record whose ExplicitHashKey is "" gets no
// explicit_hash_key_index. Tags are never written.
//
// Aggregate does not enforce Kinesis limits (1 MiB per record, 256 bytes of
// partition key): keeping the result within them is the caller's job, as is
// not aggregating zero records, whose encoding (Magic and the digest of an
// empty message, 20 bytes) Deaggregate reports as not an aggregate.
// Aggregate allocates the result once, is safe for concurrent use and does
// not retain records.
func Aggregate(records []Record) []byte {
	pkIndex := make(map[string]uint64)
	ehkIndex := make(map[string]uint64)
	var pks, ehks []string
	size := 0
	for _, r := range records {
		if _, ok := pkIndex[r.PartitionKey]; !ok {
			pkIndex[r.PartitionKey] = uint64(len(pks))
			pks = append(pks, r.PartitionKey)
			size += protowire.SizeTag(fieldPartitionKeyTable) + protowire.SizeBytes(len(r.PartitionKey))
		}
		if _, ok := ehkIndex[r.ExplicitHashKey]; !ok && r.ExplicitHashKey != "" {
			ehkIndex[r.ExplicitHashKey] = uint64(len(ehks))
			ehks = append(ehks, r.ExplicitHashKey)
			size += protowire.SizeTag(fieldExplicitHashKeyTable) + protowire.SizeBytes(len(r.ExplicitHashKey))
		}
		n := recordSize(r, pkIndex, ehkIndex)
		size += protowire.SizeTag(fieldRecords) + protowire.SizeBytes(n)
	}

	out := make([]byte, 0, overhead+size)
	out = append(out, Magic[:]...)
	for _, k := range pks {
		out = protowire.AppendTag(out, fieldPartitionKeyTable, protowire.BytesType)
		out = protowire.AppendString(out, k)
	}
	for _, k := range ehks {
		out = protowire.AppendTag(out, fieldExplicitHashKeyTable, protowire.BytesType)
		out = protowire.AppendString(out, k)
	}
	for _, r := range records {
		out = protowire.AppendTag(out, fieldRecords, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(recordSize(r, pkIndex, ehkIndex)))
		out = protowire.AppendTag(out, fieldPartitionKeyIndex, protowire.VarintType)
		out = protowire.AppendVarint(out, pkIndex[r.PartitionKey])
		if r.ExplicitHashKey != "" {
			out = protowire.AppendTag(out, fieldExplicitHashKeyIndex, protowire.VarintType)
			out = protowire.AppendVarint(out, ehkIndex[r.ExplicitHashKey])
		}
		out = protowire.AppendTag(out, fieldData, protowire.BytesType)
		out = protowire.AppendBytes(out, r.Data)
	}
	sum := digest(out[len(Magic):])
	return append(out, sum[:]...)
}

// recordSize returns the length of r's Record message, its indexes already
// in pkIndex and ehkIndex.
func recordSize(r Record, pkIndex, ehkIndex map[string]uint64) int {
	n := protowire.SizeTag(fieldPartitionKeyIndex) + protowire.SizeVarint(pkIndex[r.PartitionKey])
	if r.ExplicitHashKey != "" {
		n += protowire.SizeTag(fieldExplicitHashKeyIndex) + protowire.SizeVarint(ehkIndex[r.ExplicitHashKey])
	}
	return n + protowire.SizeTag(fieldData) + protowire.SizeBytes(len(r.Data))
}
