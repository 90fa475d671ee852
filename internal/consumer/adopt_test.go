package consumer

import (
	"testing"

	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/lease"
)

// TestNoAdoptionOfOwnHandOver: a worker handing a lease over (its row still
// names it, with the other worker's hand-over request, until the transfer)
// does not take the shard up again as handed to it, and a snapshot read
// before a transfer finished starts nothing either: adopting renews the
// lease on the snapshot's counter first. Either would let both workers
// handle the records after the last checkpoint.
func TestNoAdoptionOfOwnHandOver(t *testing.T) {
	id := shardID(0)
	key := lease.Key{Stream: testStream, ShardID: id}
	setUp := func(t *testing.T) (*Consumer, lease.Store, lease.Lease) {
		store := lease.NewMemory()
		l, err := store.Ensure(t.Context(), key, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l, err = store.Take(t.Context(), l, "a"); err != nil {
			t.Fatal(err)
		}
		c := newConsumer(t, Config{Kinesis: newStream(1), Store: store, Owner: "a"}, handler(newRecorder()))
		c.listed = map[string]kinesistypes.Shard{id: {}}
		testShard(t, c, "unused") // the engine session a started shard needs
		return c, store, l
	}
	started := func(c *Consumer) bool {
		c.mu.Lock()
		s := c.shards[id]
		c.mu.Unlock()
		if s != nil { // stop what an adoption started
			s.stopAt(stopLost)
			<-s.done
		}
		c.group.Wait()
		return s != nil
	}

	t.Run("hand-over in progress", func(t *testing.T) {
		// The shard being handed over stays held until its transfer is
		// written: the plan hands it over and does not adopt it.
		c, store, l := setUp(t)
		if _, err := store.RequestHandoff(t.Context(), l, "b"); err != nil {
			t.Fatal(err)
		}
		snap, err := store.Snapshot(t.Context(), testStream)
		if err != nil {
			t.Fatal(err)
		}
		p := planBalance(planInput{me: "a", snap: snap, held: map[string]bool{id: true},
			view: view{listed: c.listed, maxListed: id, byID: map[string]lease.Lease{id: snap.Leases[0]}}})
		if len(p.adopt) != 0 || len(p.handOver) != 1 || p.handOver[0].to != "b" {
			t.Errorf("plan adopts %v and hands over %v; want to hand it over to b only", p.adopt, p.handOver)
		}
	})

	t.Run("snapshot older than the transfer", func(t *testing.T) {
		c, store, l := setUp(t)
		snap, err := store.Snapshot(t.Context(), testStream) // still says "a"
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Transfer(t.Context(), l, "b"); err != nil {
			t.Fatal(err)
		}
		c.balanceWith(t.Context(), snap)
		if started(c) {
			t.Error("the worker started a shard its stale snapshot said it owned")
		}
		if got, err := store.Get(t.Context(), key); err != nil || got.Owner != "b" {
			t.Errorf("row owner %q (%v), want b", got.Owner, err)
		}
	})

	t.Run("handed to it", func(t *testing.T) {
		c, store, l := setUp(t)
		// "b" held it and handed it to "a".
		l, err := store.Take(t.Context(), l, "b")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Transfer(t.Context(), l, "a"); err != nil {
			t.Fatal(err)
		}
		snap, err := store.Snapshot(t.Context(), testStream)
		if err != nil {
			t.Fatal(err)
		}
		c.balanceWith(t.Context(), snap)
		if !started(c) {
			t.Error("the worker did not start the shard handed over to it")
		}
	})
}
