//go:build integration

package faultcases_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// TestECSLeaseCallsFaultedBriefly: two `bootstrap -mode=ecs` workers, one
// shard with steady traffic, A holds the lease and B waits. Every DynamoDB
// call of A (renewals, checkpoints, heartbeats, lease-table scans) meets one
// fault kind after another, each for a quarter of the lease duration with a
// lease duration of calm between: 400 ProvisionedThroughputExceededException,
// ThrottlingException, RequestLimitExceeded, 500 InternalServerError, 503
// ServiceUnavailable; then lost answers to its conditional writes (applied,
// then ConditionalCheckFailedException). A keeps the lease throughout (it
// never fences, B never takes it, B handles nothing), nothing is lost and
// nothing is handled twice. Before A starts, its start-up calls
// (DescribeTable, the lease rows' PutItem, the take's UpdateItem, the first
// Scan) are throttled twice each, which the SDK's retries absorb.
func TestECSLeaseCallsFaultedBriefly(t *testing.T) {
	t.Parallel() // mostly waiting: runs beside another slow test (see the package comment)
	leaseFaultWindows(t, leaseDuration/4)
}

// TestECSLeaseCallsFaultedHalfLease is the promise of issue 28 ("no lease
// lost to a throttled renewal that recovers within the lease duration"),
// with fault windows of half the lease duration. It failed before the
// renewer tried a failed renewal again a tenth of the lease duration later
// (consumer: renewer): a renewal waited its turn behind a checkpoint write
// that spent its deadline (a third of the lease duration) in the SDK's
// throttling backoff, the next round came a third later, and the worker
// fenced.
func TestECSLeaseCallsFaultedHalfLease(t *testing.T) {
	t.Parallel() // mostly waiting, as TestECSLeaseCallsFaultedBriefly
	leaseFaultWindows(t, leaseDuration/2)
}

func leaseFaultWindows(t *testing.T, window time.Duration) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 1)
	table, store := newLeaseTable(t, env)
	rA, rB := newRoutes(t, env), newRoutes(t, env)
	var startup []func()
	for _, op := range []string{"DescribeTable", "PutItem", "UpdateItem", "Scan"} {
		startup = append(startup, rA.dynamodb.AWS.Inject(faultnet.Rule{Ops: []string{op}, Fault: faultnet.Throttled(), Times: 2}))
	}
	fd := startFeeder(t, env, stream, 1, feedEvery, func(i int) rec {
		return rec{ID: fmt.Sprintf("r-%06d", i), SleepMS: 20, key: "one-key"}
	})
	a := startProc(t, rA, "A", stream, table)
	eventually(t, settleWithin, "A holds the shard and handles records", func() (bool, string) {
		a.alive(t)
		o := leaseOwners(t, store, stream)
		return o["shardId-000000000000"] == "A" && len(a.records()) > 10, fmt.Sprint(o)
	})
	for _, remove := range startup {
		remove() // spent by now, or never met: gone either way
	}
	b := startProc(t, rB, "B", stream, table)
	time.Sleep(leaseDuration) // B is known, and leaves A its lease

	// watch checks the lease's owner every poll during d.
	watch := func(what string, d time.Duration) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(poll) {
			a.alive(t)
			b.alive(t)
			if o := leaseOwners(t, store, stream)["shardId-000000000000"]; o != "A" {
				t.Fatalf("%s: the lease's owner is %q, want A", what, o)
			}
		}
	}
	before := rA.dynamodb.AWS.Calls("")
	for _, f := range []faultnet.Fault{
		faultnet.Throttled(), faultnet.ThrottlingException(), faultnet.RequestLimitExceeded(),
		faultnet.InternalFailure(), faultnet.ServiceUnavailable(),
	} {
		remove := rA.dynamodb.AWS.Inject(faultnet.Rule{Fault: f})
		watch(f.String(), window)
		remove()
		watch(f.String()+" (after)", leaseDuration/2)
	}
	// Lost answers: the next renewals and checkpoints are applied, and
	// their answers lost; the store recognises its own writes.
	rA.dynamodb.AWS.Inject(faultnet.Rule{Ops: []string{"UpdateItem"}, Fault: faultnet.LostResponse(), Times: 4, Match: conditional})
	watch("LostResponse", leaseDuration)
	faulted := rA.dynamodb.AWS.Calls("").Faulted - before.Faulted
	rs := fd.stop(t)
	eventually(t, handledWithin, "every record handled", func() (bool, string) {
		a.alive(t)
		n := procCounts(a)
		var miss []string
		for _, r := range rs {
			if n[r.ID] == 0 {
				miss = append(miss, r.ID)
			}
		}
		return len(miss) == 0, fmt.Sprintf("%d of %d not handled, first %v", len(miss), len(rs), miss[:min(len(miss), 5)])
	})
	if n := len(b.records()); n > 0 {
		t.Errorf("B handled %d records, want 0 (A kept the lease)", n)
	}
	var twice []string
	for id, n := range procCounts(a, b) {
		if n > 1 {
			twice = append(twice, id)
		}
	}
	if len(twice) > 0 {
		t.Errorf("%d records handled more than once, want 0, e.g. %v", len(twice), twice[:min(len(twice), 5)])
	}
	for _, l := range a.log() {
		if strings.Contains(l.Msg, "fenced") || strings.Contains(l.Msg, "lost") {
			t.Errorf("A logged %q on %s", l.Msg, l.ShardID)
		}
	}
	if faulted < 10 {
		t.Errorf("only %d of A's DynamoDB calls were faulted in the fault windows; the test did not test much", faulted)
	}
	t.Logf("%d records, A's DynamoDB calls faulted in the windows: %d (of %d)", len(rs), faulted, rA.dynamodb.AWS.Calls("").Calls-before.Calls)
	a.terminate(t)
	b.terminate(t)
}

// conditional matches the lease writes (conditional on owner and counter),
// not the heartbeat (an unconditional UpdateItem of the worker's row, to
// which a ConditionalCheckFailedException is no possible answer).
func conditional(op string, body []byte) bool {
	return strings.Contains(string(body), `"ConditionExpression"`)
}
