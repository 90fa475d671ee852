package consumer

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/lease"
)

// leaderRace is the lease store of a worker that stops while a leader of
// another process gives it a lease: once the worker released the lease of
// shard at its stop, the leader's take in its name (planned on a read of
// the table from before the stop) lands.
type leaderRace struct {
	lease.Store
	shard string
	given atomic.Bool
}

func (r *leaderRace) Release(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	l, err := r.Store.Release(ctx, held)
	if err == nil && held.Key.ShardID == r.shard && !r.given.Swap(true) {
		if _, err := r.Store.Take(ctx, l, held.Owner); err != nil {
			panic(err)
		}
	}
	return l, err
}

// TestGiftToStoppingWorkerGivenBack (fault: a lease that a leader of
// another process gave a worker that had begun its graceful stop waited
// for its expiry, its shard unread): the worker gives it back before Run
// returns, so another worker takes it at once.
func TestGiftToStoppingWorkerGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(2)
		mem := lease.NewMemory()
		store := &leaderRace{Store: mem, shard: shardID(0)}
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1", LeaseDuration: 10 * time.Second}, handler(h))
		waitFor(t, "both leases held", func() bool { return len(c.Owned()) == 2 })
		stop()
		if !store.given.Load() {
			t.Fatal("the lease was not given during the stop")
		}
		l, err := mem.Get(context.Background(), lease.Key{Stream: testStream, ShardID: shardID(0)})
		if err != nil {
			t.Fatal(err)
		}
		if l.Owner != "" {
			t.Errorf("after Run returned, the lease given while stopping is owned by %q, want released", l.Owner)
		}
	})
}

// TestLeaderReplansLeaseOfStoppedWorker (fault: a lease the leader gave
// a worker of another process that stopped before it started it, its row
// already removed, waited for its expiry): the leader's next round plans
// it again, well within a lease duration of the stop.
func TestLeaderReplansLeaseOfStoppedWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 6 * time.Second
		f := newStream(2)
		mem := lease.NewMemory()
		// w1, of another process, heartbeats; the leader, w0, gives it one
		// of the two free leases, which w1 never starts: it stops at once,
		// its row removed.
		var row atomic.Pointer[lease.Worker]
		beating := make(chan struct{})
		beaten := make(chan struct{})
		go func() {
			defer close(beaten)
			for {
				w, err := mem.Heartbeat(context.Background(), testStream, "w1", &lease.Load{})
				if err == nil {
					row.Store(&w)
				}
				select {
				case <-beating:
					return
				case <-time.After(d / 6):
				}
			}
		}()
		synctest.Wait()
		h := newRecorder()
		_, stop := run(t, Config{Kinesis: f, Store: mem, Start: TrimHorizon(), Owner: "w0", LeaseDuration: d}, handler(h))
		var given lease.Lease
		waitFor(t, "a lease given to w1", func() bool {
			snap, _ := mem.Snapshot(context.Background(), testStream)
			for _, l := range snap.Leases {
				if l.Owner == "w1" {
					given = l
					return true
				}
			}
			return false
		})
		close(beating)
		<-beaten
		if err := mem.RemoveWorker(context.Background(), *row.Load()); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		waitFor(t, "the lease back with w0", func() bool {
			l, _ := mem.Get(context.Background(), given.Key)
			return l.Owner == "w0"
		})
		if took := time.Since(stopped); took > d*2/3 {
			t.Errorf("the lease of the stopped worker was planned again %v after its row went, want within %v (a leader round)", took, d*2/3)
		}
		stop()
	})
}
