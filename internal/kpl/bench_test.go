package kpl_test

import (
	"strconv"
	"testing"

	"github.com/shardsettle/lambdaadapter/internal/kpl"
)

// benchRecords returns n user records of size bytes each, over keys
// distinct partition keys (of the length of a UUID, as producers often use).
func benchRecords(n, size, keys int) []kpl.Record {
	records := make([]kpl.Record, n)
	for i := range records {
		records[i] = kpl.Record{
			PartitionKey: "3f6c1a2e-7b9d-4c1e-8a2f-" + strconv.Itoa(100000000000+i%keys),
			Data:         make([]byte, size),
		}
	}
	return records
}

// BenchmarkDeaggregate decodes one aggregate of 1,000 user records of 100
// bytes, with a distinct partition key per record (the KPL's usual case)
// and with 10 shared keys. Allocations are constant (pinned in
// TestDeaggregateAllocs).
func BenchmarkDeaggregate(b *testing.B) {
	for _, bc := range []struct {
		name string
		keys int
	}{
		{"1000x100B/distinct_keys", 1000},
		{"1000x100B/10_keys", 10},
	} {
		data := kpl.Aggregate(benchRecords(1000, 100, bc.keys))
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := kpl.Deaggregate(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAggregate encodes 1,000 user records of 100 bytes with distinct
// partition keys.
func BenchmarkAggregate(b *testing.B) {
	records := benchRecords(1000, 100, 1000)
	b.ReportAllocs()
	for b.Loop() {
		kpl.Aggregate(records)
	}
}
