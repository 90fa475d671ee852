//go:build integration

package faultcases_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// Traffic of the self-fencing tests: per shard one partition key, one
// record every feedEvery, and a handler slower than that (handleMS), so a
// worker always has a backlog waiting for its lane, as a busy consumer has.
const (
	feedEvery = 50 * time.Millisecond
	handleMS  = 60
	// cutFor is how long worker A is cut off from DynamoDB: over three
	// lease durations.
	cutFor = 10 * time.Second
)

// TestECSCutOffFromDynamoDB (black box, self-fencing): two `bootstrap
// -mode=ecs` workers share a two-shard stream with steady traffic on one key
// per shard and handlers slower than the traffic. Worker A is cut off from
// DynamoDB (its own route only) for 10 s while it still reads Kinesis:
//
//   - TCPCut: its DynamoDB route refuses connections (and closes the open ones);
//   - BlackHole: its DynamoDB calls get no answer and time out;
//   - Throttled: every DynamoDB call of A answers 400
//     ProvisionedThroughputExceededException, throttling beyond 0.9 × the lease
//     duration.
//
// A fences itself before B may take its shard: no two workers start records
// of one shard within one tenure (0 overlap). Nothing is lost; the records
// A handled since its last checkpoint come again from B (counted, bounded
// by CheckpointInterval + LeaseDuration worth of handling). Once the fault
// ends A rejoins: it takes one shard back by a planned hand-over, and then
// the leases stay put (no flapping).
func TestECSCutOffFromDynamoDB(t *testing.T) {
	t.Parallel() // mostly waiting: runs beside another slow test (see the package comment)
	faults := []struct {
		name  string
		apply func(r *routes) (restore func())
	}{
		{"TCPCut", func(r *routes) func() { return r.dynamodb.TCP.Cut() }},
		{"BlackHole", func(r *routes) func() { return r.dynamodb.TCP.BlackHole() }},
		{"Throttled", func(r *routes) func() {
			return r.dynamodb.AWS.Inject(faultnet.Rule{Fault: faultnet.Throttled()})
		}},
	}
	// The three run at once (not bounded by -parallel, which is the number
	// of cores here): each waits mostly on its fault and its slow
	// handlers, and the fence does not depend on speed.
	var wg sync.WaitGroup
	for _, f := range faults {
		wg.Go(func() {
			t.Run(f.name, func(t *testing.T) { cutOff(t, f.apply) })
		})
	}
	wg.Wait()
}

func cutOff(t *testing.T, fault func(r *routes) (restore func())) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 2)
	table, store := newLeaseTable(t, env)
	rA, rB := newRoutes(t, env), newRoutes(t, env)
	fd := startFeeder(t, env, stream, 2, feedEvery, func(i int) rec {
		s := i % 2
		return rec{ID: fmt.Sprintf("r-%06d", i), SleepMS: handleMS, key: fmt.Sprintf("key-%d", s), hashKey: hashKeyOf(s, 2)}
	})
	a := startProc(t, rA, "A", stream, table)
	eventually(t, settleWithin, "A holds both shards and handles records", func() (bool, string) {
		a.alive(t)
		o := leaseOwners(t, store, stream)
		return len(o) == 2 && o["shardId-000000000000"] == "A" && o["shardId-000000000001"] == "A" && len(a.records()) > 20, fmt.Sprint(o)
	})
	b := startProc(t, rB, "B", stream, table)
	ownedBy := func(o map[string]string, w string) []string {
		var s []string
		for shard, owner := range o {
			if owner == w {
				s = append(s, shard)
			}
		}
		slices.Sort(s)
		return s
	}
	eventually(t, settleWithin, "B takes one shard over", func() (bool, string) {
		a.alive(t)
		b.alive(t)
		o := leaseOwners(t, store, stream)
		return len(ownedBy(o, "A")) == 1 && len(ownedBy(o, "B")) == 1 && len(b.records()) > 10, fmt.Sprint(o)
	})
	fenced := ownedBy(leaseOwners(t, store, stream), "A")[0]

	restore := fault(rA)
	cut := time.Now()
	took := eventually(t, settleWithin, "B takes A's shard", func() (bool, string) {
		b.alive(t)
		o := leaseOwners(t, store, stream)
		return o[fenced] == "B", fmt.Sprint(o)
	})
	t.Logf("B took %s %v after A was cut off", fenced, took.Round(time.Millisecond))
	if rest := cutFor - time.Since(cut); rest > 0 {
		time.Sleep(rest)
	}
	restore()
	restored := time.Now()
	// A rejoins: it takes one shard back (by a planned hand-over; B logs
	// nothing on its side but the transfer).
	eventually(t, settleWithin, "A rejoins and holds one shard", func() (bool, string) {
		a.alive(t)
		o := leaseOwners(t, store, stream)
		return len(ownedBy(o, "A")) == 1 && len(ownedBy(o, "B")) == 1 && len(leaseTakes(restored, a)) == 1, fmt.Sprintf("%v, A took %v", o, leaseTakes(restored, a))
	})
	rejoined := time.Now()
	t.Logf("A holds a shard again %v after the fault ended", rejoined.Sub(restored).Round(time.Millisecond))
	time.Sleep(2 * leaseDuration) // no flapping: nothing moves now
	if moves := leaseTakes(rejoined, a, b); len(moves) > 0 {
		t.Errorf("leases moved after A rejoined and the leases had settled: %v", moves)
	}
	rs := fd.stop(t)
	eventually(t, handledWithin, "every record handled", func() (bool, string) {
		a.alive(t)
		b.alive(t)
		n := procCounts(a, b)
		var miss []string
		for _, r := range rs {
			if n[r.ID] == 0 {
				miss = append(miss, r.ID)
			}
		}
		return len(miss) == 0, fmt.Sprintf("%d of %d not handled, first %v", len(miss), len(rs), miss[:min(len(miss), 5)])
	})
	if over := overlaps(a, b); len(over) > 0 {
		t.Errorf("%d records started by a worker after another had taken its shard over, e.g.:\n%v", len(over), over[:min(len(over), 10)])
	}
	// The records A handled since its last checkpoint come again; nothing
	// else does (the planned moves re-deliver nothing). A handles at most
	// one record per handleMS on the shard, for CheckpointInterval since
	// the checkpoint plus up to the lease duration until it fenced.
	dups, eg := 0, []string{}
	for id, n := range procCounts(a, b) {
		if n > 1 {
			dups += n - 1
			if len(eg) < 5 {
				eg = append(eg, id)
			}
		}
	}
	bound := int((checkpointInterval+leaseDuration)/(handleMS*time.Millisecond)) + 5
	t.Logf("%d records; %d handled again (A's since its last checkpoint on %s), bound %d, e.g. %v", len(rs), dups, fenced, bound, eg)
	if dups > bound {
		t.Errorf("%d records handled twice, want at most %d (CheckpointInterval + LeaseDuration of handling)", dups, bound)
	}
	var afterCut int
	for _, l := range a.records() {
		if l.ShardID == fenced && l.Time.After(cut.Add(leaseDuration)) && l.Time.Before(restored) {
			afterCut++
		}
	}
	if afterCut > 0 {
		t.Errorf("A started %d records of %s more than a lease duration after it was cut off, want 0", afterCut, fenced)
	}
	a.terminate(t)
	b.terminate(t)
}
