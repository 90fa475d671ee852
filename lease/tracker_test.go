package lease_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/lease"
)

const leaseDuration = 10 * time.Second

func owned(shard string, counter int64) lease.Lease {
	return lease.Lease{Key: lease.Key{Stream: "orders", ShardID: shard}, Owner: "w1", Counter: counter}
}

func TestTrackerExpiresWithoutCounterChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := lease.NewTracker(leaseDuration)
		l := owned("shardId-0", 5)
		if tr.Expired(l) {
			t.Fatal("a lease never observed is expired")
		}
		tr.Observe([]lease.Lease{l})
		if tr.Expired(l) {
			t.Fatal("expired right after the first observation")
		}
		time.Sleep(leaseDuration - time.Nanosecond)
		tr.Observe([]lease.Lease{l}) // same counter: the timer keeps running
		if tr.Expired(l) {
			t.Fatal("expired 1ns before the lease duration")
		}
		time.Sleep(time.Nanosecond)
		if !tr.Expired(l) {
			t.Fatal("not expired after the lease duration without a counter change")
		}
		time.Sleep(time.Hour)
		if !tr.Expired(l) {
			t.Fatal("not expired long after the lease duration")
		}
	})
}

func TestTrackerCounterChangeRestartsTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := lease.NewTracker(leaseDuration)
		l := owned("shardId-0", 5)
		tr.Observe([]lease.Lease{l})
		time.Sleep(leaseDuration - time.Second)
		renewed := l
		renewed.Counter++
		tr.Observe([]lease.Lease{renewed})
		time.Sleep(time.Second)
		if tr.Expired(renewed) {
			t.Fatal("expired one lease duration after the first observation although the counter changed since")
		}
		if tr.Expired(l) {
			t.Fatal("the old counter value counts as expired although Observe saw a newer one")
		}
		time.Sleep(leaseDuration - 2*time.Second)
		if tr.Expired(renewed) {
			t.Fatal("expired before a lease duration after the counter change")
		}
		time.Sleep(time.Second)
		if !tr.Expired(renewed) {
			t.Fatal("not expired a lease duration after the counter change")
		}
		// A counter that goes back (a deleted and re-created lease) is a
		// change too.
		reset := owned("shardId-0", 0)
		tr.Observe([]lease.Lease{reset})
		if tr.Expired(reset) {
			t.Fatal("expired right after the counter changed to 0")
		}
	})
}

func TestTrackerUnobservedCounter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := lease.NewTracker(leaseDuration)
		l := owned("shardId-0", 5)
		tr.Observe([]lease.Lease{l})
		time.Sleep(2 * leaseDuration)
		newer := l
		newer.Counter = 6
		if tr.Expired(newer) {
			t.Fatal("a counter Observe never saw is expired")
		}
		if !tr.Expired(l) {
			t.Fatal("the observed counter is not expired")
		}
	})
}

func TestTrackerFreeLeasesAvailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := lease.NewTracker(leaseDuration)
		free := lease.Lease{Key: lease.Key{Stream: "orders", ShardID: "shardId-0"}, Counter: 3}
		if !tr.Expired(free) {
			t.Fatal("a free lease never observed is not available")
		}
		tr.Observe([]lease.Lease{free})
		if !tr.Expired(free) {
			t.Fatal("a free lease just observed is not available")
		}
	})
}

func TestTrackerForget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := lease.NewTracker(leaseDuration)
		a, b := owned("shardId-0", 1), owned("shardId-1", 1)
		tr.Observe([]lease.Lease{a, b})
		time.Sleep(leaseDuration)
		tr.Forget(a.Key)
		tr.Forget(lease.Key{Stream: "orders", ShardID: "unknown"})
		if tr.Expired(a) {
			t.Fatal("a forgotten lease is expired")
		}
		if !tr.Expired(b) {
			t.Fatal("forgetting one lease touched another")
		}
		// Observed again, a forgotten lease starts a new timer.
		tr.Observe([]lease.Lease{a})
		time.Sleep(leaseDuration - time.Nanosecond)
		if tr.Expired(a) {
			t.Fatal("a forgotten lease kept its old timer")
		}
		time.Sleep(time.Nanosecond)
		if !tr.Expired(a) {
			t.Fatal("a re-observed lease does not expire")
		}
	})
}

func TestTrackerKeysAreIndependent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := lease.NewTracker(leaseDuration)
		a := owned("shardId-0", 1)
		other := lease.Lease{Key: lease.Key{Stream: "payments", ShardID: "shardId-0"}, Owner: "w2", Counter: 1}
		tr.Observe([]lease.Lease{a})
		time.Sleep(leaseDuration / 2)
		tr.Observe([]lease.Lease{other}) // a is not in this list: its timer runs on
		time.Sleep(leaseDuration / 2)
		if !tr.Expired(a) {
			t.Fatal("a lease left out of an Observe call lost its timer")
		}
		if tr.Expired(other) {
			t.Fatal("same shard id in another stream shares a timer")
		}
	})
}

func TestNewTrackerPanicsOnNonPositiveDuration(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("NewTracker(%v) did not panic", d)
				}
			}()
			lease.NewTracker(d)
		})
	}
}

func TestTrackerWorkerExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := lease.NewTracker(leaseDuration)
		w := lease.Worker{Stream: "orders", Owner: "w1", Counter: 5}
		if tr.WorkerExpired(w) {
			t.Fatal("a worker never observed is expired")
		}
		tr.ObserveWorkers([]lease.Worker{w})
		if tr.WorkerExpired(w) {
			t.Fatal("expired right after the first observation")
		}
		time.Sleep(leaseDuration - time.Nanosecond)
		tr.ObserveWorkers([]lease.Worker{w}) // same counter: the timer keeps running
		if tr.WorkerExpired(w) {
			t.Fatal("expired 1ns before the lease duration")
		}
		time.Sleep(time.Nanosecond)
		if !tr.WorkerExpired(w) {
			t.Fatal("not expired after the lease duration without a heartbeat")
		}
		// A heartbeat restarts the timer; the old counter is not expired
		// any more, nor is a counter never observed.
		beat := w
		beat.Counter++
		tr.ObserveWorkers([]lease.Worker{beat})
		if tr.WorkerExpired(beat) || tr.WorkerExpired(w) {
			t.Fatal("expired right after a heartbeat")
		}
		time.Sleep(leaseDuration)
		if !tr.WorkerExpired(beat) {
			t.Fatal("not expired a lease duration after the last heartbeat")
		}
		newer := beat
		newer.Counter++
		if tr.WorkerExpired(newer) {
			t.Fatal("a counter ObserveWorkers never saw is expired")
		}
		// A row removed and registered anew starts at counter 1: a change
		// too.
		again := lease.Worker{Stream: "orders", Owner: "w1", Counter: 1}
		tr.ObserveWorkers([]lease.Worker{again})
		if tr.WorkerExpired(again) {
			t.Fatal("expired right after the counter went back to 1")
		}
	})
}

func TestTrackerWorkersApartFromLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := lease.NewTracker(leaseDuration)
		// A lease and a worker whose names would make the same row key if
		// the tracker mixed them up.
		l := lease.Lease{Key: lease.Key{Stream: "orders", ShardID: "@worker:w1"}, Owner: "w1", Counter: 3}
		w := lease.Worker{Stream: "orders", Owner: "w1", Counter: 3}
		plain := lease.Lease{Key: lease.Key{Stream: "orders", ShardID: "w1"}, Owner: "w1", Counter: 3}
		tr.Observe([]lease.Lease{l, plain})
		time.Sleep(leaseDuration)
		if tr.WorkerExpired(w) {
			t.Fatal("observing leases made a worker expire")
		}
		tr.ObserveWorkers([]lease.Worker{w})
		other := lease.Worker{Stream: "payments", Owner: "w1", Counter: 3}
		time.Sleep(leaseDuration / 2)
		tr.ObserveWorkers([]lease.Worker{other}) // w is not in this list: its timer runs on
		time.Sleep(leaseDuration / 2)
		if !tr.WorkerExpired(w) || !tr.Expired(plain) {
			t.Fatal("the worker or the lease lost its timer")
		}
		if tr.WorkerExpired(other) {
			t.Fatal("the same owner in another stream shares a timer")
		}
		tr.Forget(plain.Key)
		tr.Forget(l.Key)
		if !tr.WorkerExpired(w) {
			t.Fatal("forgetting leases forgot a worker")
		}
		tr.Observe([]lease.Lease{plain})
		tr.ForgetWorker("orders", "w1")
		tr.ForgetWorker("orders", "unknown")
		if tr.WorkerExpired(w) {
			t.Fatal("a forgotten worker is expired")
		}
		time.Sleep(leaseDuration)
		if !tr.Expired(plain) {
			t.Fatal("forgetting a worker forgot a lease")
		}
		if !tr.WorkerExpired(other) {
			t.Fatal("forgetting a worker forgot the same owner in another stream")
		}
		// Observed again, a forgotten worker starts a new timer.
		tr.ObserveWorkers([]lease.Worker{w})
		time.Sleep(leaseDuration - time.Nanosecond)
		if tr.WorkerExpired(w) {
			t.Fatal("a forgotten worker kept its old timer")
		}
		time.Sleep(time.Nanosecond)
		if !tr.WorkerExpired(w) {
			t.Fatal("a re-observed worker does not expire")
		}
	})
}
