package consumer

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/lease"
)

// writeLog is a lease store that notes when each Take, Checkpoint and
// Snapshot happened (on the test's clock), and can make Heartbeat return a
// row with a stale counter (as when a heartbeat was applied but its answer
// lost).
type writeLog struct {
	lease.Store
	mu          sync.Mutex
	takes       []time.Time
	checkpoints []time.Time
	snapshots   int
	staleBeat   bool
}

func (w *writeLog) Take(ctx context.Context, held lease.Lease, owner string) (lease.Lease, error) {
	l, err := w.Store.Take(ctx, held, owner)
	if err == nil {
		w.mu.Lock()
		w.takes = append(w.takes, time.Now())
		w.mu.Unlock()
	}
	return l, err
}

func (w *writeLog) Checkpoint(ctx context.Context, held lease.Lease, seq string, sub int) (lease.Lease, error) {
	l, err := w.Store.Checkpoint(ctx, held, seq, sub)
	if err == nil {
		w.mu.Lock()
		w.checkpoints = append(w.checkpoints, time.Now())
		w.mu.Unlock()
	}
	return l, err
}

func (w *writeLog) Snapshot(ctx context.Context, stream string) (lease.Snapshot, error) {
	w.mu.Lock()
	w.snapshots++
	w.mu.Unlock()
	return w.Store.Snapshot(ctx, stream)
}

func (w *writeLog) Heartbeat(ctx context.Context, stream, owner string) (lease.Worker, error) {
	r, err := w.Store.Heartbeat(ctx, stream, owner)
	w.mu.Lock()
	stale := w.staleBeat
	w.mu.Unlock()
	if err == nil && stale {
		r.Counter-- // applied, but the caller saw an older row
	}
	return r, err
}

func (w *writeLog) counts() (takes, checkpoints, snapshots int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.takes), len(w.checkpoints), w.snapshots
}

// TestFirstCheckpointAnIntervalAfterTake: the take of a lease counts as its
// first write, so the first checkpoint comes a CheckpointInterval after it,
// not at once when the first record settles; the later ones keep the
// interval, and the last one is written at shutdown without waiting.
func TestFirstCheckpointAnIntervalAfterTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 5 * time.Second
		f := newStream(1)
		last := f.fill(1, 10)
		store := &writeLog{Store: lease.NewMemory()}
		h := newRecorder()
		_, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Limit: 100, Owner: "w1", CheckpointInterval: interval}, handler(h))
		waitFor(t, "10 records", func() bool { return h.count() == 10 })
		synctest.Wait()
		if takes, cps, _ := store.counts(); takes != 1 || cps != 0 {
			t.Fatalf("after the first records: %d takes, %d checkpoints; want 1 take and no checkpoint within the interval", takes, cps)
		}
		waitFor(t, "the first checkpoint", func() bool { _, cps, _ := store.counts(); return cps == 1 })
		store.mu.Lock()
		gap := store.checkpoints[0].Sub(store.takes[0])
		store.mu.Unlock()
		if gap < interval {
			t.Errorf("first checkpoint %v after the take, want at least %v", gap, interval)
		}
		if got, want := checkpointOf(t, store, shardID(0)), last[shardID(0)]; got != want {
			t.Errorf("checkpoint %s, want %s", got, want)
		}
		// More records: the next checkpoint keeps the interval; the last one
		// is written at shutdown, at once.
		last = f.fill(1, 5)
		waitFor(t, "15 records", func() bool { return h.count() == 15 })
		synctest.Wait()
		start := time.Now()
		stop()
		if d := time.Since(start); d >= interval {
			t.Errorf("shutdown took %v: the last checkpoint waited for the interval", d)
		}
		store.mu.Lock()
		for i := 1; i < len(store.checkpoints)-1; i++ { // the last one: at shutdown
			if gap := store.checkpoints[i].Sub(store.checkpoints[i-1]); gap < interval {
				t.Errorf("checkpoint %d came %v after the one before, want at least %v", i, gap, interval)
			}
		}
		store.mu.Unlock()
		if got, want := checkpointOf(t, store, shardID(0)), last[shardID(0)]; got != want {
			t.Errorf("after stop: checkpoint %s, want %s", got, want)
		}
	})
}

// TestUnregisterWithoutScan: at the end of Run the worker's row is removed
// with the row its last heartbeat returned, without reading the table
// again; when that row is stale (a heartbeat applied but its answer lost),
// the row is read and removed all the same.
func TestUnregisterWithoutScan(t *testing.T) {
	for _, stale := range []bool{false, true} {
		name := map[bool]string{false: "last heartbeat", true: "stale heartbeat"}[stale]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newStream(2)
				f.fill(2, 10)
				mem := lease.NewMemory()
				store := &writeLog{Store: mem, staleBeat: stale}
				h := newRecorder()
				_, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Limit: 100, Owner: "w1"}, handler(h))
				waitFor(t, "20 records", func() bool { return h.count() == 20 })
				synctest.Wait()
				_, _, before := store.counts()
				stop()
				_, _, after := store.counts()
				snap, err := mem.Snapshot(context.Background(), testStream)
				if err != nil {
					t.Fatal(err)
				}
				if len(snap.Workers) != 0 {
					t.Errorf("after Run: workers %+v, want none", snap.Workers)
				}
				want := 0
				if stale {
					want = 1
				}
				if got := after - before; got != want {
					t.Errorf("%d table reads at shutdown, want %d", got, want)
				}
			})
		})
	}
}
