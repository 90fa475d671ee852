package kpl_test

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shardsettle/lambdaadapter/internal/kpl"
)

// frame wraps a protobuf message as an aggregated record: magic, message,
// MD5 of the message.
func frame(msg []byte) []byte {
	sum := md5.Sum(msg)
	out := append(kpl.Magic[:], msg...)
	return append(out, sum[:]...)
}

// Protobuf builders for hand-made messages.

func pkEntry(b []byte, key string) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendString(b, key)
}

func ehkEntry(b []byte, key string) []byte {
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendString(b, key)
}

func recordEntry(b []byte, rec []byte) []byte {
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendBytes(b, rec)
}

func varintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func bytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// rec builds a Record message with partition_key_index pk and data.
func rec(pk uint64, data string) []byte {
	return bytesField(varintField(nil, 1, pk), 3, []byte(data))
}

// recEHK builds a Record message with both key indexes and data.
func recEHK(pk, ehk uint64, data string) []byte {
	return bytesField(varintField(varintField(nil, 1, pk), 2, ehk), 3, []byte(data))
}

// sameBytes compares []byte with bytes.Equal: nil equals empty, and it is
// fast on large data where cmp's element-wise comparison is not.
var sameBytes = cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })

func mustDeaggregate(t testing.TB, data []byte) []kpl.Record {
	t.Helper()
	got, ok, err := kpl.Deaggregate(data)
	if err != nil || !ok {
		t.Fatalf("Deaggregate = ok %v, err %v; want an aggregate", ok, err)
	}
	return got
}

// genRecords returns n user records over pks partition keys, every third
// with one of three explicit hash keys, data of dataLen bytes (some empty).
func genRecords(n, pks, dataLen int) []kpl.Record {
	records := make([]kpl.Record, n)
	for i := range records {
		r := &records[i]
		r.PartitionKey = "pk-" + strconv.Itoa(i%pks)
		if i%3 == 0 {
			r.ExplicitHashKey = strconv.Itoa(i % 9 * 37813) // decimal, as the KPL writes them
		}
		if i%17 != 5 {
			r.Data = bytes.Repeat([]byte{byte(i)}, dataLen)
		}
	}
	return records
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		records []kpl.Record
	}{
		{"one record", []kpl.Record{{PartitionKey: "pk", Data: []byte("hello")}}},
		{"empty data", []kpl.Record{{PartitionKey: "pk"}, {PartitionKey: "pk", Data: []byte{}}}},
		{"empty partition key", []kpl.Record{{PartitionKey: "", Data: []byte("x")}}},
		{"explicit hash keys", []kpl.Record{
			{PartitionKey: "a", ExplicitHashKey: "340282366920938463463374607431768211455", Data: []byte("1")},
			{PartitionKey: "b", Data: []byte("2")},
			{PartitionKey: "a", ExplicitHashKey: "0", Data: []byte("3")},
			{PartitionKey: "c", ExplicitHashKey: "340282366920938463463374607431768211455", Data: []byte("4")},
		}},
		{"unicode and binary", []kpl.Record{
			{PartitionKey: "clé-ü-日本", Data: []byte{0, 0xff, 0xF3, 0x89, 0x9A, 0xC2}},
			{PartitionKey: "\xff\xfe", Data: []byte("not UTF-8 key")},
		}},
		{"1000 records", genRecords(1000, 7, 50)},
		{"large data", []kpl.Record{{PartitionKey: "big", Data: bytes.Repeat([]byte("abc"), 100_000)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := kpl.Aggregate(tt.records)
			if !kpl.IsAggregate(data) {
				t.Fatal("IsAggregate(Aggregate(records)) = false")
			}
			got := mustDeaggregate(t, data)
			if diff := cmp.Diff(tt.records, got, sameBytes); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAggregateTables(t *testing.T) {
	records := []kpl.Record{
		{PartitionKey: "b", Data: []byte("0")},
		{PartitionKey: "a", ExplicitHashKey: "9", Data: []byte("1")},
		{PartitionKey: "b", ExplicitHashKey: "8", Data: []byte("2")},
		{PartitionKey: "c", ExplicitHashKey: "9", Data: []byte("3")},
		{PartitionKey: "a", Data: nil},
	}
	data := kpl.Aggregate(records)
	if cap(data) != len(data) {
		t.Errorf("Aggregate: cap %d, len %d; want one allocation of the exact size", cap(data), len(data))
	}

	// Decode field by field with protowire, independently of Deaggregate.
	if !bytes.Equal(data[:4], kpl.Magic[:]) {
		t.Fatalf("prefix % x, want magic", data[:4])
	}
	msg := data[4 : len(data)-16]
	if sum := md5.Sum(msg); !bytes.Equal(sum[:], data[len(data)-16:]) {
		t.Fatalf("digest % x, want % x", data[len(data)-16:], sum)
	}
	type field struct {
		Num   protowire.Number
		Type  protowire.Type
		Value any // uint64, string, or []field for records
	}
	var parse func(b []byte, nested bool) []field
	parse = func(b []byte, nested bool) []field {
		var fs []field
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				t.Fatalf("tag: %v", protowire.ParseError(n))
			}
			b = b[n:]
			switch typ {
			case protowire.VarintType:
				v, n := protowire.ConsumeVarint(b)
				if n < 0 {
					t.Fatalf("varint: %v", protowire.ParseError(n))
				}
				b = b[n:]
				fs = append(fs, field{num, typ, v})
			case protowire.BytesType:
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					t.Fatalf("bytes: %v", protowire.ParseError(n))
				}
				b = b[n:]
				if num == 3 && !nested {
					fs = append(fs, field{num, typ, parse(v, true)})
				} else {
					fs = append(fs, field{num, typ, string(v)})
				}
			default:
				t.Fatalf("field %d: unexpected wire type %d", num, typ)
			}
		}
		return fs
	}
	const (
		varint = protowire.VarintType
		bytes_ = protowire.BytesType
	)
	want := []field{
		{1, bytes_, "b"},
		{1, bytes_, "a"},
		{1, bytes_, "c"},
		{2, bytes_, "9"},
		{2, bytes_, "8"},
		{3, bytes_, []field{{1, varint, uint64(0)}, {3, bytes_, "0"}}},
		{3, bytes_, []field{{1, varint, uint64(1)}, {2, varint, uint64(0)}, {3, bytes_, "1"}}},
		{3, bytes_, []field{{1, varint, uint64(0)}, {2, varint, uint64(1)}, {3, bytes_, "2"}}},
		{3, bytes_, []field{{1, varint, uint64(2)}, {2, varint, uint64(0)}, {3, bytes_, "3"}}},
		{3, bytes_, []field{{1, varint, uint64(1)}, {3, bytes_, ""}}},
	}
	if diff := cmp.Diff(want, parse(msg, false)); diff != "" {
		t.Errorf("Aggregate's message (-want +got):\n%s", diff)
	}
}

// TestKnownVector decodes an aggregate built byte by byte as the KPL writes
// it, with a tag (which the KPL's own aggregator never writes, but the
// format allows).
func TestKnownVector(t *testing.T) {
	msg := []byte{
		0x0a, 0x01, 'a', // partition_key_table: "a"
		0x0a, 0x01, 'b', // partition_key_table: "b"
		0x12, 0x01, '1', // explicit_hash_key_table: "1"
		0x1a, 0x05, // records, 5 bytes
		0x08, 0x00, // partition_key_index: 0
		0x1a, 0x01, 'x', // data: "x"
		0x1a, 0x08, // records, 8 bytes
		0x08, 0x01, // partition_key_index: 1
		0x10, 0x00, // explicit_hash_key_index: 0
		0x1a, 0x02, 'y', 'z', // data: "yz"
		0x1a, 0x0c, // records, 12 bytes
		0x08, 0x00, // partition_key_index: 0
		0x1a, 0x00, // data: ""
		0x22, 0x06, // tags, 6 bytes
		0x0a, 0x01, 'k', // key: "k"
		0x12, 0x01, 'v', // value: "v"
	}
	sum := md5.Sum(msg)
	data := append([]byte{0xF3, 0x89, 0x9A, 0xC2}, msg...)
	data = append(data, sum[:]...)

	got := mustDeaggregate(t, data)
	want := []kpl.Record{
		{PartitionKey: "a", Data: []byte("x")},
		{PartitionKey: "b", ExplicitHashKey: "1", Data: []byte("yz")},
		{PartitionKey: "a", Data: []byte{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Deaggregate (-want +got):\n%s", diff)
	}

	// Aggregate writes the same bytes, minus the tag.
	withoutTag := bytes.Clone(msg[:len(msg)-14])
	withoutTag = append(withoutTag, 0x1a, 0x04, 0x08, 0x00, 0x1a, 0x00)
	if diff := cmp.Diff(frame(withoutTag), kpl.Aggregate(want)); diff != "" {
		t.Errorf("Aggregate (-want +got):\n%s", diff)
	}
}

func TestDataAliasesInput(t *testing.T) {
	data := kpl.Aggregate([]kpl.Record{
		{PartitionKey: "a", Data: []byte("first")},
		{PartitionKey: "a", Data: []byte("second")},
	})
	got := mustDeaggregate(t, data)
	for i, r := range got {
		if cap(r.Data) != len(r.Data) {
			t.Errorf("record %d: cap(Data) %d != len %d", i, cap(r.Data), len(r.Data))
		}
		if i := bytes.Index(data, r.Data); i < 0 || &data[i] != &r.Data[0] {
			t.Errorf("record %d: Data does not alias the input", i)
		}
	}
	if got[0].PartitionKey != got[1].PartitionKey {
		t.Fatal("partition keys differ")
	}
	_ = append(got[0].Data, "!!!"...)
	if string(got[1].Data) != "second" {
		t.Errorf("appending to one record's Data changed the next: %q", got[1].Data)
	}
}

func TestNotAggregate(t *testing.T) {
	valid := kpl.Aggregate([]kpl.Record{{PartitionKey: "pk", Data: []byte("x")}})
	corrupt := bytes.Clone(valid)
	corrupt[len(corrupt)-1] ^= 1
	corruptMsg := bytes.Clone(valid)
	corruptMsg[5] ^= 1
	wrongMagic := bytes.Clone(valid)
	wrongMagic[0] = 0xF4
	emptyMsg := frame(nil) // magic and the digest of an empty message: 20 bytes

	tests := []struct {
		name string
		data []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"magic only", kpl.Magic[:]},
		{"magic and 15 bytes", append(kpl.Magic[:], make([]byte, 15)...)},
		{"magic and empty message digest", emptyMsg},
		{"Aggregate of no records", kpl.Aggregate(nil)},
		{"magic and 16 zero bytes", append(kpl.Magic[:], make([]byte, 16)...)},
		{"digest mismatch", corrupt},
		{"message changed", corruptMsg},
		{"wrong magic", wrongMagic},
		{"no magic", valid[4:]},
		{"plain JSON", []byte(`{"id":1,"name":"some ordinary record"}`)},
		{"truncated", valid[:len(valid)-1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if kpl.IsAggregate(tt.data) {
				t.Error("IsAggregate = true")
			}
			got, ok, err := kpl.Deaggregate(tt.data)
			if got != nil || ok || err != nil {
				t.Errorf("Deaggregate = %v, %v, %v; want nil, false, nil", got, ok, err)
			}
		})
	}
	if len(emptyMsg) != 20 || !bytes.Equal(kpl.Aggregate(nil), emptyMsg) {
		t.Errorf("Aggregate(nil) = % x, want % x", kpl.Aggregate(nil), emptyMsg)
	}
}

func TestMalformed(t *testing.T) {
	twoPKs := slices.Clip(pkEntry(pkEntry(nil, "a"), "b")) // appends copy
	tests := []struct {
		name string
		msg  []byte // framed with magic and a correct digest
		want string
	}{
		{
			name: "no records, tables only",
			msg:  ehkEntry(twoPKs, "1"),
			want: "kpl: aggregated record: no user records",
		},
		{
			name: "no records, unknown field only",
			msg:  varintField(nil, 9, 1),
			want: "kpl: aggregated record: no user records",
		},
		{
			name: "truncated tag",
			msg:  append(recordEntry(twoPKs, rec(0, "x")), 0x80),
			want: "kpl: aggregated record: field tag at byte 17: truncated",
		},
		{
			name: "field number 0",
			msg:  append(recordEntry(twoPKs, rec(0, "x")), 0x02, 0x00),
			want: "kpl: aggregated record: field tag at byte 17: invalid field number",
		},
		{
			name: "truncated record length",
			msg:  append(twoPKs, 0x1a),
			want: "kpl: aggregated record: record at byte 10: truncated",
		},
		{
			name: "record longer than the message",
			msg:  recordEntry(twoPKs, rec(0, "x"))[:len(twoPKs)+6],
			want: "kpl: aggregated record: record at byte 10: truncated",
		},
		{
			name: "truncated partition key entry",
			msg:  append(pkEntry(nil, "a"), 0x0a, 0x05, 'b'),
			want: "kpl: aggregated record: partition_key_table entry at byte 7: truncated",
		},
		{
			name: "partition key table as varint",
			msg:  recordEntry(varintField(nil, 1, 3), rec(0, "x")),
			want: "kpl: aggregated record: partition_key_table entry at byte 4: wire type varint, want bytes",
		},
		{
			name: "explicit hash key table as fixed32",
			msg:  recordEntry(protowire.AppendFixed32(protowire.AppendTag(twoPKs, 2, protowire.Fixed32Type), 7), rec(0, "x")),
			want: "kpl: aggregated record: explicit_hash_key_table entry at byte 10: wire type fixed32, want bytes",
		},
		{
			name: "records as varint",
			msg:  varintField(twoPKs, 3, 1),
			want: "kpl: aggregated record: record at byte 10: wire type varint, want bytes",
		},
		{
			name: "unknown field truncated",
			msg:  append(recordEntry(twoPKs, rec(0, "x")), protowire.AppendTag(nil, 20, protowire.Fixed64Type)...),
			want: "kpl: aggregated record: field 20 at byte 17: truncated",
		},
		{
			name: "unmatched end group",
			msg:  append(recordEntry(twoPKs, rec(0, "x")), protowire.AppendTag(nil, 20, protowire.EndGroupType)...),
			want: "kpl: aggregated record: field 20 at byte 17: end group without matching start group",
		},
		{
			name: "reserved wire type",
			msg:  append(recordEntry(twoPKs, rec(0, "x")), 0xa6, 0x01), // field 20, wire type 6
			want: "kpl: aggregated record: field 20 at byte 17: reserved wire type",
		},
		{
			name: "varint overflow",
			msg:  append(recordEntry(twoPKs, rec(0, "x")), 0x48, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
			want: "kpl: aggregated record: field 9 at byte 17: varint longer than 64 bits",
		},
		{
			name: "partition key index out of range",
			msg:  recordEntry(recordEntry(recordEntry(recordEntry(twoPKs, rec(0, "a")), rec(1, "b")), rec(1, "c")), rec(7, "d")),
			want: "kpl: user record 3: partition key index 7 out of range (table has 2)",
		},
		{
			name: "huge partition key index",
			msg:  recordEntry(twoPKs, rec(1<<63, "a")),
			want: "kpl: user record 0: partition key index 9223372036854775808 out of range (table has 2)",
		},
		{
			name: "no partition key table",
			msg:  recordEntry(nil, rec(0, "a")),
			want: "kpl: user record 0: partition key index 0 out of range (table has 0)",
		},
		{
			name: "explicit hash key index out of range",
			msg:  recordEntry(recordEntry(ehkEntry(twoPKs, "5"), recEHK(0, 0, "a")), recEHK(1, 1, "b")),
			want: "kpl: user record 1: explicit hash key index 1 out of range (table has 1)",
		},
		{
			name: "explicit hash key index without table",
			msg:  recordEntry(twoPKs, recEHK(0, 0, "a")),
			want: "kpl: user record 0: explicit hash key index 0 out of range (table has 0)",
		},
		{
			name: "no partition key index",
			msg:  recordEntry(recordEntry(twoPKs, rec(0, "a")), bytesField(nil, 3, []byte("data"))),
			want: "kpl: user record 1: no partition key index (record at byte 17)",
		},
		{
			name: "no data",
			msg:  recordEntry(twoPKs, varintField(varintField(nil, 1, 0), 9, 5)),
			want: "kpl: user record 0: no data (record at byte 10)",
		},
		{
			name: "empty record",
			msg:  recordEntry(recordEntry(twoPKs, rec(0, "a")), nil),
			want: "kpl: user record 1: no partition key index (record at byte 17)",
		},
		{
			name: "partition key index as bytes",
			msg:  recordEntry(twoPKs, bytesField(bytesField(nil, 1, []byte{0}), 3, []byte("a"))),
			want: "kpl: user record 0: partition_key_index at byte 12: wire type bytes, want varint",
		},
		{
			name: "explicit hash key index as fixed64",
			msg:  recordEntry(twoPKs, protowire.AppendFixed64(protowire.AppendTag(rec(0, "a"), 2, protowire.Fixed64Type), 0)),
			want: "kpl: user record 0: explicit_hash_key_index at byte 17: wire type fixed64, want varint",
		},
		{
			name: "data as varint",
			msg:  recordEntry(twoPKs, varintField(varintField(nil, 1, 0), 3, 1)),
			want: "kpl: user record 0: data at byte 14: wire type varint, want bytes",
		},
		{
			name: "tags as varint",
			msg:  recordEntry(twoPKs, varintField(rec(0, "a"), 4, 1)),
			want: "kpl: user record 0: tags at byte 17: wire type varint, want bytes",
		},
		{
			name: "truncated partition key index",
			msg:  recordEntry(twoPKs, append(bytesField(nil, 3, []byte("abc")), 0x08, 0x80)),
			want: "kpl: user record 0: partition_key_index at byte 17: truncated",
		},
		{
			name: "truncated data inside record",
			msg:  recordEntry(twoPKs, append(varintField(nil, 1, 0), 0x1a, 0x09, 'a', 'b')),
			want: "kpl: user record 0: data at byte 14: truncated",
		},
		{
			name: "truncated tag inside record",
			msg:  recordEntry(twoPKs, append(rec(0, "abc"), 0xff)),
			want: "kpl: user record 0: field tag at byte 19: truncated",
		},
		{
			name: "unknown field inside record truncated",
			msg:  recordEntry(twoPKs, append(rec(0, "abc"), protowire.AppendTag(nil, 7, protowire.Fixed32Type)...)),
			want: "kpl: user record 0: field 7 at byte 19: truncated",
		},
		{
			name: "tag without key",
			msg:  recordEntry(twoPKs, bytesField(rec(0, "a"), 4, bytesField(nil, 2, []byte("v")))),
			want: "kpl: user record 0: tag without key (tag at byte 17)",
		},
		{
			name: "tag key as varint",
			msg:  recordEntry(twoPKs, bytesField(rec(0, "a"), 4, varintField(nil, 1, 1))),
			want: "kpl: user record 0: tag key at byte 19: wire type varint, want bytes",
		},
		{
			name: "tag value as fixed32",
			msg:  recordEntry(twoPKs, bytesField(rec(0, "a"), 4, protowire.AppendFixed32(protowire.AppendTag(bytesField(nil, 1, []byte("k")), 2, protowire.Fixed32Type), 1))),
			want: "kpl: user record 0: tag value at byte 22: wire type fixed32, want bytes",
		},
		{
			name: "truncated tag value",
			msg:  recordEntry(twoPKs, bytesField(rec(0, "a"), 4, append(bytesField(nil, 1, []byte("k")), 0x12, 0x04, 'v'))),
			want: "kpl: user record 0: tag field 2 at byte 22: truncated",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := frame(tt.msg)
			if !kpl.IsAggregate(data) {
				t.Fatal("IsAggregate = false; the digest matches")
			}
			got, ok, err := kpl.Deaggregate(data)
			if !ok || got != nil {
				t.Errorf("Deaggregate = %v, ok %v; want nil, true", got, ok)
			}
			if !errors.Is(err, kpl.ErrMalformed) {
				t.Fatalf("err = %v; want one matching ErrMalformed", err)
			}
			if err.Error() != tt.want {
				t.Errorf("err = %q\n      want %q", err, tt.want)
			}
		})
	}
}

// TestProtobufRules covers what protobuf allows and the KPL never writes:
// fields in any order, unknown fields of every wire type, repeated scalars.
func TestProtobufRules(t *testing.T) {
	group := protowire.AppendTag(nil, 30, protowire.StartGroupType)
	group = varintField(group, 1, 5)
	group = protowire.AppendTag(group, 31, protowire.StartGroupType)
	group = protowire.AppendTag(group, 31, protowire.EndGroupType)
	group = protowire.AppendTag(group, 30, protowire.EndGroupType)
	unknown := varintField(nil, 10, 1)
	unknown = protowire.AppendFixed32(protowire.AppendTag(unknown, 11, protowire.Fixed32Type), 2)
	unknown = protowire.AppendFixed64(protowire.AppendTag(unknown, 12, protowire.Fixed64Type), 3)
	unknown = bytesField(unknown, 13, []byte("ignored"))
	unknown = append(unknown, group...)

	var msg []byte
	msg = recordEntry(msg, append(bytes.Clone(unknown), recEHK(1, 0, "first")...)) // records before the tables
	msg = append(msg, unknown...)
	msg = pkEntry(msg, "a")
	msg = ehkEntry(msg, "42")
	msg = pkEntry(msg, "b")
	// Repeated scalars: the last value wins. Tags with a value, without one.
	r := varintField(rec(5, "dropped"), 1, 0)
	r = bytesField(r, 3, []byte("second"))
	r = bytesField(r, 4, bytesField(bytesField(nil, 1, []byte("k")), 2, []byte("v")))
	r = bytesField(r, 4, bytesField(unknown, 1, nil))
	msg = recordEntry(msg, r)

	got := mustDeaggregate(t, frame(msg))
	want := []kpl.Record{
		{PartitionKey: "b", ExplicitHashKey: "42", Data: []byte("first")},
		{PartitionKey: "a", Data: []byte("second")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Deaggregate (-want +got):\n%s", diff)
	}
}

func TestDeaggregateAllocs(t *testing.T) {
	data := kpl.Aggregate(genRecords(1000, 7, 100))
	// The result slice, the key table, the buffer holding every key: no
	// sync.Pool or map involved, so the count holds under -race too.
	allocs := testing.AllocsPerRun(20, func() {
		if _, _, err := kpl.Deaggregate(data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 3 {
		t.Errorf("Deaggregate of 1000 records: %v allocations, want 3", allocs)
	}
	notAggregate := []byte("an ordinary record")
	if allocs := testing.AllocsPerRun(20, func() { kpl.Deaggregate(notAggregate) }); allocs != 0 {
		t.Errorf("Deaggregate of an ordinary record: %v allocations, want 0", allocs)
	}
}

func ExampleDeaggregate() {
	data := kpl.Aggregate([]kpl.Record{
		{PartitionKey: "user-1", Data: []byte(`{"n":1}`)},
		{PartitionKey: "user-2", ExplicitHashKey: "12345", Data: []byte(`{"n":2}`)},
		{PartitionKey: "user-1", Data: []byte(`{"n":3}`)},
	})
	records, ok, err := kpl.Deaggregate(data)
	fmt.Println(len(data), "bytes, aggregate:", ok, err)
	for _, r := range records {
		fmt.Printf("%s %q %s\n", r.PartitionKey, r.ExplicitHashKey, r.Data)
	}

	_, ok, err = kpl.Deaggregate([]byte(`{"n":4}`))
	fmt.Println("ordinary record, aggregate:", ok, err)

	data[len(data)-1] ^= 1 // a wrong digest: not an aggregate either
	_, ok, err = kpl.Deaggregate(data)
	fmt.Println("wrong digest, aggregate:", ok, err)
	// Output:
	// 84 bytes, aggregate: true <nil>
	// user-1 "" {"n":1}
	// user-2 "12345" {"n":2}
	// user-1 "" {"n":3}
	// ordinary record, aggregate: false <nil>
	// wrong digest, aggregate: false <nil>
}
