package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/lease/leasetest"
)

func TestMemory(t *testing.T) {
	leasetest.TestStore(t, func(t *testing.T) lease.Store { return lease.NewMemory() })
}

// TestMemoryConcurrentWorkers lets workers compete for the leases of two
// streams with every kind of call at once (run it with -race). Each
// successful write must bump its lease's counter by exactly one, and each
// handoff request none: no write is lost and none is applied twice. Each
// heartbeat bumps its worker's counter by one.
func TestMemoryConcurrentWorkers(t *testing.T) {
	const (
		workers = 8
		rounds  = 200
		shards  = 4
	)
	ctx := t.Context()
	m := lease.NewMemory()
	streams := []string{"orders", "payments"}
	var wrote sync.Map // lease.Key -> *atomic.Int64: successful writes
	for _, s := range streams {
		for i := range shards {
			k := lease.Key{Stream: s, ShardID: fmt.Sprintf("shardId-%d", i)}
			if _, err := m.Ensure(ctx, k, nil); err != nil {
				t.Fatal(err)
			}
			wrote.Store(k, new(atomic.Int64))
		}
	}
	count := func(k lease.Key) { v, _ := wrote.Load(k); v.(*atomic.Int64).Add(1) }

	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			me := fmt.Sprintf("w%d", w)
			for r := range rounds {
				stream := streams[r%len(streams)]
				if _, err := m.Heartbeat(ctx, stream, me, nil); err != nil {
					errs <- err
					return
				}
				snap, err := m.Snapshot(ctx, stream)
				if err != nil {
					errs <- err
					return
				}
				for _, l := range snap.Leases {
					var err error
					switch {
					case l.Owner != me && (l.Owner == "" || r%7 == w%7): // take free, steal some
						_, err = m.Take(ctx, l, me)
					case l.Owner != me && r%3 == 0: // ask for some
						_, err = m.RequestHandoff(ctx, l, me)
						if err != nil && !errors.Is(err, lease.ErrLeaseLost) {
							errs <- err
							return
						}
						continue // not a counted write
					case l.Owner == me && l.Handoff != "" && l.Handoff != me:
						_, err = m.Transfer(ctx, l, l.Handoff)
					case l.Owner == me && r%5 == 0:
						_, err = m.Release(ctx, l)
					case l.Owner == me && r%2 == 0:
						_, err = m.Checkpoint(ctx, l, fmt.Sprint(r), 0)
					case l.Owner == me:
						_, err = m.Renew(ctx, l)
					default:
						_, err = m.Get(ctx, l.Key)
						continue
					}
					switch {
					case err == nil:
						count(l.Key)
					case !errors.Is(err, lease.ErrLeaseLost):
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range streams {
		snap, err := m.Snapshot(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Leases) != shards || len(snap.Workers) != workers {
			t.Fatalf("Snapshot(%q) returned %d leases and %d workers, want %d and %d", s, len(snap.Leases), len(snap.Workers), shards, workers)
		}
		for _, l := range snap.Leases {
			v, _ := wrote.Load(l.Key)
			if n := v.(*atomic.Int64).Load(); l.Counter != n || n == 0 {
				t.Errorf("%v: counter %d after %d successful writes", l.Key, l.Counter, n)
			}
		}
		for _, w := range snap.Workers {
			if w.Counter != rounds/int64(len(streams)) {
				t.Errorf("worker %s of %s: counter %d, want %d", w.Owner, s, w.Counter, rounds/len(streams))
			}
		}
	}
}

// TestMemoryCanceledContext checks that every call returns the context's
// error, and changes nothing, when the context is done.
func TestMemoryCanceledContext(t *testing.T) {
	m := lease.NewMemory()
	ctx := t.Context()
	k := lease.Key{Stream: "orders", ShardID: "shardId-0"}
	l, err := m.Ensure(ctx, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l, err = m.Take(ctx, l, "w1"); err != nil {
		t.Fatal(err)
	}
	w, err := m.Heartbeat(ctx, "orders", "w1", nil)
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for name, call := range map[string]func() error{
		"Ensure":         func() error { _, err := m.Ensure(canceled, k, nil); return err },
		"Snapshot":       func() error { _, err := m.Snapshot(canceled, "orders"); return err },
		"Get":            func() error { _, err := m.Get(canceled, k); return err },
		"Take":           func() error { _, err := m.Take(canceled, l, "w2"); return err },
		"Renew":          func() error { _, err := m.Renew(canceled, l); return err },
		"Checkpoint":     func() error { _, err := m.Checkpoint(canceled, l, "1", 0); return err },
		"Release":        func() error { _, err := m.Release(canceled, l); return err },
		"Transfer":       func() error { _, err := m.Transfer(canceled, l, "w2"); return err },
		"RequestHandoff": func() error { _, err := m.RequestHandoff(canceled, l, "w2"); return err },
		"Delete":         func() error { return m.Delete(canceled, l) },
		"Heartbeat":      func() error { _, err := m.Heartbeat(canceled, "orders", "w1", nil); return err },
		"RemoveWorker":   func() error { return m.RemoveWorker(canceled, w) },
	} {
		if err := call(); !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "lease: ") {
			t.Errorf("%s with a canceled context = %v, want a \"lease: \" error matching context.Canceled", name, err)
		}
	}
	snap, err := m.Snapshot(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Leases) != 1 || snap.Leases[0].Counter != l.Counter || snap.Leases[0].Handoff != "" ||
		len(snap.Workers) != 1 || snap.Workers[0].Counter != w.Counter {
		t.Fatalf("Snapshot after the canceled calls = %+v, want nothing changed", snap)
	}
}

// TestMemorySnapshotStreams: the rows of several streams, each as Snapshot
// returns them.
func TestMemorySnapshotStreams(t *testing.T) {
	ctx := t.Context()
	m := lease.NewMemory()
	for _, st := range []string{"a", "b", "c"} {
		for i := range 2 {
			if _, err := m.Ensure(ctx, lease.Key{Stream: st, ShardID: fmt.Sprintf("shardId-%d", i)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.Heartbeat(ctx, st, "w-"+st, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Ensure(ctx, lease.LeaderKey("a"), nil); err != nil {
		t.Fatal(err)
	}
	snaps, err := m.SnapshotStreams(ctx, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots, want a and b", len(snaps))
	}
	for _, st := range []string{"a", "b"} {
		want, err := m.Snapshot(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		got := snaps[st]
		if fmt.Sprint(got.Leases, got.Workers, got.Leader != nil) != fmt.Sprint(want.Leases, want.Workers, want.Leader != nil) {
			t.Errorf("stream %s: %+v, want %+v", st, got, want)
		}
	}
	if snaps["a"].Leader == nil || snaps["b"].Leader != nil {
		t.Error("leader rows misplaced")
	}
	if _, err := m.SnapshotStreams(ctx); err == nil {
		t.Error("SnapshotStreams of no stream succeeded")
	}
}
