package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/lease"
)

// TestLatestStartSurvivesAMove: a shard read from the tip (the default
// start) whose first records never settle before its lease moves is read
// by the next holder from where the first one started, not from the tip of
// its own time: the lease says where (LATEST@ and the time), written
// before anything was read. Without it the records would be lost.
func TestLatestStartSurvivesAMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(1)
		store := lease.NewMemory()
		shard := shardID(0)
		first := newRecorder()
		first.outcome = func(*message.Message) message.Outcome { return message.Retry(errors.New("not now")) }
		_, stop := run(t, Config{Kinesis: f, Store: store, Owner: "w1", ShutdownTimeout: time.Second, RetryBackoff: time.Second}, handler(first))
		waitFor(t, "the lease taken", func() bool {
			l, err := store.Get(context.Background(), lease.Key{Stream: testStream, ShardID: shard})
			return err == nil && l.Owner == "w1"
		})
		l, _ := store.Get(context.Background(), lease.Key{Stream: testStream, ShardID: shard})
		if !strings.HasPrefix(l.Checkpoint, latestPrefix) {
			t.Fatalf("checkpoint %q of a lease started at the tip, want %s and a time", l.Checkpoint, latestPrefix)
		}
		time.Sleep(time.Minute) // the pin is well before the records
		for i := range 3 {
			f.put(shard, "k", fmt.Sprintf("r%d", i))
		}
		waitFor(t, "the records tried", func() bool { return first.count() >= 3 })
		stop() // nothing settled: released with the pin

		next := newRecorder()
		_, stop = run(t, Config{Kinesis: f, Store: store, Owner: "w2"}, handler(next))
		waitFor(t, "the records handled by the next holder", func() bool { return next.count() == 3 })
		time.Sleep(5 * time.Second)
		stop()
		for p, n := range next.times() {
			if n != 1 {
				t.Errorf("%s handled %d times by the next holder", p, n)
			}
		}
		l, _ = store.Get(context.Background(), lease.Key{Stream: testStream, ShardID: shard})
		if strings.HasPrefix(l.Checkpoint, latestPrefix) {
			t.Errorf("checkpoint %q after records settled, want their sequence number", l.Checkpoint)
		}
	})
}

func TestLatestPin(t *testing.T) {
	now := time.UnixMilli(1_765_000_000_123)
	got, ok := parseLatestPin(latestPin(now))
	if !ok || !got.Equal(now.Add(-latestSkew)) {
		t.Errorf("parseLatestPin(latestPin(%v)) = %v, %v", now, got, ok)
	}
	for _, bad := range []string{"", "LATEST", "LATEST@", "LATEST@x", "LATEST@-1", "49000000000000000000", lease.AtTimestamp} {
		if _, ok := parseLatestPin(bad); ok {
			t.Errorf("parseLatestPin(%q) succeeded", bad)
		}
	}
}
