package lease

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
)

// Load is what a worker publishes of its load in its worker row
// (Heartbeat), for the leader that plans the stream's leases.
//
// A Store keeps it compact, so that worker rows stay small whatever the
// number of shards: every value is rounded to 3 significant
// digits, and of a worker's shards only the 1,000 with the most bytes per
// second are kept (ties broken by records, then shard id). A
// worker row with 1,000 shards takes about 39 KB of DynamoDB's 400 KB item
// limit; with 20, about 0.9 KB. A value that is not a number, infinite or
// negative is stored as unknown: a CPU or Polls of -1, Records or Bytes of
// 0. A Load is a plain value; a Store copies it in and out.
type Load struct {
	// CPU is the worker's CPU utilization over its last interval, as a
	// fraction of the CPU it may use (0.5 is half); negative when unknown
	// (no interval measured yet). Stored as -1 when negative.
	CPU float64
	// Shards is the throughput of each lease the worker held over the
	// interval, by shard id; nil when none.
	Shards map[string]Throughput
}

// Throughput is a shard's rate over a worker's last interval.
type Throughput struct {
	Records float64 // records per second
	Bytes   float64 // payload bytes per second
	// Polls is the GetRecords calls per second made to read the shard
	// (an enhanced fan-out subscription makes none: 0); negative when
	// unknown, as in a row written by a version that did not publish it.
	// Stored as -1 when negative.
	Polls float64
}

// Bounds of a stored Load (see Load).
const (
	// maxLoadShards is how many shards of a Load are stored at most.
	maxLoadShards = 1000
	// loadDigits is how many significant digits a stored value keeps.
	loadDigits = 3
)

// compactLoad returns l as a Store keeps it (see Load): its own copy,
// rounded, the shards bounded, non-finite or negative values made unknown;
// nil for nil.
func compactLoad(l *Load) *Load {
	if l == nil {
		return nil
	}
	c := &Load{CPU: -1}
	if l.CPU >= 0 && !math.IsInf(l.CPU, 0) { // NaN compares false
		c.CPU = roundLoad(l.CPU)
	}
	if len(l.Shards) == 0 {
		return c
	}
	c.Shards = make(map[string]Throughput, min(len(l.Shards), maxLoadShards))
	for id, t := range l.Shards {
		ct := Throughput{Records: roundLoad(t.Records), Bytes: roundLoad(t.Bytes), Polls: -1}
		if t.Polls >= 0 && !math.IsInf(t.Polls, 0) { // NaN compares false
			ct.Polls = roundLoad(t.Polls)
		}
		c.Shards[id] = ct
	}
	if len(c.Shards) > maxLoadShards {
		ids := slices.SortedFunc(maps.Keys(c.Shards), func(a, b string) int {
			ta, tb := c.Shards[a], c.Shards[b]
			return cmp.Or(cmp.Compare(tb.Bytes, ta.Bytes), cmp.Compare(tb.Records, ta.Records), cmp.Compare(a, b))
		})
		for _, id := range ids[maxLoadShards:] {
			delete(c.Shards, id)
		}
	}
	return c
}

// roundLoad returns v rounded to loadDigits significant digits, or 0 when
// v is not a finite, non-negative number.
func roundLoad(v float64) float64 {
	if !(v >= 0) || math.IsInf(v, 0) {
		return 0
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', loadDigits, 64), 64)
	return r
}

// cloneLoad returns a copy of l with its own Shards; nil for nil.
func cloneLoad(l *Load) *Load {
	if l == nil {
		return nil
	}
	c := *l
	c.Shards = maps.Clone(l.Shards)
	return &c
}
