package consumer

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardsettle/lambdaadapter/lease"
)

// TestLoadMeter: the first measure only starts the interval; then each
// heartbeat publishes the CPU utilization and each held shard's rates
// (records, bytes and GetRecords calls), both smoothed (half the newest interval, half the figure before), a
// shard taken since the last measure without rates.
func TestLoadMeter(t *testing.T) {
	var used time.Duration
	m := newLoadMeter(Config{CPUTime: func() time.Duration { return used }, CPUs: 2})
	a := &shard{id: "a"}
	at := time.Unix(1000, 0)
	if l := m.measure(at, []*shard{a}); l.CPU >= 0 || len(l.Shards) != 0 {
		t.Fatalf("first measure %+v, want no figures", l)
	}
	step := func(cpu time.Duration, records, bytes, polls int64, held ...*shard) map[string][3]float64 {
		used += cpu
		a.flow.records.Add(records)
		a.flow.bytes.Add(bytes)
		a.flow.polls.Add(polls)
		at = at.Add(2 * time.Second)
		l := m.measure(at, held)
		got := map[string][3]float64{"cpu": {l.CPU}}
		for id, r := range l.Shards {
			got[id] = [3]float64{r.Records, r.Bytes, r.Polls}
		}
		return got
	}
	// 2 s of 2 CPUs: 1 s used is 25 %; 200 records, 20,000 bytes, 10 polls: 100/s, 10,000/s, 5/s.
	if got := step(time.Second, 200, 20_000, 10, a); got["cpu"][0] != 0.25 || got["a"] != [3]float64{100, 10_000, 5} {
		t.Errorf("second measure %v, want cpu 0.25, a 100/s 10000 B/s 5 polls/s", got)
	}
	b := &shard{id: "b"}
	// 300/s now: smoothed to 200/s; CPU 75 % now: smoothed to 50 %; b was not held before.
	if got := step(3*time.Second, 600, 60_000, 2, a, b); got["cpu"][0] != 0.5 || got["a"] != [3]float64{200, 20_000, 3} {
		t.Errorf("third measure %v, want cpu 0.5, a 200/s 20000 B/s 3 polls/s", got)
	} else if _, ok := got["b"]; ok {
		t.Errorf("a shard taken since the last measure has rates: %v", got)
	}
	if got := step(0, 0, 0, 0, a, b); got["a"] != [3]float64{100, 10_000, 1.5} || got["b"] != [3]float64{0, 0, 0} {
		t.Errorf("fourth measure %v, want a halved to 100/s, b 0/s", got)
	}
}

// TestPublishedPolls: every GetRecords call a reader makes counts in its
// shard's polls, and each heartbeat publishes them as the shard's
// GetRecords calls per second (lease.Throughput.Polls).
func TestPublishedPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(2)
		f.fill(1, 500)
		store := lease.NewMemory()
		h := newRecorder()
		c, stop := run(t, Config{Kinesis: f, Store: store, Start: TrimHorizon(), Limit: 100, Owner: "w1"}, handler(h))
		defer stop()
		waitFor(t, "500 records", func() bool { return h.count() == 500 })
		time.Sleep(30 * time.Second) // heartbeats with rates
		synctest.Wait()
		var polls int64
		for _, s := range c.heldShards() {
			polls += s.flow.polls.Load()
		}
		if calls := f.Calls("GetRecords"); polls != int64(calls) || len(c.heldShards()) != 2 {
			t.Errorf("%d polls counted by %d shards, want the %d GetRecords calls made by 2", polls, len(c.heldShards()), calls)
		}
		snap, err := store.Snapshot(t.Context(), testStream)
		if err != nil || len(snap.Workers) != 1 || snap.Workers[0].Load == nil {
			t.Fatalf("Snapshot = %+v, %v; want w1's row with its load", snap, err)
		}
		for id, tp := range snap.Workers[0].Load.Shards {
			if !(tp.Polls > 0) {
				t.Errorf("shard %s published %v polls/s, want the reader's GetRecords calls per second", id, tp.Polls)
			}
		}
		if len(snap.Workers[0].Load.Shards) != 2 {
			t.Errorf("load %+v, want both shards' rates", snap.Workers[0].Load)
		}
	})
}
