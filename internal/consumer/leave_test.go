package consumer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/lease"
)

// TestStoppingWorkerGetsNoLease: a worker that stops leaves the leader's
// plans before it releases its leases. Here one of its shards takes a
// while to stop (a slow handler) while the other is released at once: the
// leader gives the released lease to the worker that stays, never back to
// the leaving one, which would not start it (it would wait for its
// expiry).
func TestStoppingWorkerGetsNoLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(4)
		mem := lease.NewMemory()
		cfg := func(owner string) Config {
			return Config{Kinesis: f, Store: mem, Owner: owner, Start: TrimHorizon(), LeaseDuration: 10 * time.Second,
				ShutdownTimeout: 30 * time.Second, Assignment: AssignByCount}
		}
		_, stopLeader := run(t, cfg("w2"), handler(newRecorder()))
		waitFor(t, "w2 leads", func() bool { return leaderRow(t, mem).Owner == "w2" })
		slow := newRecorder()
		slow.outcome = func(*message.Message) message.Outcome {
			time.Sleep(8 * time.Second)
			return message.Ack()
		}
		leaving, stop := run(t, cfg("w1"), handler(slow))
		waitFor(t, "2/2", func() bool { return len(leaving.Owned()) == 2 })
		f.put(leaving.Owned()[0], "k", "slow")
		waitFor(t, "the slow record in its handler", func() bool { return slow.count() == 1 })
		stop()
		snap, err := mem.Snapshot(context.Background(), testStream)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range snap.Leases {
			if l.Owner == "w1" {
				t.Errorf("%s was given to the worker that left: %+v", l.Key.ShardID, l)
			}
		}
		waitFor(t, "every lease with w2", func() bool {
			snap, _ := mem.Snapshot(context.Background(), testStream)
			n := 0
			for _, l := range snap.Leases {
				if l.Owner == "w2" {
					n++
				}
			}
			return n == 4
		})
		stopLeader()
	})
}

// lateHeartbeat is a worker's store whose heartbeat, once armed, is slow:
// it enters the store, says so, and writes only after the worker's row
// was removed (or a few seconds passed), as a heartbeat in flight when the
// stop began would.
type lateHeartbeat struct {
	lease.Store
	armed   atomic.Bool
	entered chan struct{}
	removed chan struct{}
	once    sync.Once
}

func (l *lateHeartbeat) Heartbeat(ctx context.Context, stream, owner string, load *lease.Load) (lease.Worker, error) {
	if l.armed.CompareAndSwap(true, false) {
		close(l.entered)
		select {
		case <-l.removed:
		case <-time.After(3 * time.Second):
		}
	}
	return l.Store.Heartbeat(ctx, stream, owner, load)
}

func (l *lateHeartbeat) RemoveWorker(ctx context.Context, w lease.Worker) error {
	err := l.Store.RemoveWorker(ctx, w)
	if err == nil {
		l.once.Do(func() { close(l.removed) })
	}
	return err
}

// TestStoppingWorkerHeartbeatInFlight: a heartbeat under way when the
// stop begins does not bring the worker's row back after the stop removed
// it (before its leases are released): the leader would count the leaving
// worker again and give it a lease it never starts.
func TestStoppingWorkerHeartbeatInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(4)
		mem := lease.NewMemory()
		cfg := func(owner string, store lease.Store) Config {
			return Config{Kinesis: f, Store: store, Owner: owner, Start: TrimHorizon(), LeaseDuration: 10 * time.Second,
				ShutdownTimeout: 30 * time.Second, Assignment: AssignByCount}
		}
		_, stopLeader := run(t, cfg("w2", mem), handler(newRecorder()))
		waitFor(t, "w2 leads", func() bool { return leaderRow(t, mem).Owner == "w2" })
		slow := newRecorder()
		slow.outcome = func(*message.Message) message.Outcome {
			time.Sleep(8 * time.Second)
			return message.Ack()
		}
		store := &lateHeartbeat{Store: mem, entered: make(chan struct{}), removed: make(chan struct{})}
		leaving, stop := run(t, cfg("w1", store), handler(slow))
		waitFor(t, "2/2", func() bool { return len(leaving.Owned()) == 2 })
		f.put(leaving.Owned()[0], "k", "slow")
		waitFor(t, "the slow record in its handler", func() bool { return slow.count() == 1 })
		store.armed.Store(true)
		<-store.entered
		stop()
		snap, err := mem.Snapshot(context.Background(), testStream)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range snap.Leases {
			if l.Owner == "w1" {
				t.Errorf("%s was given to the worker that left: %+v", l.Key.ShardID, l)
			}
		}
		stopLeader()
	})
}
