// Package leasetest checks that an implementation of lease.Store keeps the
// contract of the interface: creation and reads, takes, steals, renewals,
// checkpoints and releases, fencing of every write by owner AND counter, many
// streams in one store, and exactly one winner of concurrent takes.
//
// The same suite runs against lease.Memory in the lease package's unit tests
// and against lease.DynamoDB on dynalite in the integration tests:
//
//	func TestMemory(t *testing.T) {
//		leasetest.TestStore(t, func(t *testing.T) lease.Store { return lease.NewMemory() })
//	}
package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/shardsettle/lambdaadapter/lease"
)

// Racers is how many goroutines compete in the concurrent tests.
const Racers = 20

// TestStore runs the conformance suite, one subtest per property. newStore
// is called once per subtest, with the subtest's T, and must return an
// empty store (tie its cleanup to that T with t.Cleanup). The subtests run
// one after another; each uses only its own store.
func TestStore(t *testing.T, newStore func(t *testing.T) lease.Store) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s lease.Store)
	}{
		{"EnsureGetList", testEnsureGetList},
		{"EnsureKeepsExisting", testEnsureKeepsExisting},
		{"ParentsRoundTrip", testParentsRoundTrip},
		{"InvalidArguments", testInvalidArguments},
		{"TakeFree", testTakeFree},
		{"Steal", testSteal},
		{"FencedWrites", testFencedWrites},
		{"LostWorkerCannotCheckpoint", testLostWorkerCannotCheckpoint},
		{"ReleaseThenTake", testReleaseThenTake},
		{"UnownedWrites", testUnownedWrites},
		{"ShardEnd", testShardEnd},
		{"ManyStreams", testManyStreams},
		{"Delete", testDelete},
		{"RenewedAt", testRenewedAt},
		{"ConcurrentTake", testConcurrentTake},
		{"ConcurrentSteal", testConcurrentSteal},
		{"ConcurrentWriters", testConcurrentWriters},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if s == nil {
				t.Fatal("leasetest: newStore returned nil")
			}
			tc.run(t, s)
		})
	}
}

// opts compares leases: an empty ParentShardIDs equals nil; times compare
// with Equal.
var opts = cmp.Options{cmpopts.EquateEmpty()}

// key returns the key of shard n of stream.
func key(stream string, n int) lease.Key {
	return lease.Key{Stream: stream, ShardID: fmt.Sprintf("shardId-%012d", n)}
}

// ignoreRenewedAt leaves RenewedAt out of a comparison.
var ignoreRenewedAt = cmpopts.IgnoreFields(lease.Lease{}, "RenewedAt")

func ensure(t *testing.T, s lease.Store, k lease.Key, parents ...string) lease.Lease {
	t.Helper()
	l, err := s.Ensure(t.Context(), k, parents)
	if err != nil {
		t.Fatalf("Ensure(%v, %q): %v", k, parents, err)
	}
	return l
}

func get(t *testing.T, s lease.Store, k lease.Key) lease.Lease {
	t.Helper()
	l, err := s.Get(t.Context(), k)
	if err != nil {
		t.Fatalf("Get(%v): %v", k, err)
	}
	return l
}

func take(t *testing.T, s lease.Store, held lease.Lease, owner string) lease.Lease {
	t.Helper()
	l, err := s.Take(t.Context(), held, owner)
	if err != nil {
		t.Fatalf("Take(%+v, %q): %v", held, owner, err)
	}
	checkStored(t, s, l)
	return l
}

func checkpoint(t *testing.T, s lease.Store, held lease.Lease, seq string) lease.Lease {
	t.Helper()
	l, err := s.Checkpoint(t.Context(), held, seq)
	if err != nil {
		t.Fatalf("Checkpoint(%+v, %q): %v", held, seq, err)
	}
	checkStored(t, s, l)
	return l
}

func renew(t *testing.T, s lease.Store, held lease.Lease) lease.Lease {
	t.Helper()
	l, err := s.Renew(t.Context(), held)
	if err != nil {
		t.Fatalf("Renew(%+v): %v", held, err)
	}
	checkStored(t, s, l)
	return l
}

func release(t *testing.T, s lease.Store, held lease.Lease) lease.Lease {
	t.Helper()
	l, err := s.Release(t.Context(), held)
	if err != nil {
		t.Fatalf("Release(%+v): %v", held, err)
	}
	checkStored(t, s, l)
	return l
}

// checkStored fails the test unless the stored row equals want, a lease a
// write returned, in every field.
func checkStored(t *testing.T, s lease.Store, want lease.Lease) {
	t.Helper()
	if diff := cmp.Diff(want, get(t, s, want.Key), opts); diff != "" {
		t.Fatalf("stored row differs from the lease the write returned (-returned +stored):\n%s", diff)
	}
}

// checkLease fails the test unless got equals want, RenewedAt aside.
func checkLease(t *testing.T, what string, got, want lease.Lease) {
	t.Helper()
	if diff := cmp.Diff(want, got, opts, ignoreRenewedAt); diff != "" {
		t.Fatalf("%s (-want +got):\n%s", what, diff)
	}
}

// write is one of the four conditional writes, for table tests.
type write struct {
	name string
	do   func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error)
}

var writes = []write{
	{"Take", func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error) {
		return s.Take(ctx, held, "intruder")
	}},
	{"Renew", func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error) {
		return s.Renew(ctx, held)
	}},
	{"Checkpoint", func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error) {
		return s.Checkpoint(ctx, held, "99999")
	}},
	{"Release", func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error) {
		return s.Release(ctx, held)
	}},
}

// checkLost fails the test unless err matches lease.ErrLeaseLost and the
// row of k is still before (or still absent when absent is true).
func checkLost(t *testing.T, s lease.Store, err error, before lease.Lease, absent bool) {
	t.Helper()
	if !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("error = %v, want one matching lease.ErrLeaseLost", err)
	}
	if absent {
		if l, err := s.Get(t.Context(), before.Key); !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("after the failed write, Get = %+v, %v; want lease.ErrNotFound", l, err)
		}
		return
	}
	if diff := cmp.Diff(before, get(t, s, before.Key), opts); diff != "" {
		t.Fatalf("the failed write changed the row (-before +after):\n%s", diff)
	}
}

func testEnsureGetList(t *testing.T, s lease.Store) {
	ctx := t.Context()
	k := key("orders", 0)
	l := ensure(t, s, k)
	checkLease(t, "Ensure of a new lease", l, lease.Lease{Key: k})
	checkStored(t, s, l)

	if got, err := s.Get(ctx, key("orders", 1)); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get of a missing lease = %+v, %v; want lease.ErrNotFound", got, err)
	}
	ls, err := s.List(ctx, "orders")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if diff := cmp.Diff([]lease.Lease{l}, ls, opts); diff != "" {
		t.Fatalf("List (-want +got):\n%s", diff)
	}
	ls, err = s.List(ctx, "other")
	if err != nil {
		t.Fatalf("List of a stream without leases: %v", err)
	}
	if ls == nil || len(ls) != 0 {
		t.Fatalf("List of a stream without leases = %#v, want an empty, non-nil slice", ls)
	}
}

func testEnsureKeepsExisting(t *testing.T, s lease.Store) {
	k := key("orders", 3)
	l := ensure(t, s, k, "shardId-000000000001")
	l = take(t, s, l, "w1")
	l = checkpoint(t, s, l, "100")
	again := ensure(t, s, k, "shardId-000000000002")
	if diff := cmp.Diff(l, again, opts); diff != "" {
		t.Fatalf("Ensure of an existing lease must return it unchanged (-want +got):\n%s", diff)
	}
	checkStored(t, s, l)
}

func testParentsRoundTrip(t *testing.T, s lease.Store) {
	ctx := t.Context()
	for _, tc := range []struct {
		name    string
		parents []string
	}{
		{"none", nil},
		{"empty", []string{}},
		{"split", []string{"shardId-000000000000"}},
		{"merge", []string{"shardId-000000000000", "shardId-000000000001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := lease.Key{Stream: "orders", ShardID: "child-" + tc.name}
			in := append([]string(nil), tc.parents...)
			l, err := s.Ensure(ctx, k, in)
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			want := lease.Lease{Key: k, ParentShardIDs: tc.parents}
			checkLease(t, "Ensure", l, want)
			for i := range in {
				in[i] = "changed by the caller"
			}
			for i := range l.ParentShardIDs {
				l.ParentShardIDs[i] = "changed by the caller"
			}
			got := get(t, s, k)
			checkLease(t, "Get after the caller changed its slices", got, want)
			for i := range got.ParentShardIDs {
				got.ParentShardIDs[i] = "changed by the caller"
			}
			got = take(t, s, get(t, s, k), "w1")
			want = lease.Lease{Key: k, Owner: "w1", Counter: 1, OwnerSwitches: 1, ParentShardIDs: tc.parents}
			checkLease(t, "Take", got, want)
			for i := range got.ParentShardIDs {
				got.ParentShardIDs[i] = "changed by the caller"
			}
			checkLease(t, "Get after the caller changed the slice Take returned", get(t, s, k), want)
		})
	}
	ls, err := s.List(ctx, "orders")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var got [][]string
	for _, l := range ls {
		got = append(got, l.ParentShardIDs)
	}
	// Ordered by shard id: child-empty, child-merge, child-none, child-split.
	want := [][]string{nil, {"shardId-000000000000", "shardId-000000000001"}, nil, {"shardId-000000000000"}}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Fatalf("parents in List, ordered by shard id (-want +got):\n%s", diff)
	}
}

func testInvalidArguments(t *testing.T, s lease.Store) {
	ctx := t.Context()
	for _, k := range []lease.Key{{Stream: "", ShardID: "s"}, {Stream: "orders", ShardID: ""}, {Stream: "arn:aws:kinesis:us-east-1:1:stream/orders", ShardID: "s"}} {
		if l, err := s.Ensure(ctx, k, nil); err == nil || errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("Ensure(%#v) = %+v, %v; want an error that is not lease.ErrLeaseLost", k, l, err)
		}
	}
	for _, stream := range []string{"", "arn:aws:kinesis:us-east-1:1:stream/orders"} {
		if ls, err := s.List(ctx, stream); err == nil {
			t.Errorf("List(%q) = %v, nil; want an error", stream, ls)
		}
	}

	l := ensure(t, s, key("orders", 0))
	if got, err := s.Take(ctx, l, ""); err == nil || errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("Take with an empty owner = %+v, %v; want an error that is not lease.ErrLeaseLost", got, err)
	}
	checkStored(t, s, l)
	l = take(t, s, l, "w1")
	if got, err := s.Checkpoint(ctx, l, ""); err == nil || errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("Checkpoint with an empty sequence number = %+v, %v; want an error that is not lease.ErrLeaseLost", got, err)
	}
	checkStored(t, s, l)
}

func testTakeFree(t *testing.T, s lease.Store) {
	k := key("orders", 0)
	l := ensure(t, s, k)
	l = take(t, s, l, "w1")
	checkLease(t, "Take of a free lease", l, lease.Lease{Key: k, Owner: "w1", Counter: 1, OwnerSwitches: 1})
	l = checkpoint(t, s, l, "49590338271490256608559692538361571095921575989136588898")
	checkLease(t, "Checkpoint", l, lease.Lease{Key: k, Owner: "w1", Counter: 2, OwnerSwitches: 1,
		Checkpoint: "49590338271490256608559692538361571095921575989136588898"})
	l = renew(t, s, l)
	checkLease(t, "Renew", l, lease.Lease{Key: k, Owner: "w1", Counter: 3, OwnerSwitches: 1,
		Checkpoint: "49590338271490256608559692538361571095921575989136588898"})
	// Taking a lease one already holds bumps the counter, not OwnerSwitches.
	l = take(t, s, l, "w1")
	checkLease(t, "Take by the owner", l, lease.Lease{Key: k, Owner: "w1", Counter: 4, OwnerSwitches: 1,
		Checkpoint: "49590338271490256608559692538361571095921575989136588898"})
}

func testSteal(t *testing.T, s lease.Store) {
	k := key("orders", 0)
	w1 := take(t, s, ensure(t, s, k), "w1")
	w1 = checkpoint(t, s, w1, "100")
	// w2 read the lease (List or Get), found it expired and steals it with
	// the counter it read.
	seen := get(t, s, k)
	w2 := take(t, s, seen, "w2")
	checkLease(t, "steal", w2, lease.Lease{Key: k, Owner: "w2", Counter: 3, OwnerSwitches: 2, Checkpoint: "100"})
	w2 = renew(t, s, w2)
	checkLease(t, "renew by the thief", w2, lease.Lease{Key: k, Owner: "w2", Counter: 4, OwnerSwitches: 2, Checkpoint: "100"})
}

func testFencedWrites(t *testing.T, s lease.Store) {
	k := key("orders", 0)
	current := checkpoint(t, s, take(t, s, ensure(t, s, k), "w1"), "100") // owner w1, counter 2
	for _, tc := range []struct {
		name string
		held func(l lease.Lease) lease.Lease
	}{
		{"stale counter", func(l lease.Lease) lease.Lease { l.Counter--; return l }},
		{"newer counter", func(l lease.Lease) lease.Lease { l.Counter++; return l }},
		{"counter zero", func(l lease.Lease) lease.Lease { l.Counter = 0; return l }},
		{"wrong owner", func(l lease.Lease) lease.Lease { l.Owner = "w2"; return l }},
		{"owner differs only in case", func(l lease.Lease) lease.Lease { l.Owner = "W1"; return l }},
		{"held as free", func(l lease.Lease) lease.Lease { l.Owner = ""; return l }},
		{"other stream", func(l lease.Lease) lease.Lease { l.Key.Stream = "payments"; return l }},
		{"other shard", func(l lease.Lease) lease.Lease { l.Key.ShardID = "shardId-000000000009"; return l }},
	} {
		for _, w := range writes {
			t.Run(tc.name+"/"+w.name, func(t *testing.T) {
				held := tc.held(current)
				got, err := w.do(t.Context(), s, held)
				if err == nil {
					t.Fatalf("%s with %+v = %+v, nil; want lease.ErrLeaseLost", w.name, held, got)
				}
				checkLost(t, s, err, current, false)
				if held.Key != current.Key {
					checkLost(t, s, err, held, true)
				}
			})
		}
	}
	// The holder is unaffected by all those failed writes.
	renew(t, s, current)
}

func testLostWorkerCannotCheckpoint(t *testing.T, s lease.Store) {
	ctx := t.Context()
	k := key("orders", 0)
	w1 := checkpoint(t, s, take(t, s, ensure(t, s, k), "w1"), "100")
	w2 := take(t, s, get(t, s, k), "w2")
	w2 = checkpoint(t, s, w2, "200")
	// w1 was paused (GC, network) and does not know it lost the lease.
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			got, err := w.do(ctx, s, w1)
			if err == nil {
				t.Fatalf("%s by the worker that lost the lease = %+v, nil; want lease.ErrLeaseLost", w.name, got)
			}
			checkLost(t, s, err, w2, false)
		})
	}
	// Even with the owner it held it cannot catch up: the counter moved.
	w1.Counter = w2.Counter - 1
	_, err := s.Checkpoint(ctx, w1, "300")
	checkLost(t, s, err, w2, false)
}

func testReleaseThenTake(t *testing.T, s lease.Store) {
	k := key("orders", 0)
	w1 := checkpoint(t, s, take(t, s, ensure(t, s, k), "w1"), "100")
	free := release(t, s, w1)
	checkLease(t, "Release", free, lease.Lease{Key: k, Counter: 3, OwnerSwitches: 1, Checkpoint: "100"})
	// Another worker takes it at once, with the released lease as read.
	w2 := take(t, s, get(t, s, k), "w2")
	checkLease(t, "Take after Release", w2, lease.Lease{Key: k, Owner: "w2", Counter: 4, OwnerSwitches: 2, Checkpoint: "100"})
	// The releaser cannot take it back with what it holds.
	_, err := s.Take(t.Context(), free, "w1")
	checkLost(t, s, err, w2, false)
}

func testUnownedWrites(t *testing.T, s lease.Store) {
	// Renew, Checkpoint and Release of a free lease are refused: nobody
	// holds it.
	free := ensure(t, s, key("orders", 0))
	for _, w := range writes[1:] {
		t.Run(w.name, func(t *testing.T) {
			got, err := w.do(t.Context(), s, free)
			if err == nil {
				t.Fatalf("%s of a free lease = %+v, nil; want lease.ErrLeaseLost", w.name, got)
			}
			checkLost(t, s, err, free, false)
		})
	}
}

func testShardEnd(t *testing.T, s lease.Store) {
	k := key("orders", 0)
	l := checkpoint(t, s, take(t, s, ensure(t, s, k), "w1"), lease.ShardEnd)
	l = release(t, s, l)
	checkLease(t, "Release after ShardEnd", l, lease.Lease{Key: k, Counter: 3, OwnerSwitches: 1, Checkpoint: lease.ShardEnd})
}

func testManyStreams(t *testing.T, s lease.Store) {
	ctx := t.Context()
	want := map[string][]lease.Lease{}
	// Created out of order: List orders by shard id.
	for _, n := range []int{2, 0, 1} {
		for _, stream := range []string{"orders", "payments", "orders-2"} {
			if stream == "payments" && n == 2 {
				continue
			}
			want[stream] = append(want[stream], ensure(t, s, key(stream, n)))
		}
	}
	// A write to one stream's lease shows in that stream only.
	o1 := take(t, s, want["orders"][2], "w1")
	want["orders"][2] = o1
	for stream, ls := range want {
		ordered := map[string]lease.Lease{}
		for _, l := range ls {
			ordered[l.Key.ShardID] = l
		}
		var w []lease.Lease
		for n := range 3 {
			if l, ok := ordered[key(stream, n).ShardID]; ok {
				w = append(w, l)
			}
		}
		got, err := s.List(ctx, stream)
		if err != nil {
			t.Fatalf("List(%q): %v", stream, err)
		}
		if diff := cmp.Diff(w, got, opts); diff != "" {
			t.Errorf("List(%q) (-want +got):\n%s", stream, diff)
		}
	}
	// A stream whose name is a prefix of another's sees only its own.
	if got, err := s.List(ctx, "order"); err != nil || len(got) != 0 {
		t.Errorf("List(%q) = %v, %v; want no leases", "order", got, err)
	}
}

func testDelete(t *testing.T, s lease.Store) {
	ctx := t.Context()
	k := key("orders", 0)
	held := take(t, s, ensure(t, s, k), "w1")
	keep := ensure(t, s, key("orders", 1))
	if err := s.Delete(ctx, k); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if got, err := s.Get(ctx, k); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get after Delete = %+v, %v; want lease.ErrNotFound", got, err)
	}
	// Writes with a held copy fail and do not bring the row back.
	for _, w := range writes {
		got, err := w.do(ctx, s, held)
		if err == nil {
			t.Fatalf("%s of a deleted lease = %+v, nil; want lease.ErrLeaseLost", w.name, got)
		}
		checkLost(t, s, err, held, true)
	}
	if err := s.Delete(ctx, k); err != nil {
		t.Fatalf("Delete of a deleted lease: %v", err)
	}
	ls, err := s.List(ctx, "orders")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if diff := cmp.Diff([]lease.Lease{keep}, ls, opts); diff != "" {
		t.Fatalf("List after Delete (-want +got):\n%s", diff)
	}
	// Ensure creates it anew, free and at counter 0.
	checkLease(t, "Ensure after Delete", ensure(t, s, k), lease.Lease{Key: k})
}

func testRenewedAt(t *testing.T, s lease.Store) {
	k := key("orders", 0)
	check := func(what string, l lease.Lease, before, after time.Time) {
		t.Helper()
		lo := before.UTC().Truncate(time.Millisecond)
		if l.RenewedAt.Before(lo) || l.RenewedAt.After(after) {
			t.Fatalf("%s: RenewedAt = %v, want within [%v, %v]", what, l.RenewedAt, lo, after)
		}
		if l.RenewedAt.Location() != time.UTC {
			t.Fatalf("%s: RenewedAt = %v, want UTC", what, l.RenewedAt)
		}
	}
	before := time.Now()
	l := ensure(t, s, k)
	check("Ensure", l, before, time.Now())
	for _, w := range []struct {
		name string
		do   func(lease.Lease) lease.Lease
	}{
		{"Take", func(l lease.Lease) lease.Lease { return take(t, s, l, "w1") }},
		{"Renew", func(l lease.Lease) lease.Lease { return renew(t, s, l) }},
		{"Checkpoint", func(l lease.Lease) lease.Lease { return checkpoint(t, s, l, "100") }},
		{"Release", func(l lease.Lease) lease.Lease { return release(t, s, l) }},
	} {
		before := time.Now()
		l = w.do(l)
		check(w.name, l, before, time.Now())
	}
}

// race runs f(i) for i in [0, Racers) at once and returns the results.
func race(f func(i int) (lease.Lease, error)) ([]lease.Lease, []error) {
	ls, errs := make([]lease.Lease, Racers), make([]error, Racers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range Racers {
		done.Go(func() {
			start.Wait()
			ls[i], errs[i] = f(i)
		})
	}
	start.Done()
	done.Wait()
	return ls, errs
}

// checkOneWinner fails the test unless exactly one racer succeeded and all
// others lost; it returns the winner's lease.
func checkOneWinner(t *testing.T, s lease.Store, ls []lease.Lease, errs []error) lease.Lease {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("racers %d and %d both won", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, lease.ErrLeaseLost):
			t.Fatalf("racer %d: %v; want success or lease.ErrLeaseLost", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no racer won: %v", errs)
	}
	checkStored(t, s, ls[winner])
	return ls[winner]
}

func testConcurrentTake(t *testing.T, s lease.Store) {
	k := key("orders", 0)
	free := ensure(t, s, k)
	ls, errs := race(func(i int) (lease.Lease, error) {
		return s.Take(t.Context(), free, fmt.Sprintf("w%02d", i))
	})
	w := checkOneWinner(t, s, ls, errs)
	checkLease(t, "winner", w, lease.Lease{Key: k, Owner: w.Owner, Counter: 1, OwnerSwitches: 1})
}

func testConcurrentSteal(t *testing.T, s lease.Store) {
	k := key("orders", 0)
	held := checkpoint(t, s, take(t, s, ensure(t, s, k), "w1"), "100")
	ls, errs := race(func(i int) (lease.Lease, error) {
		return s.Take(t.Context(), held, fmt.Sprintf("thief%02d", i))
	})
	w := checkOneWinner(t, s, ls, errs)
	checkLease(t, "winner", w, lease.Lease{Key: k, Owner: w.Owner, Counter: 3, OwnerSwitches: 2, Checkpoint: "100"})
}

func testConcurrentWriters(t *testing.T, s lease.Store) {
	// The holder's renewals, checkpoints and release race with steals from
	// the same counter: one write wins, whatever it is.
	k := key("orders", 0)
	held := take(t, s, ensure(t, s, k), "w1")
	ls, errs := race(func(i int) (lease.Lease, error) {
		ctx := t.Context()
		switch i % 4 {
		case 0:
			return s.Renew(ctx, held)
		case 1:
			return s.Checkpoint(ctx, held, fmt.Sprint(1000+i))
		case 2:
			return s.Release(ctx, held)
		}
		return s.Take(ctx, held, fmt.Sprintf("thief%02d", i))
	})
	w := checkOneWinner(t, s, ls, errs)
	if w.Counter != held.Counter+1 {
		t.Fatalf("winner's counter = %d, want %d", w.Counter, held.Counter+1)
	}
}
