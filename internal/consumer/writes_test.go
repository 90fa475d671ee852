package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
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
	releases    int
	transfers   int
	staleBeat   bool
}

func (w *writeLog) Release(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	l, err := w.Store.Release(ctx, held)
	if isLeaderRow(held) {
		return l, err // the leader row's writes are not the shards'
	}
	w.note(err, func() { w.releases++ })
	return l, err
}

func (w *writeLog) Transfer(ctx context.Context, held lease.Lease, to string) (lease.Lease, error) {
	l, err := w.Store.Transfer(ctx, held, to)
	if isLeaderRow(held) {
		return l, err // the leader row's writes are not the shards'
	}
	w.note(err, func() { w.transfers++ })
	return l, err
}

func (w *writeLog) Take(ctx context.Context, held lease.Lease, owner string) (lease.Lease, error) {
	l, err := w.Store.Take(ctx, held, owner)
	if isLeaderRow(held) {
		return l, err // the leader row's writes are not the shards'
	}
	w.note(err, func() { w.takes = append(w.takes, time.Now()) })
	return l, err
}

// isLeaderRow reports whether l is the stream's leader row (lead.go).
func isLeaderRow(l lease.Lease) bool { return l.Key == lease.LeaderKey(l.Key.Stream) }

// note runs count under w.mu when err is nil (the write was applied).
func (w *writeLog) note(err error, count func()) {
	if err == nil {
		w.mu.Lock()
		count()
		w.mu.Unlock()
	}
}

func (w *writeLog) Checkpoint(ctx context.Context, held lease.Lease, seq string, sub int) (lease.Lease, error) {
	l, err := w.Store.Checkpoint(ctx, held, seq, sub)
	if isLeaderRow(held) {
		return l, err // the leader row's writes are not the shards'
	}
	w.note(err, func() { w.checkpoints = append(w.checkpoints, time.Now()) })
	return l, err
}

func (w *writeLog) Snapshot(ctx context.Context, stream string) (lease.Snapshot, error) {
	w.mu.Lock()
	w.snapshots++
	w.mu.Unlock()
	return w.Store.Snapshot(ctx, stream)
}

func (w *writeLog) Heartbeat(ctx context.Context, stream, owner string, load *lease.Load) (lease.Worker, error) {
	r, err := w.Store.Heartbeat(ctx, stream, owner, load)
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

// TestLastCheckpointGoesWithTheLease: a graceful stop writes each shard's
// last checkpoint with the release of its lease, and a planned move with
// the transfer, one conditional write each; the next owner reads on from
// there and handles nothing twice.
func TestLastCheckpointGoesWithTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(2)
		last := f.fill(2, 20)
		store := &writeLog{Store: lease.NewMemory()}
		log := &handledLog{n: map[string]int{}}
		// No periodic checkpoint within the test: every checkpoint goes
		// with a release or a transfer.
		cfg := func(owner string) Config {
			return Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: owner, LeaseDuration: 3 * time.Second, CheckpointInterval: time.Hour}
		}
		a, stopA := run(t, cfg("a"), handler(log.handler("a")))
		waitFor(t, "40 records", func() bool { return log.count() == 40 })
		waitFor(t, "a holds both leases", func() bool { return len(a.Owned()) == 2 })
		b, stopB := run(t, cfg("b"), handler(log.handler("b")))
		waitFor(t, "1/1", func() bool { return len(a.Owned()) == 1 && len(b.Owned()) == 1 })
		store.mu.Lock()
		transfers := store.transfers
		store.mu.Unlock()
		if transfers != 1 {
			t.Errorf("%d transfers, want 1", transfers)
		}
		// More records, on both shards: each worker handles its own.
		more := map[string]string{}
		for id := range last {
			for i := range 10 {
				more[id] = f.put(id, fmt.Sprintf("key-%d", i%7), fmt.Sprintf("more-%s-%d", id, i))
			}
		}
		waitFor(t, "60 records", func() bool { return log.count() == 60 })
		synctest.Wait()
		stopB()
		stopA()
		if _, cps, _ := store.counts(); cps != 0 {
			t.Errorf("%d Checkpoint writes, want none: the last checkpoints go with the transfer and the releases", cps)
		}
		store.mu.Lock()
		releases := store.releases
		store.mu.Unlock()
		if releases != 2 {
			t.Errorf("%d releases, want 2", releases)
		}
		for id := range last {
			l := leaseOf(t, store, id)
			if l.Checkpoint != more[id] || l.Owner != "" {
				t.Errorf("%s after stop: checkpoint %s owner %q, want %s and no owner", id, l.Checkpoint, l.Owner, more[id])
			}
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		if len(log.dups) > 0 {
			t.Errorf("records handled twice: %v", log.dups)
		}
	})
}

// keepingStore is a Store of a user's own written before Release and
// Transfer had to write the held lease's checkpoint: it keeps the row's.
type keepingStore struct{ lease.Store }

func (k keepingStore) Release(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	row, err := k.Store.Get(ctx, held.Key)
	if err != nil {
		return lease.Lease{}, err
	}
	held.Checkpoint, held.SubSequence = row.Checkpoint, row.SubSequence
	return k.Store.Release(ctx, held)
}

// TestStoreKeepingItsCheckpointIsReported: a Store that does not write the
// last checkpoint with the release loses nothing (the records after its
// checkpoint come again), and the consumer says so in an error log.
func TestStoreKeepingItsCheckpointIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		f.fill(1, 10)
		mem := lease.NewMemory()
		errs := newErrorLog()
		logger := slog.New(errs)
		h := newRecorder()
		_, stop := run(t, Config{Kinesis: f, Store: keepingStore{mem}, Start: TrimHorizon(), Owner: "w1", CheckpointInterval: time.Hour, Logger: logger}, handler(h))
		waitFor(t, "10 records", func() bool { return h.count() == 10 })
		synctest.Wait()
		stop()
		if got := checkpointOf(t, mem, shardID(0)); got != "" {
			t.Fatalf("checkpoint %q: the store was expected to keep none", got)
		}
		if msgs := errs.messages(); len(msgs) != 1 || !strings.Contains(msgs[0], "did not write the last checkpoint") {
			t.Errorf("error logs %q: want one saying the store did not write the last checkpoint", msgs)
		}
	})
}

// errorLog is a slog.Handler that keeps the messages of error records.
type errorLog struct {
	mu   *sync.Mutex
	msgs *[]string
}

func newErrorLog() errorLog { return errorLog{mu: new(sync.Mutex), msgs: new([]string)} }

func (e errorLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (e errorLog) WithAttrs([]slog.Attr) slog.Handler           { return e }
func (e errorLog) WithGroup(string) slog.Handler                { return e }

func (e errorLog) Handle(_ context.Context, r slog.Record) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	*e.msgs = append(*e.msgs, r.Message)
	return nil
}

func (e errorLog) messages() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(*e.msgs)
}

// unusableStore is a lease store whose Heartbeat fails with err.
type unusableStore struct {
	lease.Store
	err error
}

func (u unusableStore) Heartbeat(context.Context, string, string, *lease.Load) (lease.Worker, error) {
	return lease.Worker{}, u.err
}

// TestRunStopsOnUnusableTable: when the worker's first call says the lease
// table is missing or is not a lease table, Run returns that error at once
// and reads nothing; any other failure of that call is retried.
func TestRunStopsOnUnusableTable(t *testing.T) {
	for _, kind := range []error{lease.ErrTableNotFound, lease.ErrNotLeaseTable} {
		t.Run(kind.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newStream(1)
				f.fill(1, 3)
				c := newConsumer(t, Config{Kinesis: f, Store: unusableStore{lease.NewMemory(), fmt.Errorf("lease: heartbeat: %w", kind)}, Start: TrimHorizon(), Owner: "w1"}, handler(newRecorder()))
				ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
				defer cancel()
				err := c.Run(ctx)
				if !errors.Is(err, kind) || ctx.Err() != nil {
					t.Fatalf("Run = %v (context: %v), want an error matching %v at once", err, ctx.Err(), kind)
				}
				if n := f.Calls("GetShardIterator") + f.Calls("ListShards"); n != 0 {
					t.Errorf("%d ListShards and GetShardIterator calls, want none", n)
				}
			})
		})
	}
	t.Run("other error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newStream(1)
			f.fill(1, 3)
			h := newRecorder()
			_, stop := run(t, Config{Kinesis: f, Store: unusableStore{lease.NewMemory(), errors.New("throttled")}, Start: TrimHorizon(), Owner: "w1"}, handler(h))
			waitFor(t, "3 records", func() bool { return h.count() == 3 })
			stop()
		})
	})
}
