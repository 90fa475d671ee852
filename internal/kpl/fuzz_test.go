package kpl_test

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/internal/kpl"
)

// FuzzDeaggregate checks Deaggregate on arbitrary input. The fuzzer varies
// the protobuf message and the test frames it with the magic and a correct
// digest (a mutated digest would almost never match, and the fuzzer would
// only ever explore "not an aggregate"); the unframed input is decoded too.
//
//   - Deaggregate never panics;
//   - a framed non-empty message is always an aggregate: records or an
//     error matching ErrMalformed, never both;
//   - records are returned in one exactly-sized slice, their Data alias the
//     input with capacity equal to length;
//   - re-encoding the records with Aggregate and decoding again gives the
//     same records.
func FuzzDeaggregate(f *testing.F) {
	seeds := [][]byte{
		kpl.Aggregate([]kpl.Record{{PartitionKey: "pk", Data: []byte("x")}}),
		kpl.Aggregate([]kpl.Record{{PartitionKey: "a", ExplicitHashKey: "1"}, {PartitionKey: "b", Data: []byte("yz")}}),
		kpl.Aggregate(genRecords(20, 3, 4)),
	}
	tagged := recordEntry(ehkEntry(pkEntry(nil, "a"), "7"),
		bytesField(recEHK(0, 0, "data"), 4, bytesField(bytesField(nil, 1, []byte("k")), 2, []byte("v"))))
	seeds = append(seeds, frame(tagged))
	for _, s := range seeds {
		msg := s[len(kpl.Magic) : len(s)-16]
		f.Add(msg)
		for _, cut := range []int{1, 2, len(msg) / 2, len(msg) - 1} {
			if cut > 0 && cut < len(msg) {
				f.Add(msg[:cut]) // truncations, framed with a correct digest
			}
		}
	}
	f.Add(seeds[0]) // a whole aggregate as the message: magic bytes are tag 30, wire type 3
	// Hostile lengths, indexes and nesting.
	f.Add([]byte{0x1a, 0xff, 0xff, 0xff, 0xff, 0x0f})                   // record length 2^32-1
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}) // key length 2^56-1
	f.Add(recordEntry(pkEntry(nil, "a"), rec(1<<63, "x")))
	f.Add(recordEntry(nil, nil))
	f.Add(bytes.Repeat([]byte{0xa3, 0x01}, 200)) // nested start groups
	f.Add(bytes.Repeat(recordEntry(nil, nil), 100))

	f.Fuzz(func(t *testing.T, msg []byte) {
		check(t, msg, false)
		check(t, frame(msg), len(msg) > 0)
	})
}

func check(t *testing.T, in []byte, mustBeAggregate bool) {
	records, ok, err := kpl.Deaggregate(in)
	if ok != kpl.IsAggregate(in) {
		t.Fatalf("Deaggregate ok %v, IsAggregate %v", ok, !ok)
	}
	if mustBeAggregate && !ok {
		t.Fatal("framed message is not an aggregate")
	}
	if !ok {
		if records != nil || err != nil {
			t.Fatalf("not an aggregate, but records %v, err %v", records, err)
		}
		return
	}
	if err != nil {
		if records != nil || !errors.Is(err, kpl.ErrMalformed) {
			t.Fatalf("records %v, err %v; want nil and ErrMalformed", records, err)
		}
		return
	}
	if len(records) == 0 || cap(records) != len(records) {
		t.Fatalf("%d records, capacity %d", len(records), cap(records))
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(in)))
	for i, r := range records {
		if cap(r.Data) != len(r.Data) {
			t.Fatalf("record %d: cap(Data) %d, len %d", i, cap(r.Data), len(r.Data))
		}
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(r.Data))); p < start || p+uintptr(len(r.Data)) > start+uintptr(len(in)) {
			t.Fatalf("record %d: Data does not alias the input", i)
		}
	}
	again, ok, err := kpl.Deaggregate(kpl.Aggregate(records))
	if !ok || err != nil {
		t.Fatalf("re-encoded: ok %v, err %v", ok, err)
	}
	if diff := cmp.Diff(records, again, sameBytes); diff != "" {
		t.Fatalf("re-encoded (-first +second):\n%s", diff)
	}
}
