package envelope

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// benchHeaders returns a typical record: three user headers, the partition
// key, and a 512-byte JSON-ish payload.
func benchHeaders() (Headers, []byte) {
	var h Headers
	h.Set("content-type", "application/json")
	h.Set("x-tenant", "acme")
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.Set(PartitionKeyHeader, "user-42")
	payload := []byte(`{"id":1,"data":"` + strings.Repeat("x", 512-len(`{"id":1,"data":""}`)) + `"}`)
	return h, payload
}

func BenchmarkDecode(b *testing.B) {
	h, payload := benchHeaders()
	data, err := Encode(h, payload)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		got, p := Decode(data)
		if len(got) != 3 || len(p) != 512 {
			b.Fatalf("Decode = %d headers, %d bytes", len(got), len(p))
		}
	}
}

func BenchmarkDecodeInto(b *testing.B) {
	h, payload := benchHeaders()
	data, err := Encode(h, payload)
	if err != nil {
		b.Fatal(err)
	}
	backing := make(Headers, 0, 8)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		got, _ := DecodeInto(backing[:0], data)
		if len(got) != 3 {
			b.Fatalf("DecodeInto = %d headers", len(got))
		}
	}
}

func BenchmarkDecodeRaw(b *testing.B) {
	_, payload := benchHeaders()
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		got, p := Decode(payload)
		if got != nil || len(p) != len(payload) {
			b.Fatal("raw payload decoded as an envelope")
		}
	}
}

// BenchmarkDecodeManyNames decodes a 1 MiB block of distinct names, the
// input that would cost quadratic time without the map.
func BenchmarkDecodeManyNames(b *testing.B) {
	var block strings.Builder
	for i := 0; block.Len() < 1<<20; i++ {
		fmt.Fprintf(&block, "x%x:\n", i)
	}
	data := record(block.String(), "")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		Decode(data)
	}
}

func BenchmarkAppend(b *testing.B) {
	h, payload := benchHeaders()
	buf := make([]byte, 0, EncodedLen(h, payload))
	b.SetBytes(int64(cap(buf)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = Append(buf[:0], h, payload)
		if err != nil {
			b.Fatal(err)
		}
	}
	if !bytes.HasSuffix(buf, payload) {
		b.Fatal("Append lost the payload")
	}
}

func BenchmarkEncode(b *testing.B) {
	h, payload := benchHeaders()
	b.SetBytes(int64(EncodedLen(h, payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(h, payload); err != nil {
			b.Fatal(err)
		}
	}
}
