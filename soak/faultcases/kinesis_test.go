//go:build integration

package faultcases_test

import (
	"sync"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// readOps are the Kinesis read calls of a polling consumer and of Lambda's
// event source mapping.
var readOps = []string{"ListShards", "GetShardIterator", "GetRecords"}

// readFault is one Kinesis read fault and the calls it is put on.
type readFault struct {
	fault faultnet.Fault
	ops   []string
}

// readFaults are the Kinesis read faults of issue 28: throttling
// (ProvisionedThroughputExceeded, LimitExceeded) and 5xx on every read call,
// ExpiredIterator, KMSThrottling and a response cut mid-body on GetRecords.
var readFaults = []readFault{
	{faultnet.Throttled(), readOps},
	{faultnet.LimitExceeded(), readOps},
	{faultnet.InternalFailure(), readOps},
	{faultnet.ServiceUnavailable(), readOps},
	{faultnet.ExpiredIterator(), []string{"GetRecords"}},
	{faultnet.KMSThrottling(), []string{"GetRecords"}},
	{faultnet.CutBody(), []string{"GetRecords", "GetShardIterator"}},
}

// faultTimes is how often each faulted call meets its fault in a row: the
// SDK's three attempts and one more, so at least one call fails to the
// caller whatever the SDK retries.
const faultTimes = 4

// injectReads puts f on each of its calls, faultTimes times in a row, and
// returns how many faults that is.
func injectReads(a *faultnet.AWS, f readFault) int {
	for _, op := range f.ops {
		a.Inject(faultnet.Rule{Ops: []string{op}, Fault: f.fault, Times: faultTimes})
	}
	return faultTimes * len(f.ops)
}

// concurrently runs one subtest per fault, all at once (each has its own
// stream, table and routes; they wait mostly on backoffs).
func concurrently(t *testing.T, faults []readFault, run func(t *testing.T, f readFault)) {
	var wg sync.WaitGroup
	for _, f := range faults {
		wg.Go(func() {
			t.Run(f.fault.String(), func(t *testing.T) { run(t, f) })
		})
	}
	wg.Wait()
}

// faultedAll fails the test unless every injected fault is met within a
// minute: the reader goes on reading meanwhile. (A read already on its way
// when the faults were injected may have brought the records before the
// faults were met: on a loaded machine the stand-in answers it after the
// test's write.)
func faultedAll(t *testing.T, a *faultnet.AWS, ops []string, want int) {
	t.Helper()
	got := 0
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		got = 0
		for _, op := range ops {
			got += a.Calls(op).Faulted
		}
		if got >= want || time.Now().After(deadline) {
			break
		}
	}
	if got != want {
		t.Errorf("%d of the %d injected faults were met (%v)", got, want, ops)
	}
}

// TestECSKinesisReadFaults (long-running mode, polling): each Kinesis read
// fault, on the worker's own route, at its start (ListShards,
// GetShardIterator, GetRecords: four in a row each, beyond the SDK's
// retries) and again on GetRecords once it reads. The worker retries with
// backoff (a throttled GetRecords with the same iterator, an expired
// iterator replaced after the last record read), every injected fault is
// met, and every record is handled exactly once: nothing lost, no
// duplicate.
func TestECSKinesisReadFaults(t *testing.T) {
	t.Parallel() // mostly waiting: runs beside another slow test (see the package comment)
	concurrently(t, readFaults, func(t *testing.T, f readFault) {
		env := standin.Require(t)
		stream, _ := env.NewStream(t, 1)
		table, _ := newLeaseTable(t, env)
		r := newRoutes(t, env)
		j := &journal{}
		first := acks("a", 40)
		write(t, env, stream, first)
		n := injectReads(r.kinesis.AWS, f)
		w := startWorker(t, "A", stream, table, r, j)
		awaitDone(t, j, first, w)
		second := acks("b", 40)
		n += injectReads(r.kinesis.AWS, readFault{f.fault, []string{"GetRecords"}})
		write(t, env, stream, second)
		took := awaitDone(t, j, append(first, second...), w)
		faultedAll(t, r.kinesis.AWS, readOps, n)
		w.stop(t)
		j.checkExact(t, append(first, second...))
		t.Logf("%d faults met; the second 40 records handled %v after they were written", n, took)
	})
}

// TestLambdaKinesisReadFaults (Lambda mode): the event source mapping's own
// reads (ListShards, GetShardIterator, GetRecords, through a route) meet
// each Kinesis read fault, four in a row per call. Lambda's poller retries
// them; the function sees every record exactly once, in one invocation per
// batch, and nothing is lost.
func TestLambdaKinesisReadFaults(t *testing.T) {
	concurrently(t, readFaults, func(t *testing.T, f readFault) {
		env := standin.Require(t)
		stream, arn := env.NewStream(t, 1)
		r := newRoutes(t, env)
		j := &journal{}
		a, err := lambdaadapter.NewFunction(j.handler("lambda"), lambdaadapter.WithKinesisClient(r.K), lambdaadapter.WithMaxAttempts(3))
		if err != nil {
			t.Fatal(err)
		}
		es := &lambdaadaptertest.EventSource{StreamARN: arn, Kinesis: r.K, BatchSize: 25}
		rs := acks("a", 60)
		write(t, env, stream, rs)
		n := injectReads(r.kinesis.AWS, f)
		lr := driveLambda(t, es, a, j, rs)
		faultedAll(t, r.kinesis.AWS, readOps, n)
		j.checkExact(t, rs)
		t.Logf("%d faults met; %d rounds, %d failed (%v), %d invocations", n, lr.rounds, lr.roundErrors, lr.lastErr, lr.invocations)
	})
}
