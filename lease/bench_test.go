package lease_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/shardsettle/lambdaadapter/lease"
)

func BenchmarkMemoryRenew(b *testing.B) {
	ctx := context.Background()
	m := lease.NewMemory()
	l, err := m.Ensure(ctx, lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}, []string{"shardId-p"})
	if err != nil {
		b.Fatal(err)
	}
	if l, err = m.Take(ctx, l, "w1"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if l, err = m.Renew(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryList(b *testing.B) {
	ctx := context.Background()
	m := lease.NewMemory()
	for _, stream := range []string{"orders", "payments"} {
		for i := range 100 {
			if _, err := m.Ensure(ctx, lease.Key{Stream: stream, ShardID: fmt.Sprintf("shardId-%012d", i)}, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if ls, err := leasesOf(m.Snapshot(ctx, "orders")); err != nil || len(ls) != 100 {
			b.Fatal(len(ls), err)
		}
	}
}

// BenchmarkTrackerObserve observes 1000 leases of which 10% changed, as a
// worker does after each Snapshot.
func BenchmarkTrackerObserve(b *testing.B) {
	ls := make([]lease.Lease, 1000)
	for i := range ls {
		ls[i] = lease.Lease{Key: lease.Key{Stream: "orders", ShardID: fmt.Sprintf("shardId-%012d", i)}, Owner: "w1"}
	}
	t := lease.NewTracker(10e9)
	t.Observe(ls)
	b.ReportAllocs()
	for b.Loop() {
		for i := 0; i < len(ls); i += 10 {
			ls[i].Counter++
		}
		t.Observe(ls)
		for _, l := range ls {
			t.Expired(l)
		}
	}
}

func BenchmarkParseKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := lease.ParseKey("orders:shardId-000000000000"); err != nil {
			b.Fatal(err)
		}
	}
}

// leasesOf returns a snapshot's leases.
func leasesOf(s lease.Snapshot, err error) ([]lease.Lease, error) { return s.Leases, err }
