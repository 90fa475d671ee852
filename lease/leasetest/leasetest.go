// Package leasetest checks that an implementation of lease.Store keeps the
// contract of the interface: creation and reads, takes, steals, renewals,
// checkpoints and releases, handoff requests and transfers, conditional
// deletes, fencing of every write by owner AND counter (a write repeated
// from the held lease it consumed included), worker rows
// (heartbeats, snapshots, removal) kept apart from the leases, many streams
// in one store, and exactly one winner of concurrent conditional writes.
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
	"math"
	"slices"
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
		{"RepeatedWrite", testRepeatedWrite},
		{"ReleaseThenTake", testReleaseThenTake},
		{"UnownedWrites", testUnownedWrites},
		{"ShardEnd", testShardEnd},
		{"SubSequence", testSubSequence},
		{"ManyStreams", testManyStreams},
		{"Delete", testDelete},
		{"DeleteFenced", testDeleteFenced},
		{"RenewedAt", testRenewedAt},
		{"HandoffCleared", testHandoffCleared},
		{"RequestHandoff", testRequestHandoff},
		{"Transfer", testTransfer},
		{"LastCheckpointWithReleaseOrTransfer", testLastCheckpoint},
		{"SentinelCheckpoints", testSentinelCheckpoints},
		{"Heartbeat", testHeartbeat},
		{"Snapshot", testSnapshot},
		{"WorkerRowsAreNotLeases", testWorkerRowsAreNotLeases},
		{"RemoveWorker", testRemoveWorker},
		{"ConcurrentTake", testConcurrentTake},
		{"ConcurrentSteal", testConcurrentSteal},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ConcurrentRequestHandoff", testConcurrentRequestHandoff},
		{"ConcurrentTransferRenew", testConcurrentTransferRenew},
		{"ConcurrentHeartbeat", testConcurrentHeartbeat},
		{"HeartbeatLoad", testHeartbeatLoad},
		{"Owned", testOwned},
		{"LeaderRow", testLeaderRow},
		{"EmptyOwnerOfOlderVersion", testEmptyOwner},
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
	l, err := s.Checkpoint(t.Context(), held, seq, 0)
	if err != nil {
		t.Fatalf("Checkpoint(%+v, %q): %v", held, seq, err)
	}
	checkStored(t, s, l)
	return l
}

// testSubSequence: a checkpoint inside a KPL aggregate keeps its
// sub-sequence; the next whole checkpoint clears it; a negative one, or one
// with a sentinel checkpoint, is refused without I/O.
func testSubSequence(t *testing.T, s lease.Store) {
	ctx := t.Context()
	k := key("subseq", 0)
	held := take(t, s, ensure(t, s, k), "w1")
	l, err := s.Checkpoint(ctx, held, "100", 7)
	if err != nil {
		t.Fatalf("Checkpoint(100, 7): %v", err)
	}
	if l.Checkpoint != "100" || l.SubSequence != 7 {
		t.Fatalf("Checkpoint(100, 7) returned checkpoint %q sub %d", l.Checkpoint, l.SubSequence)
	}
	checkStored(t, s, l)
	if got := get(t, s, k); got.SubSequence != 7 {
		t.Fatalf("stored sub-sequence %d, want 7", got.SubSequence)
	}
	l = renew(t, s, l)
	if l.SubSequence != 7 {
		t.Fatalf("Renew changed the sub-sequence to %d", l.SubSequence)
	}
	l = checkpoint(t, s, l, "100")
	if l.SubSequence != 0 {
		t.Fatalf("a whole checkpoint kept sub-sequence %d", l.SubSequence)
	}
	for _, bad := range []struct {
		seq string
		sub int
	}{{"200", -1}, {lease.ShardEnd, 1}, {lease.TrimHorizon, 2}} {
		if _, err := s.Checkpoint(ctx, l, bad.seq, bad.sub); err == nil || errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("Checkpoint(%q, %d) = %v, want an argument error", bad.seq, bad.sub, err)
		}
	}
	if got := get(t, s, k); got.Counter != l.Counter {
		t.Errorf("refused checkpoints wrote: counter %d, want %d", got.Counter, l.Counter)
	}
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

func transfer(t *testing.T, s lease.Store, held lease.Lease, to string) lease.Lease {
	t.Helper()
	l, err := s.Transfer(t.Context(), held, to)
	if err != nil {
		t.Fatalf("Transfer(%+v, %q): %v", held, to, err)
	}
	checkStored(t, s, l)
	return l
}

func requestHandoff(t *testing.T, s lease.Store, held lease.Lease, requester string) lease.Lease {
	t.Helper()
	l, err := s.RequestHandoff(t.Context(), held, requester)
	if err != nil {
		t.Fatalf("RequestHandoff(%+v, %q): %v", held, requester, err)
	}
	checkStored(t, s, l)
	return l
}

func heartbeat(t *testing.T, s lease.Store, stream, owner string) lease.Worker {
	t.Helper()
	w, err := s.Heartbeat(t.Context(), stream, owner, nil)
	if err != nil {
		t.Fatalf("Heartbeat(%q, %q): %v", stream, owner, err)
	}
	return w
}

func snapshot(t *testing.T, s lease.Store, stream string) lease.Snapshot {
	t.Helper()
	snap, err := s.Snapshot(t.Context(), stream)
	if err != nil {
		t.Fatalf("Snapshot(%q): %v", stream, err)
	}
	if snap.Leases == nil || snap.Workers == nil {
		t.Fatalf("Snapshot(%q) = %#v, want non-nil slices", stream, snap)
	}
	return snap
}

func list(t *testing.T, s lease.Store, stream string) []lease.Lease {
	t.Helper()
	ls, err := leasesOf(s.Snapshot(t.Context(), stream))
	if err != nil {
		t.Fatalf("Snapshot(%q): %v", stream, err)
	}
	return ls
}

// checkWorkers fails the test unless the workers of stream, as Snapshot
// returns them, are want, in every field.
func checkWorkers(t *testing.T, s lease.Store, stream string, want ...lease.Worker) {
	t.Helper()
	if diff := cmp.Diff(want, snapshot(t, s, stream).Workers, opts); diff != "" {
		t.Fatalf("workers of %q (-want +got):\n%s", stream, diff)
	}
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

// write is one of the conditional writes of a held lease, for table tests.
type write struct {
	name string
	do   func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error)
}

// writes are the writes fenced by owner and counter that return the new
// row. All but Take are refused for a held lease without owner.
var writes = []write{
	{"Take", func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error) {
		return s.Take(ctx, held, "intruder")
	}},
	{"Renew", func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error) {
		return s.Renew(ctx, held)
	}},
	{"Checkpoint", func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error) {
		return s.Checkpoint(ctx, held, "99999", 0)
	}},
	{"Release", func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error) {
		return s.Release(ctx, held)
	}},
	{"Transfer", func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error) {
		return s.Transfer(ctx, held, "intruder")
	}},
}

// deleteWrite is Delete as a write, for table tests.
var deleteWrite = write{"Delete", func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error) {
	return lease.Lease{}, s.Delete(ctx, held)
}}

// handoffWrite is RequestHandoff as a write, for table tests. It is
// conditional on the owner only.
var handoffWrite = write{"RequestHandoff", func(ctx context.Context, s lease.Store, held lease.Lease) (lease.Lease, error) {
	return s.RequestHandoff(ctx, held, "requester")
}}

// fenced are the calls fenced by owner and counter: writes and Delete.
var fenced = append(slices.Clip(writes), deleteWrite)

// allWrites are fenced and RequestHandoff: every call that changes a lease
// row of a worker that holds it.
var allWrites = append(slices.Clip(fenced), handoffWrite)

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
	ls, err := leasesOf(s.Snapshot(ctx, "orders"))
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if diff := cmp.Diff([]lease.Lease{l}, ls, opts); diff != "" {
		t.Fatalf("Snapshot leases (-want +got):\n%s", diff)
	}
	ls, err = leasesOf(s.Snapshot(ctx, "other"))
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
	ls, err := leasesOf(s.Snapshot(ctx, "orders"))
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
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
		if ls, err := leasesOf(s.Snapshot(ctx, stream)); err == nil {
			t.Errorf("List(%q) = %v, nil; want an error", stream, ls)
		}
	}

	// Shard ids starting with '@' are reserved for the table's own rows.
	reserved := lease.Key{Stream: "orders", ShardID: "@worker:w1"}
	if l, err := s.Ensure(ctx, reserved, nil); err == nil || errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("Ensure(%#v) = %+v, %v; want an error that is not lease.ErrLeaseLost", reserved, l, err)
	}
	for _, k := range []lease.Key{reserved, {Stream: "", ShardID: "s"}, {Stream: "orders", ShardID: ""}} {
		if l, err := s.Get(ctx, k); err == nil || errors.Is(err, lease.ErrNotFound) {
			t.Errorf("Get(%#v) = %+v, %v; want an error that is not lease.ErrNotFound", k, l, err)
		}
	}
	for _, stream := range []string{"", "arn:aws:kinesis:us-east-1:1:stream/orders"} {
		if snap, err := s.Snapshot(ctx, stream); err == nil {
			t.Errorf("Snapshot(%q) = %+v, nil; want an error", stream, snap)
		}
	}
	if ks, err := s.Owned(ctx, ""); err == nil || errors.Is(err, lease.ErrNoOwnerIndex) {
		t.Errorf("Owned(\"\") = %v, %v; want an argument error", ks, err)
	}
	// Only LeaderKey's reserved shard id is a lease's.
	for _, shard := range []string{"@leader2", "@Leader", "@", "@leader:x"} {
		k := lease.Key{Stream: "orders", ShardID: shard}
		if l, err := s.Ensure(ctx, k, nil); err == nil {
			t.Errorf("Ensure(%#v) = %+v, nil; want an error", k, l)
		}
	}
	for _, w := range []lease.Worker{{Stream: "", Owner: "w1"}, {Stream: "orders", Owner: ""}, {Stream: "arn:aws:kinesis:us-east-1:1:stream/orders", Owner: "w1"}} {
		if got, err := s.Heartbeat(ctx, w.Stream, w.Owner, nil); err == nil || errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("Heartbeat(%q, %q) = %+v, %v; want an error that is not lease.ErrLeaseLost", w.Stream, w.Owner, got, err)
		}
		if err := s.RemoveWorker(ctx, w); err == nil || errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("RemoveWorker(%+v) = %v; want an error that is not lease.ErrLeaseLost", w, err)
		}
	}

	l := ensure(t, s, key("orders", 0))
	if got, err := s.Take(ctx, l, ""); err == nil || errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("Take with an empty owner = %+v, %v; want an error that is not lease.ErrLeaseLost", got, err)
	}
	checkStored(t, s, l)
	l = take(t, s, l, "w1")
	if got, err := s.Checkpoint(ctx, l, "", 0); err == nil || errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("Checkpoint with an empty sequence number = %+v, %v; want an error that is not lease.ErrLeaseLost", got, err)
	}
	if got, err := s.Transfer(ctx, l, ""); err == nil || errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("Transfer to an empty owner = %+v, %v; want an error that is not lease.ErrLeaseLost", got, err)
	}
	if got, err := s.RequestHandoff(ctx, l, ""); err == nil || errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("RequestHandoff by an empty requester = %+v, %v; want an error that is not lease.ErrLeaseLost", got, err)
	}
	if got, err := s.RequestHandoff(ctx, l, "w1"); err == nil || errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("RequestHandoff by the owner = %+v, %v; want an error that is not lease.ErrLeaseLost", got, err)
	}
	// Every write of an invalid key is refused without I/O.
	for _, held := range []lease.Lease{
		{Key: reserved, Owner: "w1", Counter: l.Counter},
		{Key: lease.Key{Stream: "orders"}, Owner: "w1", Counter: l.Counter},
	} {
		for _, w := range allWrites {
			if got, err := w.do(ctx, s, held); err == nil || errors.Is(err, lease.ErrLeaseLost) {
				t.Errorf("%s of %#v = %+v, %v; want an error that is not lease.ErrLeaseLost", w.name, held.Key, got, err)
			}
		}
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
		for _, w := range fenced {
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
	for _, w := range allWrites {
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
	_, err := s.Checkpoint(ctx, w1, "300", 0)
	checkLost(t, s, err, w2, false)
}

// testRepeatedWrite: a write made a second time from the held lease the
// first one consumed fails, even at once and from the same process, though
// the row then has exactly the owner, counter and checkpoint the second
// write would produce. (A store that recognises its own applied write after
// a lost answer, as DynamoDB does, must not take the first write for the
// second.)
func testRepeatedWrite(t *testing.T, s lease.Store) {
	for i, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			held := checkpoint(t, s, take(t, s, ensure(t, s, key("orders", i)), "w1"), "100")
			first, err := w.do(t.Context(), s, held)
			if err != nil {
				t.Fatalf("%s: %v", w.name, err)
			}
			got, err := w.do(t.Context(), s, held)
			if err == nil {
				t.Fatalf("%s again from the same held lease = %+v, nil; want lease.ErrLeaseLost", w.name, got)
			}
			checkLost(t, s, err, first, false)
		})
	}
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
	// Renew, Checkpoint, Release and Transfer of a free lease are refused:
	// nobody holds it. Nor is a handoff of a free lease requested: the
	// requester takes it.
	free := ensure(t, s, key("orders", 0))
	for _, w := range append(slices.Clip(writes[1:]), handoffWrite) {
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
		got, err := leasesOf(s.Snapshot(ctx, stream))
		if err != nil {
			t.Fatalf("Snapshot(%q): %v", stream, err)
		}
		if diff := cmp.Diff(w, got, opts); diff != "" {
			t.Errorf("List(%q) (-want +got):\n%s", stream, diff)
		}
	}
	// A stream whose name is a prefix of another's sees only its own.
	if got, err := leasesOf(s.Snapshot(ctx, "order")); err != nil || len(got) != 0 {
		t.Errorf("List(%q) = %v, %v; want no leases", "order", got, err)
	}
}

func testDelete(t *testing.T, s lease.Store) {
	ctx := t.Context()
	k := key("orders", 0)
	held := take(t, s, ensure(t, s, k), "w1")
	keep := ensure(t, s, key("orders", 1))
	if err := s.Delete(ctx, held); err != nil {
		t.Fatalf("Delete by the owner: %v", err)
	}
	if got, err := s.Get(ctx, k); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get after Delete = %+v, %v; want lease.ErrNotFound", got, err)
	}
	// Writes with a held copy fail and do not bring the row back; nor do a
	// handoff request and a second Delete.
	for _, w := range allWrites {
		got, err := w.do(ctx, s, held)
		if err == nil {
			t.Fatalf("%s of a deleted lease = %+v, nil; want lease.ErrLeaseLost", w.name, got)
		}
		checkLost(t, s, err, held, true)
	}
	if diff := cmp.Diff([]lease.Lease{keep}, list(t, s, "orders"), opts); diff != "" {
		t.Fatalf("List after Delete (-want +got):\n%s", diff)
	}
	// Ensure creates it anew, free and at counter 0.
	checkLease(t, "Ensure after Delete", ensure(t, s, k), lease.Lease{Key: k})
}

func testDeleteFenced(t *testing.T, s lease.Store) {
	ctx := t.Context()
	// A free row is deleted with the counter it was read at; a stale
	// counter is refused, and so is the lease as held before the release.
	k := key("orders", 0)
	held := checkpoint(t, s, take(t, s, ensure(t, s, k), "w1"), "100")
	free := release(t, s, held)
	stale := free
	stale.Counter--
	checkLost(t, s, s.Delete(ctx, stale), free, false)
	checkLost(t, s, s.Delete(ctx, held), free, false)
	if err := s.Delete(ctx, free); err != nil {
		t.Fatalf("Delete of a free lease with its counter: %v", err)
	}
	checkLost(t, s, s.Delete(ctx, free), free, true)

	// The lease of another worker, as read: a renewal in between saves it.
	k = key("orders", 1)
	w1 := take(t, s, ensure(t, s, k), "w1")
	seen := get(t, s, k)
	w1 = renew(t, s, w1)
	checkLost(t, s, s.Delete(ctx, seen), w1, false)
	// A handoff request does not change the counter: a Delete with the
	// lease as read before the request succeeds.
	seen = get(t, s, k)
	requestHandoff(t, s, seen, "w2")
	if err := s.Delete(ctx, seen); err != nil {
		t.Fatalf("Delete after a handoff request: %v", err)
	}
	// A missing row is refused.
	missing := lease.Lease{Key: key("orders", 9)}
	checkLost(t, s, s.Delete(ctx, missing), missing, true)
	if ls := list(t, s, "orders"); len(ls) != 0 {
		t.Fatalf("List after deleting every lease = %+v, want none", ls)
	}
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
		{"Transfer", func(l lease.Lease) lease.Lease { return transfer(t, s, l, "w2") }},
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
			return s.Checkpoint(ctx, held, fmt.Sprint(1000+i), 0)
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

func testHandoffCleared(t *testing.T, s lease.Store) {
	k := key("orders", 0)
	// Renew and Checkpoint keep a requested handoff; Release clears it.
	l := take(t, s, ensure(t, s, k), "w1")
	requestHandoff(t, s, l, "w2")
	l = renew(t, s, l)
	l = checkpoint(t, s, l, "100")
	checkLease(t, "Renew and Checkpoint after RequestHandoff", l,
		lease.Lease{Key: k, Owner: "w1", Counter: 3, OwnerSwitches: 1, Checkpoint: "100", Handoff: "w2"})
	l = release(t, s, l)
	checkLease(t, "Release", l, lease.Lease{Key: k, Counter: 4, OwnerSwitches: 1, Checkpoint: "100"})
	// A take clears it, whoever takes: the owner itself or a thief.
	l = requestHandoff(t, s, take(t, s, l, "w1"), "w2")
	l = take(t, s, l, "w1")
	checkLease(t, "Take by the owner", l, lease.Lease{Key: k, Owner: "w1", Counter: 6, OwnerSwitches: 2, Checkpoint: "100"})
	requestHandoff(t, s, l, "w2")
	l = take(t, s, get(t, s, k), "w3")
	checkLease(t, "steal", l, lease.Lease{Key: k, Owner: "w3", Counter: 7, OwnerSwitches: 3, Checkpoint: "100"})
}

func testRequestHandoff(t *testing.T, s lease.Store) {
	ctx := t.Context()
	k := key("orders", 0)
	held := checkpoint(t, s, take(t, s, ensure(t, s, k), "w1"), "100")
	// w2 read the lease and asks for it: only Handoff changes, neither the
	// counter nor RenewedAt.
	seen := get(t, s, k)
	want := held
	want.Handoff = "w2"
	if diff := cmp.Diff(want, requestHandoff(t, s, seen, "w2"), opts); diff != "" {
		t.Fatalf("RequestHandoff (-want +got):\n%s", diff)
	}
	// Asking again is harmless.
	if diff := cmp.Diff(want, requestHandoff(t, s, seen, "w2"), opts); diff != "" {
		t.Fatalf("second RequestHandoff by the same requester (-want +got):\n%s", diff)
	}
	// Another requester is refused: w2 asked first.
	_, err := s.RequestHandoff(ctx, seen, "w3")
	checkLost(t, s, err, want, false)
	// The owner's fenced writes from the lease it holds keep working, and
	// keep the request.
	held = renew(t, s, held)
	held = checkpoint(t, s, held, "200")
	checkLease(t, "the owner's writes after the request", held,
		lease.Lease{Key: k, Owner: "w1", Counter: 4, OwnerSwitches: 1, Checkpoint: "200", Handoff: "w2"})
	// The request is conditional on the owner only: the requester's copy
	// with a stale counter still matches, and changes no counter.
	if got := requestHandoff(t, s, seen, "w2"); got.Counter != held.Counter {
		t.Fatalf("RequestHandoff changed the counter to %d, want %d", got.Counter, held.Counter)
	}
	// A stale owner is refused.
	stale := held
	stale.Owner = "w0"
	_, err = s.RequestHandoff(ctx, stale, "w2")
	checkLost(t, s, err, held, false)
	// So is a request of the previous owner's lease once it moved on.
	moved := transfer(t, s, held, "w2")
	_, err = s.RequestHandoff(ctx, held, "w3")
	checkLost(t, s, err, moved, false)
	// A free lease is taken, not requested; a missing one is refused.
	free := release(t, s, moved)
	_, err = s.RequestHandoff(ctx, free, "w3")
	checkLost(t, s, err, free, false)
	missing := lease.Lease{Key: key("orders", 9), Owner: "w1"}
	_, err = s.RequestHandoff(ctx, missing, "w2")
	checkLost(t, s, err, missing, true)
}

func testTransfer(t *testing.T, s lease.Store) {
	ctx := t.Context()
	k := key("orders", 0)
	held := checkpoint(t, s, take(t, s, ensure(t, s, k), "w1"), "100")
	requestHandoff(t, s, get(t, s, k), "w2")
	// The owner sees the request at its next write, checkpoints and
	// transfers.
	held = checkpoint(t, s, held, "150")
	if held.Handoff != "w2" {
		t.Fatalf("Checkpoint after the request returned Handoff %q, want w2", held.Handoff)
	}
	moved := transfer(t, s, held, held.Handoff)
	checkLease(t, "Transfer", moved, lease.Lease{Key: k, Owner: "w2", Counter: 4, OwnerSwitches: 2, Checkpoint: "150"})
	// The previous owner's lease is stale from then on.
	for _, w := range allWrites {
		got, err := w.do(ctx, s, held)
		if err == nil {
			t.Fatalf("%s by the previous owner after Transfer = %+v, nil; want lease.ErrLeaseLost", w.name, got)
		}
		checkLost(t, s, err, moved, false)
	}
	// The new owner holds it.
	moved = checkpoint(t, s, renew(t, s, moved), "200")
	// A transfer to oneself bumps the counter, not OwnerSwitches.
	moved = transfer(t, s, moved, "w2")
	checkLease(t, "Transfer to the owner", moved, lease.Lease{Key: k, Owner: "w2", Counter: 7, OwnerSwitches: 2, Checkpoint: "200"})
	// A transfer nobody asked for is a transfer all the same.
	moved = transfer(t, s, moved, "w3")
	checkLease(t, "Transfer without a request", moved, lease.Lease{Key: k, Owner: "w3", Counter: 8, OwnerSwitches: 3, Checkpoint: "200"})
}

func testLastCheckpoint(t *testing.T, s lease.Store) {
	ctx := t.Context()
	k := key("orders", 0)
	// A lease as the store returned it: Release keeps its checkpoint.
	held := checkpoint(t, s, take(t, s, ensure(t, s, k), "w1"), "100")
	free := release(t, s, held)
	checkLease(t, "Release", free, lease.Lease{Key: k, Counter: 3, OwnerSwitches: 1, Checkpoint: "100"})
	// The owner's last checkpoint, set in the held lease, is written with
	// the release: inside a KPL aggregate...
	held = take(t, s, free, "w1")
	held.Checkpoint, held.SubSequence = "200", 3
	free = release(t, s, held)
	checkLease(t, "Release with the last checkpoint", free, lease.Lease{Key: k, Counter: 5, OwnerSwitches: 2, Checkpoint: "200", SubSequence: 3})
	checkStored(t, s, free)
	// ... and with a transfer, where a whole record clears the sub-sequence.
	held = take(t, s, free, "w1")
	held.Checkpoint, held.SubSequence = "300", 0
	moved := transfer(t, s, held, "w2")
	checkLease(t, "Transfer with the last checkpoint", moved, lease.Lease{Key: k, Owner: "w2", Counter: 7, OwnerSwitches: 4, Checkpoint: "300"})
	checkStored(t, s, moved)
	// An empty checkpoint in the held lease keeps the row's.
	held = moved
	held.Checkpoint = ""
	free = release(t, s, held)
	checkLease(t, "Release with an empty checkpoint", free, lease.Lease{Key: k, Counter: 8, OwnerSwitches: 4, Checkpoint: "300"})
	// An invalid checkpoint is refused without I/O, with an error that is
	// not ErrLeaseLost.
	held = take(t, s, free, "w1")
	for _, bad := range []lease.Lease{
		{Checkpoint: "400", SubSequence: -1},
		{Checkpoint: lease.ShardEnd, SubSequence: 2},
	} {
		h := held
		h.Checkpoint, h.SubSequence = bad.Checkpoint, bad.SubSequence
		if got, err := s.Release(ctx, h); err == nil || errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("Release with checkpoint %q sub-sequence %d = %+v, %v; want an error that is not lease.ErrLeaseLost", h.Checkpoint, h.SubSequence, got, err)
		}
		if got, err := s.Transfer(ctx, h, "w2"); err == nil || errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("Transfer with checkpoint %q sub-sequence %d = %+v, %v; want an error that is not lease.ErrLeaseLost", h.Checkpoint, h.SubSequence, got, err)
		}
	}
	checkStored(t, s, held)
}

// testSentinelCheckpoints: the checkpoints that are not sequence numbers
// (a child started where its parents left off, and a shard the
// long-running mode started at the tip: "LATEST@" and a time in Unix
// milliseconds) are kept as any other, by Checkpoint, Renew, Release,
// Transfer and Take: the store keeps any non-empty string.
func testSentinelCheckpoints(t *testing.T, s lease.Store) {
	for i, cp := range []string{lease.TrimHorizon, lease.AtTimestamp, "LATEST@1765000000000"} {
		k := key("sentinels", i)
		held := checkpoint(t, s, take(t, s, ensure(t, s, k), "w1"), cp)
		held = renew(t, s, held)
		free := release(t, s, held)
		checkLease(t, "Release after a checkpoint "+cp, free, lease.Lease{Key: k, Counter: 4, OwnerSwitches: 1, Checkpoint: cp})
		held = take(t, s, free, "w2")
		checkLease(t, "Take of a lease at "+cp, held, lease.Lease{Key: k, Owner: "w2", Counter: 5, OwnerSwitches: 2, Checkpoint: cp})
		moved := transfer(t, s, held, "w3")
		checkLease(t, "Transfer of a lease at "+cp, moved, lease.Lease{Key: k, Owner: "w3", Counter: 6, OwnerSwitches: 3, Checkpoint: cp})
		free = release(t, s, moved)
		checkLease(t, "Release with the checkpoint "+cp+" held", free, lease.Lease{Key: k, Counter: 7, OwnerSwitches: 3, Checkpoint: cp})
		checkStored(t, s, free)
	}
}

func testHeartbeat(t *testing.T, s lease.Store) {
	check := func(what string, w lease.Worker, want lease.Worker, before, after time.Time) {
		t.Helper()
		if diff := cmp.Diff(want, w, cmpopts.IgnoreFields(lease.Worker{}, "RenewedAt")); diff != "" {
			t.Fatalf("%s (-want +got):\n%s", what, diff)
		}
		lo := before.UTC().Truncate(time.Millisecond)
		if w.RenewedAt.Before(lo) || w.RenewedAt.After(after) || w.RenewedAt.Location() != time.UTC {
			t.Fatalf("%s: RenewedAt = %v, want UTC within [%v, %v]", what, w.RenewedAt, lo, after)
		}
	}
	before := time.Now()
	w := heartbeat(t, s, "orders", "w1")
	check("first Heartbeat", w, lease.Worker{Stream: "orders", Owner: "w1", Counter: 1}, before, time.Now())
	before = time.Now()
	w = heartbeat(t, s, "orders", "w1")
	check("second Heartbeat", w, lease.Worker{Stream: "orders", Owner: "w1", Counter: 2}, before, time.Now())
	// Workers and streams are independent.
	w0 := heartbeat(t, s, "orders", "w0")
	check("another worker", w0, lease.Worker{Stream: "orders", Owner: "w0", Counter: 1}, before, time.Now())
	p := heartbeat(t, s, "payments", "w1")
	check("another stream", p, lease.Worker{Stream: "payments", Owner: "w1", Counter: 1}, before, time.Now())
	checkWorkers(t, s, "orders", w0, w)
	checkWorkers(t, s, "payments", p)
	// An owner id as NewOwnerID makes it in ECS.
	task := heartbeat(t, s, "orders", "ecs-task/0123456789abcdef-a1b2c3d4e5f6")
	checkWorkers(t, s, "orders", task, w0, w) // ordered by owner id, byte-wise
}

func testSnapshot(t *testing.T, s lease.Store) {
	ctx := t.Context()
	var leases []lease.Lease
	for _, n := range []int{2, 0, 1} {
		leases = append(leases, ensure(t, s, key("orders", n)))
	}
	requestHandoff(t, s, take(t, s, leases[1], "w1"), "w2")
	take(t, s, leases[0], "w2")
	ensure(t, s, key("order", 0)) // a stream whose name is a prefix
	var workers []lease.Worker
	for _, owner := range []string{"w2", "w1", "w3"} {
		workers = append(workers, heartbeat(t, s, "orders", owner))
	}
	workers[0] = heartbeat(t, s, "orders", "w2")
	heartbeat(t, s, "order", "w9")
	heartbeat(t, s, "payments", "w1")

	snap := snapshot(t, s, "orders")
	ls := list(t, s, "orders")
	if len(ls) != 3 {
		t.Fatalf("List = %+v, want the 3 leases and no worker rows", ls)
	}
	if diff := cmp.Diff(ls, snap.Leases, opts); diff != "" {
		t.Fatalf("Snapshot.Leases differ from List (-List +Snapshot):\n%s", diff)
	}
	want := []lease.Worker{workers[1], workers[0], workers[2]} // by owner
	if diff := cmp.Diff(want, snap.Workers, opts); diff != "" {
		t.Fatalf("Snapshot.Workers (-want +got):\n%s", diff)
	}
	// A stream with workers and no leases, and one with neither.
	pay := snapshot(t, s, "payments")
	if len(pay.Leases) != 0 || len(pay.Workers) != 1 || pay.Workers[0].Owner != "w1" {
		t.Fatalf("Snapshot(payments) = %+v, want no leases and worker w1", pay)
	}
	if ls := list(t, s, "payments"); len(ls) != 0 {
		t.Fatalf("List(payments) = %+v, want no leases (worker rows are not leases)", ls)
	}
	if snap.Leader != nil {
		t.Fatalf("Snapshot.Leader = %+v without a leader row, want nil", snap.Leader)
	}
	if none := snapshot(t, s, "other"); len(none.Leases) != 0 || len(none.Workers) != 0 {
		t.Fatalf("Snapshot of an empty stream = %+v, want nothing", none)
	}
	if _, err := s.Get(ctx, lease.Key{Stream: "orders", ShardID: "w1"}); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get of a worker's owner id as a shard id: %v, want lease.ErrNotFound", err)
	}
}

func testWorkerRowsAreNotLeases(t *testing.T, s lease.Store) {
	ctx := t.Context()
	w := heartbeat(t, s, "orders", "w1")
	// No lease call reaches a worker row, whatever key it is given.
	for _, shard := range []string{"@worker:w1", "w1", "worker:w1"} {
		k := lease.Key{Stream: "orders", ShardID: shard}
		if l, err := s.Get(ctx, k); err == nil {
			t.Errorf("Get(%v) = %+v, nil; want an error", k, l)
		}
		for _, owner := range []string{"", "w1"} {
			held := lease.Lease{Key: k, Owner: owner, Counter: w.Counter}
			for _, wr := range allWrites {
				if got, err := wr.do(ctx, s, held); err == nil {
					t.Errorf("%s of %+v = %+v, nil; want an error", wr.name, held, got)
				}
			}
		}
	}
	checkWorkers(t, s, "orders", w)
	if ls := list(t, s, "orders"); len(ls) != 0 {
		t.Fatalf("List = %+v, want no leases", ls)
	}
	// A lease and a worker of the same name live side by side.
	l := take(t, s, ensure(t, s, lease.Key{Stream: "orders", ShardID: "w1"}), "w1")
	w = heartbeat(t, s, "orders", "w1")
	checkWorkers(t, s, "orders", w)
	if diff := cmp.Diff([]lease.Lease{l}, list(t, s, "orders"), opts); diff != "" {
		t.Fatalf("Snapshot leases (-want +got):\n%s", diff)
	}
	if err := s.RemoveWorker(ctx, w); err != nil {
		t.Fatalf("RemoveWorker: %v", err)
	}
	checkStored(t, s, l)
}

func testRemoveWorker(t *testing.T, s lease.Store) {
	ctx := t.Context()
	old := heartbeat(t, s, "orders", "w1")
	cur := heartbeat(t, s, "orders", "w1")
	other := heartbeat(t, s, "orders", "w2")
	l := take(t, s, ensure(t, s, key("orders", 0)), "w1")
	// The worker heartbeat since it was observed: refused.
	if err := s.RemoveWorker(ctx, old); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("RemoveWorker with a stale counter = %v, want lease.ErrLeaseLost", err)
	}
	checkWorkers(t, s, "orders", cur, other)
	if err := s.RemoveWorker(ctx, cur); err != nil {
		t.Fatalf("RemoveWorker: %v", err)
	}
	checkWorkers(t, s, "orders", other)
	// The worker's leases are not touched.
	checkStored(t, s, l)
	// A row that is gone is refused.
	if err := s.RemoveWorker(ctx, cur); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("RemoveWorker of a removed worker = %v, want lease.ErrLeaseLost", err)
	}
	if err := s.RemoveWorker(ctx, lease.Worker{Stream: "payments", Owner: "w2", Counter: other.Counter}); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("RemoveWorker of a worker of another stream = %v, want lease.ErrLeaseLost", err)
	}
	checkWorkers(t, s, "orders", other)
	// A later heartbeat registers the worker anew.
	again := heartbeat(t, s, "orders", "w1")
	if again.Counter != 1 {
		t.Fatalf("Heartbeat after RemoveWorker = %+v, want counter 1", again)
	}
	checkWorkers(t, s, "orders", again, other)
}

func testConcurrentRequestHandoff(t *testing.T, s lease.Store) {
	held := take(t, s, ensure(t, s, key("orders", 0)), "w1")
	ls, errs := race(func(i int) (lease.Lease, error) {
		return s.RequestHandoff(t.Context(), held, fmt.Sprintf("req%02d", i))
	})
	w := checkOneWinner(t, s, ls, errs)
	want := held
	want.Handoff = w.Handoff
	if diff := cmp.Diff(want, w, opts); diff != "" || w.Handoff == "" {
		t.Fatalf("winner (-want +got):\n%s", diff)
	}
}

func testConcurrentTransferRenew(t *testing.T, s lease.Store) {
	// The owner's renewal races with transfers from the same counter (a
	// renewal timer and a handoff, say): one wins.
	k := key("orders", 0)
	held := take(t, s, ensure(t, s, k), "w1")
	held = requestHandoff(t, s, held, "w2")
	ls, errs := race(func(i int) (lease.Lease, error) {
		if i%2 == 0 {
			return s.Renew(t.Context(), held)
		}
		return s.Transfer(t.Context(), held, fmt.Sprintf("to%02d", i))
	})
	w := checkOneWinner(t, s, ls, errs)
	if w.Counter != held.Counter+1 {
		t.Fatalf("winner's counter = %d, want %d", w.Counter, held.Counter+1)
	}
	if (w.Owner == "w1") != (w.Handoff == "w2") {
		t.Fatalf("winner %+v: a renewal keeps the handoff request, a transfer clears it", w)
	}
}

func testConcurrentHeartbeat(t *testing.T, s lease.Store) {
	// Heartbeats are upserts: none is lost, none applied twice.
	counters, errs := make([]int64, Racers), make([]error, Racers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range Racers {
		done.Go(func() {
			start.Wait()
			w, err := s.Heartbeat(t.Context(), "orders", "w1", nil)
			counters[i], errs[i] = w.Counter, err
		})
	}
	start.Done()
	done.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	slices.Sort(counters)
	for i, c := range counters {
		if c != int64(i+1) {
			t.Fatalf("counters returned = %v, want 1 to %d", counters, Racers)
		}
	}
	ws := snapshot(t, s, "orders").Workers
	if len(ws) != 1 || ws[0].Counter != Racers {
		t.Fatalf("workers after %d heartbeats = %+v, want w1 at counter %d", Racers, ws, Racers)
	}
}

// leasesOf returns a snapshot's leases.
func leasesOf(s lease.Snapshot, err error) ([]lease.Lease, error) { return s.Leases, err }

// testHeartbeatLoad: a worker's load round-trips through Heartbeat and
// Snapshot, rounded and bounded as lease.Load says (polls unknown, or not
// a finite non-negative number, stored as -1); a nil load stores none,
// removing the one before; the store keeps its own copy.
func testHeartbeatLoad(t *testing.T, s lease.Store) {
	ctx := t.Context()
	beat := func(load *lease.Load) lease.Worker {
		t.Helper()
		w, err := s.Heartbeat(ctx, "orders", "w1", load)
		if err != nil {
			t.Fatalf("Heartbeat(orders, w1, %+v): %v", load, err)
		}
		checkWorkers(t, s, "orders", w)
		return w
	}
	in := &lease.Load{CPU: 0.5, Shards: map[string]lease.Throughput{
		"shardId-000000000000": {Records: 1000, Bytes: 1048576, Polls: 4.56789},
		"shardId-000000000001": {Records: 0.25, Bytes: 12.5, Polls: 1},
		"shardId-000000000002": {},
		"shardId-000000000003": {Records: 3, Bytes: 300, Polls: -1}, // polls unknown
	}}
	w := beat(in)
	want := &lease.Load{CPU: 0.5, Shards: map[string]lease.Throughput{
		"shardId-000000000000": {Records: 1000, Bytes: 1050000, Polls: 4.57}, // 3 significant digits
		"shardId-000000000001": {Records: 0.25, Bytes: 12.5, Polls: 1},
		"shardId-000000000002": {},
		"shardId-000000000003": {Records: 3, Bytes: 300, Polls: -1},
	}}
	if diff := cmp.Diff(want, w.Load); diff != "" {
		t.Fatalf("Heartbeat's load (-want +got):\n%s", diff)
	}
	if w.Counter != 1 {
		t.Fatalf("Heartbeat with a load: counter %d, want 1", w.Counter)
	}
	// The store copied the load in and out.
	in.Shards["shardId-000000000009"] = lease.Throughput{Records: 1}
	w.Load.Shards["shardId-000000000008"] = lease.Throughput{Records: 1}
	if got := snapshot(t, s, "orders").Workers[0].Load; !cmp.Equal(want, got) {
		t.Fatalf("stored load changed with the caller's maps:\n%s", cmp.Diff(want, got))
	}
	// nil removes it; the counter goes on.
	if w = beat(nil); w.Load != nil || w.Counter != 2 {
		t.Fatalf("Heartbeat with no load = %+v, want no load, counter 2", w)
	}
	// Unknown and odd values.
	w = beat(&lease.Load{CPU: -0.5})
	if diff := cmp.Diff(&lease.Load{CPU: -1}, w.Load, opts); diff != "" {
		t.Fatalf("unknown CPU, no shards (-want +got):\n%s", diff)
	}
	w = beat(&lease.Load{CPU: math.NaN(), Shards: map[string]lease.Throughput{
		"s": {Records: math.Inf(1), Bytes: -3, Polls: math.NaN()},
		"t": {Records: 0.000123456, Bytes: 123456789, Polls: 0.000987654},
		"u": {Polls: math.Inf(1)},
		"v": {Polls: -0.5},
	}})
	if diff := cmp.Diff(&lease.Load{CPU: -1, Shards: map[string]lease.Throughput{
		"s": {Polls: -1},
		"t": {Records: 0.000123, Bytes: 123000000, Polls: 0.000988},
		"u": {Polls: -1},
		"v": {Polls: -1},
	}}, w.Load); diff != "" {
		t.Fatalf("odd values (-want +got):\n%s", diff)
	}
	// Many shards: only the 1,000 busiest by bytes are kept.
	many := &lease.Load{CPU: 1, Shards: map[string]lease.Throughput{}}
	for i := range 1500 {
		many.Shards[fmt.Sprintf("shardId-%012d", i)] = lease.Throughput{Records: float64(i), Bytes: float64(100 * i)}
	}
	w = beat(many)
	if len(w.Load.Shards) != 1000 {
		t.Fatalf("a load of 1500 shards kept %d, want 1000", len(w.Load.Shards))
	}
	for i := range 1500 {
		_, kept := w.Load.Shards[fmt.Sprintf("shardId-%012d", i)]
		// Rounded to 3 digits, the rates of shards 1000 to 1499 tie in
		// places, but all are above those of 500 to 999 (exact), which are
		// above those of 0 to 499.
		if kept != (i >= 500) {
			t.Fatalf("shard %d kept = %v; want the 1000 with the most bytes (500 to 1499)", i, kept)
		}
	}
	// Another worker's load is its own.
	w2, err := s.Heartbeat(ctx, "orders", "w2", &lease.Load{CPU: 0.125})
	if err != nil {
		t.Fatalf("Heartbeat(w2): %v", err)
	}
	checkWorkers(t, s, "orders", w, w2)
}

// eventually is how long Owned may take to show a change (its index is
// eventually consistent).
const eventually = 10 * time.Second

// checkOwned fails the test unless Owned(owner) is want (in Key.String
// order), or becomes it within eventually.
func checkOwned(t *testing.T, s lease.Store, owner string, want ...lease.Key) {
	t.Helper()
	if want == nil {
		want = []lease.Key{}
	}
	deadline := time.Now().Add(eventually)
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		got, err := s.Owned(t.Context(), owner)
		if err != nil {
			t.Fatalf("Owned(%q): %v", owner, err)
		}
		if got == nil {
			t.Fatalf("Owned(%q) = nil, want a non-nil slice", owner)
		}
		diff := cmp.Diff(want, got)
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Owned(%q) after %v (-want +got):\n%s", owner, eventually, diff)
		}
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-t.Context().Done():
			timer.Stop()
			t.Fatalf("Owned(%q): %v", owner, t.Context().Err())
		}
	}
}

// testOwned: Owned lists the leases of an owner in every stream, and
// nothing else: no free, released or handed-over lease, no worker row, no
// leader row.
func testOwned(t *testing.T, s lease.Store) {
	checkOwned(t, s, "w1")
	a0 := take(t, s, ensure(t, s, key("orders", 0)), "w1")
	a1 := take(t, s, ensure(t, s, key("orders", 1)), "w2")
	ensure(t, s, key("orders", 2)) // free
	b0 := take(t, s, ensure(t, s, key("payments", 0)), "w1")
	b1 := release(t, s, take(t, s, ensure(t, s, key("payments", 1)), "w1"))
	c0 := take(t, s, ensure(t, s, key("order", 0)), "w1") // a stream whose name is a prefix
	heartbeat(t, s, "orders", "w1")
	heartbeat(t, s, "payments", "w1")
	heartbeat(t, s, "orders", "w2")
	take(t, s, ensure(t, s, lease.LeaderKey("orders")), "w1")
	checkOwned(t, s, "w1", c0.Key, a0.Key, b0.Key)
	checkOwned(t, s, "w2", a1.Key)
	checkOwned(t, s, "W1") // owner ids are compared exactly
	// Moves show in both owners' lists.
	transfer(t, s, requestHandoff(t, s, a0, "w2"), "w2")
	release(t, s, b0)
	take(t, s, b1, "w2")
	checkOwned(t, s, "w1", c0.Key)
	checkOwned(t, s, "w2", a0.Key, a1.Key, b1.Key)
	if err := s.Delete(t.Context(), get(t, s, c0.Key)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	checkOwned(t, s, "w1")
	checkOwned(t, s, "nobody")
}

// testLeaderRow: the leader row of LeaderKey is a lease for every lease
// call, returned by Snapshot as Leader only, never in Snapshot.Leases nor
// in Owned.
func testLeaderRow(t *testing.T, s lease.Store) {
	ctx := t.Context()
	k := lease.LeaderKey("orders")
	if k.Stream != "orders" || k.ShardID == "" || k.ShardID[0] != '@' {
		t.Fatalf("LeaderKey(orders) = %#v, want stream orders and a reserved shard id", k)
	}
	if got, err := lease.ParseKey(k.String()); err != nil || got != k {
		t.Fatalf("ParseKey(%q) = %#v, %v; want %#v", k.String(), got, err, k)
	}
	if _, err := s.Get(ctx, k); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get of a leader row not created: %v, want lease.ErrNotFound", err)
	}
	l := ensure(t, s, k)
	checkLease(t, "Ensure", l, lease.Lease{Key: k})
	shard := take(t, s, ensure(t, s, key("orders", 0)), "w1")
	heartbeat(t, s, "orders", "w1")
	l = take(t, s, l, "w1")
	checkLease(t, "Take", l, lease.Lease{Key: k, Owner: "w1", Counter: 1, OwnerSwitches: 1})
	l = renew(t, s, l)
	l = checkpoint(t, s, l, "plan-7") // any string: the group's own use
	snap := snapshot(t, s, "orders")
	if snap.Leader == nil {
		t.Fatalf("Snapshot.Leader = nil, want %+v", l)
	}
	if diff := cmp.Diff(l, *snap.Leader, opts); diff != "" {
		t.Fatalf("Snapshot.Leader (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]lease.Lease{shard}, snap.Leases, opts); diff != "" {
		t.Fatalf("Snapshot.Leases (-want +got), want no leader row:\n%s", diff)
	}
	if other := snapshot(t, s, "order"); other.Leader != nil {
		t.Fatalf("Snapshot of another stream has leader %+v", other.Leader)
	}
	checkOwned(t, s, "w1", shard.Key)
	// Fenced like any lease.
	if _, err := s.Renew(ctx, lease.Lease{Key: k, Owner: "w1", Counter: l.Counter - 1}); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("Renew of the leader row with a stale counter: %v, want lease.ErrLeaseLost", err)
	}
	l = requestHandoff(t, s, l, "w2")
	l = transfer(t, s, l, "w2")
	checkLease(t, "Transfer", l, lease.Lease{Key: k, Owner: "w2", Counter: 4, OwnerSwitches: 2, Checkpoint: "plan-7"})
	checkOwned(t, s, "w2")
	l = release(t, s, l)
	l = take(t, s, l, "w3")
	if got := snapshot(t, s, "orders").Leader; got == nil || got.Owner != "w3" {
		t.Fatalf("Snapshot.Leader after a take by w3 = %+v", got)
	}
	if err := s.Delete(ctx, l); err != nil {
		t.Fatalf("Delete of the leader row: %v", err)
	}
	if got := snapshot(t, s, "orders").Leader; got != nil {
		t.Fatalf("Snapshot.Leader after Delete = %+v, want nil", got)
	}
	// The leader key of a group that is not a stream works the same.
	app := ensure(t, s, lease.LeaderKey("my-app"))
	take(t, s, app, "w1")
	if snap := snapshot(t, s, "my-app"); snap.Leader == nil || len(snap.Leases) != 0 {
		t.Fatalf("Snapshot(my-app) = %+v, want only a leader", snap)
	}
}

// testEmptyOwner: a free lease that an older version wrote with an empty
// owner (leaseOwner = "" rather than none) reads and behaves as free: not
// listed by Owned, taken and deleted as a free lease. A store that can
// write such a row implements
//
//	PutOlderFreeLease(ctx context.Context, k lease.Key) error
//
// (a free row of k at counter 0 with an empty owner); for the others the
// case runs on a free lease made by Ensure.
func testEmptyOwner(t *testing.T, s lease.Store) {
	ctx := t.Context()
	plant := func(k lease.Key) lease.Lease {
		t.Helper()
		if older, ok := s.(interface {
			PutOlderFreeLease(ctx context.Context, k lease.Key) error
		}); ok {
			if err := older.PutOlderFreeLease(ctx, k); err != nil {
				t.Fatalf("PutOlderFreeLease(%v): %v", k, err)
			}
			return get(t, s, k)
		}
		return ensure(t, s, k)
	}
	l := plant(key("orders", 0))
	checkLease(t, "a free lease of an older version", l, lease.Lease{Key: key("orders", 0)})
	gone := plant(key("orders", 1))
	if diff := cmp.Diff([]lease.Lease{l, gone}, list(t, s, "orders"), opts); diff != "" {
		t.Fatalf("Snapshot.Leases (-want +got):\n%s", diff)
	}
	checkOwned(t, s, "w1")
	// Taken as free; a stale copy is still refused.
	l = take(t, s, l, "w1")
	checkLease(t, "Take", l, lease.Lease{Key: key("orders", 0), Owner: "w1", Counter: 1, OwnerSwitches: 1})
	if _, err := s.Take(ctx, lease.Lease{Key: l.Key}, "w2"); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("Take from the stale free copy: %v, want lease.ErrLeaseLost", err)
	}
	checkOwned(t, s, "w1", l.Key)
	release(t, s, l)
	checkOwned(t, s, "w1")
	// Deleted as free.
	if err := s.Delete(ctx, gone); err != nil {
		t.Fatalf("Delete of a free lease of an older version: %v", err)
	}
	if _, err := s.Get(ctx, gone.Key); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want lease.ErrNotFound", err)
	}
}
