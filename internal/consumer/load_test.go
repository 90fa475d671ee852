package consumer

import (
	"testing"
	"time"
)

// TestLoadMeter: the first measure only starts the interval; then each
// heartbeat publishes the CPU utilization and each held shard's rates,
// both smoothed (half the newest interval, half the figure before), a
// shard taken since the last measure without rates.
func TestLoadMeter(t *testing.T) {
	var used time.Duration
	m := newLoadMeter(Config{CPUTime: func() time.Duration { return used }, CPUs: 2})
	a := &shard{id: "a"}
	at := time.Unix(1000, 0)
	if l := m.measure(at, []*shard{a}); l.CPU >= 0 || len(l.Shards) != 0 {
		t.Fatalf("first measure %+v, want no figures", l)
	}
	step := func(cpu time.Duration, records, bytes int64, held ...*shard) map[string][2]float64 {
		used += cpu
		a.flow.records.Add(records)
		a.flow.bytes.Add(bytes)
		at = at.Add(2 * time.Second)
		l := m.measure(at, held)
		got := map[string][2]float64{"cpu": {l.CPU}}
		for id, r := range l.Shards {
			got[id] = [2]float64{r.Records, r.Bytes}
		}
		return got
	}
	// 2 s of 2 CPUs: 1 s used is 25 %; 200 records, 20,000 bytes: 100/s, 10,000/s.
	if got := step(time.Second, 200, 20_000, a); got["cpu"][0] != 0.25 || got["a"] != [2]float64{100, 10_000} {
		t.Errorf("second measure %v, want cpu 0.25, a 100/s 10000 B/s", got)
	}
	b := &shard{id: "b"}
	// 300/s now: smoothed to 200/s; CPU 75 % now: smoothed to 50 %; b was not held before.
	if got := step(3*time.Second, 600, 60_000, a, b); got["cpu"][0] != 0.5 || got["a"] != [2]float64{200, 20_000} {
		t.Errorf("third measure %v, want cpu 0.5, a 200/s 20000 B/s", got)
	} else if _, ok := got["b"]; ok {
		t.Errorf("a shard taken since the last measure has rates: %v", got)
	}
	if got := step(0, 0, 0, a, b); got["a"] != [2]float64{100, 10_000} || got["b"] != [2]float64{0, 0} {
		t.Errorf("fourth measure %v, want a halved to 100/s, b 0/s", got)
	}
}
