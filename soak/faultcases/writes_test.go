//go:build integration

package faultcases_test

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// The adapter's writes: counted copies (Kinesis PutRecords to the source
// stream), dead letters (SQS SendMessage(Batch) to the dead-letter queue),
// durable delays (SendMessage(Batch) to the delay queue) and, in
// long-running mode, the delay queue's forwarder (ReceiveMessage,
// PutRecords, DeleteMessageBatch).
var (
	copyOps = []string{"PutRecords", "PutRecord"}
	sendOps = []string{"SendMessage", "SendMessageBatch"}
)

// writeFault is one fault on the adapter's writes.
type writeFault struct {
	name string
	svc  faultnet.Service
	rule faultnet.Rule
	// ambiguous: the write may have happened although the caller saw it
	// fail (an answer cut or lost after the write), so a copy or a dead
	// letter may be written twice: at least once remains the promise; the
	// records' first attempts still run once each.
	ambiguous bool
	// ecsOnly: the call is made only in long-running mode (the delay
	// queue's forwarder).
	ecsOnly bool
}

var writeFaults = []writeFault{
	{name: "PutRecords/Throttled", svc: faultnet.Kinesis, rule: faultnet.Rule{Ops: copyOps, Fault: faultnet.Throttled(), Times: faultTimes}},
	{name: "PutRecords/InternalFailure", svc: faultnet.Kinesis, rule: faultnet.Rule{Ops: copyOps, Fault: faultnet.InternalFailure(), Times: faultTimes}},
	{name: "PutRecords/ServiceUnavailable", svc: faultnet.Kinesis, rule: faultnet.Rule{Ops: copyOps, Fault: faultnet.ServiceUnavailable(), Times: faultTimes}},
	{name: "PutRecords/KMSThrottling", svc: faultnet.Kinesis, rule: faultnet.Rule{Ops: copyOps, Fault: faultnet.KMSThrottling(), Times: faultTimes}},
	{name: "PutRecords/PartialThrottled", svc: faultnet.Kinesis, rule: faultnet.Rule{Fault: faultnet.PartialFailure(2, "ProvisionedThroughputExceededException"), Times: 3}},
	{name: "PutRecords/PartialInternalFailure", svc: faultnet.Kinesis, rule: faultnet.Rule{Fault: faultnet.PartialFailure(2, "InternalFailure"), Times: 3}},
	{name: "PutRecords/CutBody", svc: faultnet.Kinesis, rule: faultnet.Rule{Ops: copyOps, Fault: faultnet.CutBody(), Times: 2}, ambiguous: true},
	{name: "Send/SQSThrottled", svc: faultnet.SQS, rule: faultnet.Rule{Ops: sendOps, Fault: faultnet.SQSThrottled(), Times: faultTimes}},
	{name: "Send/InternalFailure", svc: faultnet.SQS, rule: faultnet.Rule{Ops: sendOps, Fault: faultnet.InternalFailure(), Times: faultTimes}},
	{name: "Send/ServiceUnavailable", svc: faultnet.SQS, rule: faultnet.Rule{Ops: sendOps, Fault: faultnet.ServiceUnavailable(), Times: faultTimes}},
	{name: "Send/PartialInternalError", svc: faultnet.SQS, rule: faultnet.Rule{Ops: []string{"SendMessageBatch"}, Fault: faultnet.PartialFailure(2, "InternalError"), Times: 3}},
	{name: "Send/LostResponse", svc: faultnet.SQS, rule: faultnet.Rule{Ops: sendOps, Fault: faultnet.LostResponse(), Times: 2}, ambiguous: true},
	{name: "Receive/SQSThrottled", svc: faultnet.SQS, rule: faultnet.Rule{Ops: []string{"ReceiveMessage"}, Fault: faultnet.SQSThrottled(), Times: faultTimes}, ecsOnly: true},
	{name: "Receive/InternalFailure", svc: faultnet.SQS, rule: faultnet.Rule{Ops: []string{"ReceiveMessage"}, Fault: faultnet.InternalFailure(), Times: faultTimes}, ecsOnly: true},
	{name: "DeleteBatch/SQSThrottled", svc: faultnet.SQS, rule: faultnet.Rule{Ops: []string{"DeleteMessageBatch"}, Fault: faultnet.SQSThrottled(), Times: 2}, ecsOnly: true},
	{name: "DeleteBatch/InternalFailure", svc: faultnet.SQS, rule: faultnet.Rule{Ops: []string{"DeleteMessageBatch"}, Fault: faultnet.InternalFailure(), Times: 2}, ecsOnly: true},
}

// writeRecords returns the records of a write-fault test: per 5, 3 acks,
// a transient retry (a counted copy) and a drop (a dead letter), and every
// 10th a delay longer than the in-process limit (a delay message).
func writeRecords(prefix string, n int) []rec {
	rs := mixed(prefix, n)
	for i := range rs {
		if i%10 == 4 {
			rs[i].Outcome, rs[i].DelayMS, rs[i].UntilAttempt = "retry_after", 1500, 2
		}
	}
	return rs
}

// writeSetup is a stream with a dead-letter and a delay queue.
type writeSetup struct {
	env               *standin.Env
	stream, arn       string
	deadLetter, delay string
	r                 *routes
	j                 *journal
	opts              []lambdaadapter.SharedOption
}

func newWriteSetup(t *testing.T) *writeSetup {
	env := standin.Require(t)
	s := &writeSetup{env: env, r: newRoutes(t, env), j: &journal{}}
	s.stream, s.arn = env.NewStream(t, 1)
	s.deadLetter = env.NewQueue(t, nil)
	s.delay = env.NewQueue(t, nil)
	s.opts = []lambdaadapter.SharedOption{
		lambdaadapter.WithKinesisClient(s.r.K),
		lambdaadapter.WithSQSClient(s.r.S),
		lambdaadapter.WithMaxAttempts(3),
		lambdaadapter.WithDeadLetterQueue(s.deadLetter),
		lambdaadapter.WithDeadLetterDrops(),
		lambdaadapter.WithDelayQueue(s.delay),
		lambdaadapter.WithMaxInProcessDelay(500 * time.Millisecond),
		lambdaadapter.WithHooks(s.j),
	}
	return s
}

func (s *writeSetup) layer(svc faultnet.Service) *faultnet.AWS {
	if svc == faultnet.Kinesis {
		return s.r.kinesis.AWS
	}
	return s.r.sqs.AWS
}

// checkWrites checks a write-fault run: every injected fault met; every
// record at each attempt 1 .. final exactly once (a failed write is made
// again as a write: it runs no handler again and spends no attempt), or,
// for an ambiguous fault or a record whose write ran out of its deadline
// (the stand-in may have applied it: on a loaded machine an answer can come
// after the write round's deadline), its first attempt exactly once and its
// later ones at least once; every drop dead-lettered exactly once (at least
// once when ambiguous), and nothing else dead-lettered.
func (s *writeSetup) checkWrites(t *testing.T, f writeFault, rs []rec, lambdaMode bool) {
	t.Helper()
	var met int
	for _, op := range append(append([]string{}, copyOps...), append(sendOps, "ReceiveMessage", "DeleteMessageBatch")...) {
		met += s.layer(f.svc).Calls(op).Faulted
	}
	if met < f.rule.Times {
		t.Errorf("%d of the %d injected faults were met: the run did not meet the fault", met, f.rule.Times)
	}
	// A write that ran out of its deadline is ambiguous too: its records
	// are held to at least once; every other record to exactly once.
	var exact, ambiguous []rec
	for _, r := range rs {
		if f.ambiguous || s.j.writeTimedOut(r.ID) {
			ambiguous = append(ambiguous, r)
		} else {
			exact = append(exact, r)
		}
	}
	s.j.checkExact(t, exact)
	got := s.j.attempts()
	var bad []string
	extra := 0
	for _, r := range ambiguous {
		a := slices.Clone(got[r.ID])
		sort.Ints(a)
		if len(a) == 0 || a[0] != 1 || (len(a) > 1 && a[1] == 1) || a[len(a)-1] != finalAttempt(r) {
			bad = append(bad, fmt.Sprintf("%s %v", r.ID, got[r.ID]))
		}
		extra += len(a) - finalAttempt(r)
	}
	if len(bad) > 0 {
		t.Errorf("%d records not handled once at attempt 1 and at least once up to their final attempt: %v", len(bad), bad[:min(len(bad), 10)])
	}
	dl := deadLetterIDs(t, s.env, s.deadLetter, 10*len(rs)) // until the queue stays empty
	twice := 0
	for _, r := range rs {
		if r.Outcome == "drop" && dl[r.ID] == 0 {
			t.Errorf("%s: not dead-lettered", r.ID)
		}
		if dl[r.ID] > 1 && !f.ambiguous && !s.j.writeTimedOut(r.ID) {
			t.Errorf("%s: dead-lettered %d times", r.ID, dl[r.ID])
		}
		if r.Outcome != "drop" && dl[r.ID] > 0 {
			t.Errorf("%s: dead-lettered, but its handler never dropped it", r.ID)
		}
		twice += max(dl[r.ID]-1, 0)
	}
	if len(ambiguous) > 0 {
		t.Logf("ambiguous writes (%d records; fault ambiguous: %v, else timed out): %d handlings beyond one per attempt (a copy written twice), %d dead letters written twice", len(ambiguous), f.ambiguous, extra, twice)
	}
}

// concurrentlyW runs one subtest per write fault, all at once.
func concurrentlyW(t *testing.T, faults []writeFault, run func(t *testing.T, f writeFault)) {
	var wg sync.WaitGroup
	for _, f := range faults {
		wg.Go(func() {
			t.Run(f.name, func(t *testing.T) { run(t, f) })
		})
	}
	wg.Wait()
}

// TestECSWriteFaults (long-running mode): each fault on the adapter's
// writes — copies (PutRecords: throttled, 500, 503, KMSThrottling, partial
// failures, an answer cut mid-body), dead letters and delay messages
// (SendMessage(Batch): throttled, 500, 503, partial failures, a lost
// answer) and the delay queue's forwarder (ReceiveMessage and
// DeleteMessageBatch: throttled, 500) — four in a row, beyond the SDK's
// retries. A failed write is made again as a write: every record is handled
// exactly once per attempt (no handler run again, no attempt spent on a
// write), every drop is dead-lettered exactly once, nothing is lost. An
// ambiguous failure (the write happened, its answer was cut or lost) may
// write a copy or dead letter twice: counted and logged.
func TestECSWriteFaults(t *testing.T) {
	concurrentlyW(t, writeFaults, func(t *testing.T, f writeFault) {
		s := newWriteSetup(t)
		table, _ := newLeaseTable(t, s.env)
		rs := writeRecords("w", 40)
		write(t, s.env, s.stream, rs)
		s.layer(f.svc).Inject(f.rule)
		w := startWorker(t, "A", s.stream, table, s.r, s.j, doorOptions[lambdaadapter.ServiceOption](s.opts)...)
		took := awaitDone(t, s.j, rs, w)
		w.stop(t)
		s.checkWrites(t, f, rs, false)
		t.Logf("done in %v", took.Round(time.Millisecond))
	})
}

// TestLambdaWriteFaults (Lambda mode, the adapter's Invoke driven by the
// event source): the same faults on the copies, dead letters and delay
// messages (the delay queue goes back to the function through the event
// source, as an SQS event source mapping does). The writes are retried
// with backoff within the invocation, so a fault that recovers within it
// costs nothing: every record handled exactly once per attempt, every drop
// dead-lettered once, nothing lost (an ambiguous failure as in
// long-running mode).
func TestLambdaWriteFaults(t *testing.T) {
	t.Parallel() // mostly waiting: runs beside another slow test (see the package comment)
	var faults []writeFault
	for _, f := range writeFaults {
		if !f.ecsOnly {
			faults = append(faults, f)
		}
	}
	concurrentlyW(t, faults, func(t *testing.T, f writeFault) {
		s := newWriteSetup(t)
		a, err := lambdaadapter.NewFunction(s.j.handler("lambda"), doorOptions[lambdaadapter.FunctionOption](s.opts)...)
		if err != nil {
			t.Fatal(err)
		}
		es := &lambdaadaptertest.EventSource{StreamARN: s.arn, Kinesis: s.env.Kinesis, BatchSize: 25, QueueURL: s.delay, SQS: s.env.SQS}
		rs := writeRecords("w", 40)
		write(t, s.env, s.stream, rs)
		s.layer(f.svc).Inject(f.rule)
		lr := driveLambda(t, es, a, s.j, rs)
		s.checkWrites(t, f, rs, true)
		t.Logf("%d rounds, %d invocations", lr.rounds, lr.invocations)
	})
}
