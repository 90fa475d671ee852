package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/kpl"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/lease"
)

// putAggregate puts "before", a KPL aggregate of n user records u-0…
// under one key (so they run in order), and "after" on shard id, and
// returns the aggregate's sequence number.
func putAggregate(f *stream, id string, n int) string {
	f.put(id, "k", "before")
	users := make([]kpl.Record, n)
	for i := range users {
		users[i] = kpl.Record{PartitionKey: "u", Data: fmt.Appendf(nil, "u-%d", i)}
	}
	seq := f.PutTo(testStream, id, "u", kpl.Aggregate(users))
	f.put(id, "k", "after")
	return seq
}

// sameRecords reports whether got holds exactly the records of want, the
// user records of the aggregate (key "u") in want's order. "before" and
// "after" have a key of their own, so a lane may handle them before,
// between or after the user records.
func sameRecords(got, want []string) bool {
	users := func(xs []string) []string {
		var us []string
		for _, x := range xs {
			if strings.HasPrefix(x, "u-") {
				us = append(us, x)
			}
		}
		return us
	}
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w) && slices.Equal(users(got), users(want))
}

// leaseOf returns the shard's lease row (the zero Lease before it exists).
func leaseOf(t *testing.T, store lease.Store, shard string) lease.Lease {
	t.Helper()
	l, err := store.Get(context.Background(), lease.Key{Stream: testStream, ShardID: shard})
	if errors.Is(err, lease.ErrNotFound) {
		return lease.Lease{}
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAggregateCheckpointInside: while user record 5 of an aggregate does
// not settle, the lease row holds the aggregate's sequence number with
// sub-sequence 5; the next owner resumes inside the aggregate and delivers
// none of the user records that settled.
func TestAggregateCheckpointInside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		parent := putAggregate(f, id, 10)
		store := lease.NewMemory()
		first := newRecorder()
		first.outcome = func(m *message.Message) message.Outcome {
			if string(m.Payload) == "u-5" {
				return message.Retry(errors.New("not now"))
			}
			return message.Ack()
		}
		_, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w1"}, handler(first))
		waitFor(t, "the checkpoint inside the aggregate", func() bool {
			l := leaseOf(t, store, id)
			return l.Checkpoint == parent && l.SubSequence == 5
		})
		stop()
		if l := leaseOf(t, store, id); l.Checkpoint != parent || l.SubSequence != 5 || l.Owner != "" {
			t.Fatalf("after the stop: checkpoint %s sub %d owner %q; want %s sub 5, released", l.Checkpoint, l.SubSequence, l.Owner, parent)
		}

		next := newRecorder()
		_, stop = run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "w2"}, handler(next))
		waitFor(t, "the record after the aggregate", func() bool { return next.on(id) == 6 })
		time.Sleep(3 * time.Second)
		stop()
		want := []string{"u-5", "u-6", "u-7", "u-8", "u-9", "after"}
		if got := next.handled[id]; !sameRecords(got, want) {
			t.Errorf("the next owner handled %v, want %v", got, want)
		}
		if l := leaseOf(t, store, id); l.SubSequence != 0 || l.Checkpoint == parent {
			t.Errorf("final checkpoint %s sub %d, want past the aggregate", l.Checkpoint, l.SubSequence)
		}
	})
}

// TestAggregateResumeAfterCrash: a worker that died inside an aggregate
// (its row says sub-sequence 3, its lease expires) is succeeded by one that
// starts at user record 3.
func TestAggregateResumeAfterCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		id := shardID(0)
		parent := putAggregate(f, id, 6)
		store := lease.NewMemory()
		l, err := store.Ensure(t.Context(), lease.Key{Stream: testStream, ShardID: id}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l, err = store.Take(t.Context(), l, "dead"); err != nil {
			t.Fatal(err)
		}
		if _, err = store.Checkpoint(t.Context(), l, parent, 3); err != nil {
			t.Fatal(err)
		}
		h := newRecorder()
		_, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Owner: "live", LeaseDuration: 4 * time.Second}, handler(h))
		waitFor(t, "the records after the dead worker's position", func() bool { return h.on(id) == 4 })
		time.Sleep(3 * time.Second)
		stop()
		if got, want := h.handled[id], []string{"u-3", "u-4", "u-5", "after"}; !sameRecords(got, want) {
			t.Errorf("handled %v, want %v", got, want)
		}
	})
}
