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
		c.readCtx = t.Context()
		return c, store, l
	}
	started := func(c *Consumer) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		s := c.shards[id]
		if s != nil { // stop what a wrong adoption started
			s.stopReading()
			s.ck.abandon()
		}
		return s != nil
	}

	t.Run("hand-over in progress", func(t *testing.T) {
		c, store, l := setUp(t)
		defer c.tasks.Wait()
		if _, err := store.RequestHandoff(t.Context(), l, "b"); err != nil {
			t.Fatal(err)
		}
		c.lettingGo[id] = true // handOff forgot the shard and has not transferred it yet
		snap, err := store.Snapshot(t.Context(), testStream)
		if err != nil {
			t.Fatal(err)
		}
		c.balanceWith(t.Context(), snap)
		if started(c) {
			t.Error("the worker took up again the shard it is handing over")
		}
	})

	t.Run("snapshot older than the transfer", func(t *testing.T) {
		c, store, l := setUp(t)
		defer c.tasks.Wait()
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
		defer c.tasks.Wait()
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
