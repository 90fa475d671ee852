package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardsettle/lambdaadapter/lease"
)

func ExampleParseKey() {
	k := lease.Key{Stream: "orders", ShardID: "shardId-000000000003"}
	fmt.Println(k)
	back, err := lease.ParseKey(k.String())
	fmt.Println(back == k, err)
	_, err = lease.ParseKey("shardId-000000000003")
	fmt.Println(err)
	// A key holds the stream's name, never its ARN.
	_, err = lease.NewMemory().Ensure(context.Background(),
		lease.Key{Stream: "arn:aws:kinesis:eu-west-1:123456789012:stream/orders", ShardID: "shardId-000000000003"}, nil)
	fmt.Println(err)
	// Output:
	// orders:shardId-000000000003
	// true <nil>
	// lease: malformed key "shardId-000000000003": want stream:shardId
	// lease: ensure "arn:aws:kinesis:eu-west-1:123456789012:stream/orders:shardId-000000000003": stream name contains ':' (use the stream's name, not its ARN)
}

// A worker takes a free lease and checkpoints; another steals it; the first
// worker's next checkpoint is fenced off.
func ExampleStore() {
	ctx := context.Background()
	var store lease.Store = lease.NewMemory() // or lease.NewDynamoDB(client, table)
	k := lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}

	free, _ := store.Ensure(ctx, k, nil)
	w1, _ := store.Take(ctx, free, "worker-1")
	w1, _ = store.Checkpoint(ctx, w1, "100", 0)
	fmt.Println(w1.Owner, w1.Counter, w1.Checkpoint)

	// worker-2 saw the lease's counter stand still for a lease duration
	// (worker-1 was paused) and steals it with the lease it read.
	seen, _ := store.Get(ctx, k)
	w2, _ := store.Take(ctx, seen, "worker-2")
	fmt.Println(w2.Owner, w2.Counter, w2.OwnerSwitches)

	// worker-1 wakes up: its checkpoint fails and changes nothing.
	_, err := store.Checkpoint(ctx, w1, "200", 0)
	fmt.Println(errors.Is(err, lease.ErrLeaseLost))
	fmt.Println(err)
	now, _ := store.Get(ctx, k)
	fmt.Println(now.Owner, now.Checkpoint)
	// Output:
	// worker-1 2 100
	// worker-2 3 2
	// true
	// lease: checkpoint "orders:shardId-000000000000": lease lost: stored owner "worker-2" counter 3, held owner "worker-1" counter 2
	// worker-2 100
}

// A worker with fewer leases than its share asks the owner of one to hand
// it over; the owner finishes what it has in flight, checkpoints and
// transfers the lease, so the shard moves without records read twice.
func ExampleStore_handoff() {
	ctx := context.Background()
	var store lease.Store = lease.NewMemory()
	k := lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}
	free, _ := store.Ensure(ctx, k, nil)
	w1, _ := store.Take(ctx, free, "worker-1")

	// worker-2 asks, with the lease it read. The counter does not move, so
	// worker-1's next writes succeed and show the request.
	seen, _ := store.Get(ctx, k)
	asked, _ := store.RequestHandoff(ctx, seen, "worker-2")
	fmt.Println(asked.Handoff, asked.Counter == w1.Counter)
	w1, _ = store.Renew(ctx, w1)
	fmt.Println(w1.Handoff)

	// A third worker cannot ask for the same lease meanwhile.
	_, err := store.RequestHandoff(ctx, seen, "worker-3")
	fmt.Println(errors.Is(err, lease.ErrLeaseLost))

	// worker-1 stops reading, checkpoints what settled and transfers.
	w1, _ = store.Checkpoint(ctx, w1, "100", 0)
	w2, _ := store.Transfer(ctx, w1, w1.Handoff)
	fmt.Printf("%s %q %s %d\n", w2.Owner, w2.Handoff, w2.Checkpoint, w2.OwnerSwitches)

	// worker-1's copy is stale from then on.
	_, err = store.Renew(ctx, w1)
	fmt.Println(errors.Is(err, lease.ErrLeaseLost))
	// Output:
	// worker-2 true
	// worker-2
	// true
	// worker-2 "" 100 2
	// true
}

// Workers register with heartbeats; a worker whose heartbeat counter stands
// still for the lease duration is dead, and its row is removed with the
// counter observed.
func ExampleStore_workers() {
	ctx := context.Background()
	var store lease.Store = lease.NewMemory()
	store.Heartbeat(ctx, "orders", "worker-2", nil)
	store.Heartbeat(ctx, "orders", "worker-1", nil)
	store.Heartbeat(ctx, "orders", "worker-1", nil)

	snap, _ := store.Snapshot(ctx, "orders")
	for _, w := range snap.Workers {
		fmt.Println(w.Owner, w.Counter)
	}
	fmt.Println(len(snap.Leases))

	// worker-2 stopped heartbeating (the Tracker says WorkerExpired); a
	// heartbeat in between would have saved its row.
	dead := snap.Workers[1]
	fmt.Println(store.RemoveWorker(ctx, dead))
	fmt.Println(errors.Is(store.RemoveWorker(ctx, dead), lease.ErrLeaseLost))
	// Output:
	// worker-1 2
	// worker-2 1
	// 0
	// <nil>
	// true
}

func ExampleTracker() {
	t := lease.NewTracker(10 * time.Second)
	k := lease.Key{Stream: "orders", ShardID: "shardId-000000000000"}
	owned := lease.Lease{Key: k, Owner: "worker-1", Counter: 7}
	free := lease.Lease{Key: k, Counter: 8}

	t.Observe([]lease.Lease{owned})
	// Just seen: expired only when the counter stays at 7 for 10s on this
	// process's clock.
	fmt.Println(t.Expired(owned))
	// A free lease may be taken at once.
	fmt.Println(t.Expired(free))
	// Output:
	// false
	// true
}
