package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/retry"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// TestTrimmedParentWithRow (fault: a parent trimmed away but still holding
// a lease row blocked its children for ever): a shard ListShards no longer
// returns counts as done for its children, its row is never taken again
// (nobody retries GetShardIterator on it), and the row is deleted.
func TestTrimmedParentWithRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		parent := shardID(0)
		f.putNumbered(parent, 3, true)
		a, b := f.Split(testStream, parent)
		f.put(a, "k", "child-a")
		f.put(b, "k", "child-b")
		store := lease.NewMemory()
		// A consumer read the parent halfway, then died; later the parent
		// was trimmed away (its records outlived the retention).
		l, err := store.Ensure(t.Context(), lease.Key{Stream: testStream, ShardID: parent}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l, err = store.Take(t.Context(), l, "dead"); err != nil {
			t.Fatal(err)
		}
		if _, err = store.Checkpoint(t.Context(), l, f.Records(testStream)[0].SequenceNumber, 0); err != nil {
			t.Fatal(err)
		}
		f.Trim(testStream, parent)
		var iterCalls atomic.Int64
		f.ReadFail = func(api, shard string) error {
			if api == "GetShardIterator" && shard == parent {
				iterCalls.Add(1)
			}
			return nil
		}
		h := newRecorder()
		_, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", LeaseDuration: 3 * time.Second, ListInterval: 2 * time.Second}, handler(h))
		waitFor(t, "both children", func() bool { return h.on(a) == 1 && h.on(b) == 1 })
		waitFor(t, "the trimmed parent's row to go", func() bool {
			_, err := store.Get(context.Background(), lease.Key{Stream: testStream, ShardID: parent})
			return errors.Is(err, lease.ErrNotFound)
		})
		time.Sleep(30 * time.Second)
		stop()
		if n := iterCalls.Load(); n > 1 {
			t.Errorf("%d GetShardIterator calls for the trimmed parent, want at most 1", n)
		}
	})
}

// TestHeldShardTrimmed: a shard this worker holds disappears (trimmed
// away) while it reads it: the reader stops, the lease is released and
// the row cleaned up; nothing retries for ever.
func TestHeldShardTrimmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		parent := shardID(0)
		f.putNumbered(parent, 3, true)
		store := lease.NewMemory()
		h := newRecorder()
		release := make(chan struct{})
		h.outcome = func(m *message.Message) message.Outcome {
			if string(m.Payload) == "r1" {
				<-release // holds the shard's checkpoint while it is trimmed
			}
			return message.Ack()
		}
		c, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", ListInterval: 2 * time.Second, ShutdownTimeout: time.Second}, handler(h))
		waitFor(t, "the records", func() bool { return h.count() == 3 })
		a, _ := f.Split(testStream, parent)
		f.put(a, "k", "child")
		f.Trim(testStream, parent)
		close(release)
		waitFor(t, "the child", func() bool { return h.on(a) == 1 })
		waitFor(t, "the parent's row to go", func() bool {
			_, err := store.Get(context.Background(), lease.Key{Stream: testStream, ShardID: parent})
			return errors.Is(err, lease.ErrNotFound)
		})
		if slices.Contains(c.Owned(), parent) {
			t.Errorf("still holding the trimmed shard")
		}
		stop()
	})
}

// TestChildStartSurvivesParentCleanup: a child that started from its first
// record because its parent was read records that start in its row
// (TRIM_HORIZON) before any record of its own settled, so the trimmed
// parent's row can be deleted and a restart configured at LATEST still reads
// the child from its first record: nothing written to it while no worker
// ran is skipped.
func TestChildStartSurvivesParentCleanup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		parent := shardID(0)
		f.putNumbered(parent, 3, true)
		a, b := f.Split(testStream, parent)
		f.put(a, "k", "child-a")
		store := lease.NewMemory()
		h := newRecorder()
		cfg := Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", LeaseDuration: 3 * time.Second, ListInterval: 2 * time.Second}
		_, stop := run(t, cfg, handler(h))
		waitFor(t, "the parent and child a", func() bool { return h.on(parent) == 3 && h.on(a) == 1 })
		waitFor(t, "child b's inherited start in its row", func() bool { return checkpointOf(t, store, b) == lease.TrimHorizon })
		f.Trim(testStream, parent)
		waitFor(t, "the trimmed parent's row to go", func() bool {
			_, err := store.Get(context.Background(), lease.Key{Stream: testStream, ShardID: parent})
			return errors.Is(err, lease.ErrNotFound)
		})
		stop()

		f.put(b, "k", "written-while-down")
		cfg.Start = Latest()
		h2 := newRecorder()
		_, stop = run(t, cfg, handler(h2))
		defer stop()
		waitFor(t, "child b's record written while no worker ran", func() bool { return h2.on(b) == 1 })
		if n := h2.on(a); n != 0 {
			t.Errorf("child a delivered %d records again after its checkpoint", n)
		}
	})
}

// TestNothingRunsAfterRun (fault: an in-process RetryAfter copy was written
// after Run returned): Run stops while a delayed copy waits; once Run
// returned no goroutine of the consumer runs and nothing is written, ever.
func TestNothingRunsAfterRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := newStream(2)
	f.putNumbered(shardID(0), 5, true)
	f.putNumbered(shardID(1), 5, false)
	k := awsfake.NewKinesis()
	h := newRecorder()
	h.outcome = func(m *message.Message) message.Outcome {
		switch m.ShardID {
		case shardID(0):
			return message.RetryAfter(2*time.Second, nil)
		default:
			return message.Retry(nil) // delivered again after a backoff
		}
	}
	c := newConsumer(t, Config{Kinesis: f, StreamARN: f.arn, Start: TrimHorizon(), Owner: "w1", ShutdownTimeout: 200 * time.Millisecond},
		engineConfig{Handler: h, Policy: retry.Policy{MaxInProcessDelay: 5 * time.Second}, Publisher: newPublisher(t, k)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for h.count() < 6 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	written := len(k.Written())
	time.Sleep(3 * time.Second) // past the 2 s delay
	if n := len(k.Written()); n != written {
		t.Errorf("%d copies written after Run returned", n-written)
	}
}

// TestHungStoreDoesNotBlockRenewal (fault: checkpoint writes used
// context.Background() while holding the shard's lock, so a hung store call
// blocked renewal too): every store call has a deadline; the lease is kept
// while checkpoint writes hang, and the checkpoint is written once the
// store answers again.
func TestHungStoreDoesNotBlockRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		seqs := f.putNumbered(id, 5, true)
		store := &hangingStore{Store: lease.NewMemory()}
		store.hang.Store(true)
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", LeaseDuration: 3 * time.Second}, handler(h))
		waitFor(t, "the records", func() bool { return h.count() == 5 })
		waitFor(t, "a hung checkpoint write", func() bool { return store.hung.Load() > 0 })
		renews := store.renews.Load()
		time.Sleep(15 * time.Second) // five lease durations of hung checkpoint writes
		if n := store.renews.Load() - renews; n < 5 {
			t.Errorf("%d renewals in 15 s of hung checkpoint writes, want at least 5 (every second)", n)
		}
		if got := c.Owned(); len(got) != 1 {
			t.Errorf("lease lost while the store hung: owned %v", got)
		}
		store.hang.Store(false)
		waitFor(t, "the checkpoint", func() bool { return checkpointOf(t, store, id) == seqs[4] })
		stop()
	})
}

// handledLog counts every record by payload across workers.
type handledLog struct {
	mu   sync.Mutex
	n    map[string]int
	dups []string
}

func (l *handledLog) handler(owner string) message.Handler {
	return message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.n[string(m.Payload)]++
		if l.n[string(m.Payload)] > 1 {
			l.dups = append(l.dups, owner+":"+string(m.Payload))
		}
		return message.Ack()
	})
}

func (l *handledLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.n)
}

// TestPlannedMoveRedeliversNothing (fault: lease moves re-delivered
// records): with steady traffic, a second and a third worker join; leases
// move to them by hand-over (the owner stops reading, settles, checkpoints
// and transfers), so no record is handled twice; workers that start
// together spread the leases without steals.
func TestPlannedMoveRedeliversNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(6)
		store := lease.NewMemory()
		log := &handledLog{n: map[string]int{}}
		// Steady traffic: 6 shards × 5 records every 100 ms.
		quit := make(chan struct{})
		produced := atomic.Int64{}
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-quit:
					return
				case <-time.After(100 * time.Millisecond):
				}
				for s := range 6 {
					for j := range 5 {
						f.put(shardID(s), "k"+strconv.Itoa(j), fmt.Sprintf("%d-%d-%d", s, i, j))
						produced.Add(1)
					}
				}
			}
		})
		cfg := func(owner string) Config {
			return Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: owner, LeaseDuration: 3 * time.Second, ListInterval: 2 * time.Second}
		}
		a, stopA := run(t, cfg("a"), handler(log.handler("a")))
		waitFor(t, "a holds every lease", func() bool { return len(a.Owned()) == 6 })
		time.Sleep(5 * time.Second)
		b, stopB := run(t, cfg("b"), handler(log.handler("b")))
		cc, stopC := run(t, cfg("c"), handler(log.handler("c")))
		waitFor(t, "2/2/2", func() bool { return len(a.Owned()) == 2 && len(b.Owned()) == 2 && len(cc.Owned()) == 2 })
		time.Sleep(10 * time.Second)
		close(quit)
		wg.Wait()
		waitFor(t, "every record", func() bool { return int64(log.count()) == produced.Load() })
		stopC()
		stopB()
		stopA()
		log.mu.Lock()
		defer log.mu.Unlock()
		if len(log.dups) > 0 {
			t.Errorf("%d records handled twice on planned moves, want none: %v", len(log.dups), log.dups[:min(len(log.dups), 10)])
		}
		ls, _ := leasesOf(store.Snapshot(context.Background(), testStream))
		for _, l := range ls {
			if l.Handoff != "" {
				t.Errorf("%s: handoff request %q left behind", l.Key.ShardID, l.Handoff)
			}
		}
	})
}

// TestFleetStartsTogether: three workers starting at the same time end at
// 2/2/2 and every record is handled once.
func TestFleetStartsTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(6)
		f.fill(6, 50)
		store := lease.NewMemory()
		log := &handledLog{n: map[string]int{}}
		var cs []*Consumer
		var stops []func()
		for _, o := range []string{"a", "b", "c"} {
			c, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: o, LeaseDuration: 3 * time.Second}, handler(log.handler(o)))
			cs = append(cs, c)
			stops = append(stops, stop)
		}
		waitFor(t, "2/2/2", func() bool {
			for _, c := range cs {
				if len(c.Owned()) != 2 {
					return false
				}
			}
			return true
		})
		waitFor(t, "every record", func() bool { return log.count() == 300 })
		time.Sleep(10 * time.Second)
		for _, stop := range stops {
			stop()
		}
		if len(log.dups) > 0 {
			t.Errorf("records handled twice: %v", log.dups)
		}
	})
}
