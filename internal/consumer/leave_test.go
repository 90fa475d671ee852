package consumer

import (
	"context"
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
