//go:build integration

package faultcases_test

import (
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// tcpFault is one TCP fault on one of a worker's routes, for a window.
type tcpFault struct {
	name  string
	svc   faultnet.Service
	apply func(*faultnet.TCP) (remove func())
	// ambiguous: an answer reset after the request reached the service
	// (ResetPeer) may make the SDK send a copy, dead letter or delay
	// message twice; claims of the lease are recognised as its own
	// (writeToken), so only the SQS and Kinesis writes are ambiguous.
	ambiguous bool
	// ecsOnly: Lambda mode makes no such calls.
	ecsOnly bool
	// partition: the fault cuts the worker off from the lease table for
	// longer than the fence allows (every answer reset, so no lease write
	// can be confirmed): the worker may lose or fence the shard and take it
	// again; what it handled since its last checkpoint comes again
	// (counted). Nothing may be lost.
	partition bool
	// noDelays: the records ask for no durable delay. A delay queue
	// message received by a ReceiveMessage whose answer the black hole
	// swallowed stays invisible until the forwarder's visibility timeout
	// (60 s) ends and is forwarded then: not lost, but longer than this
	// test waits.
	noDelays bool
}

// tcpWindow is how long each TCP fault lasts: over a lease duration for
// the Kinesis and SQS routes; the DynamoDB faults stay below the fence.
const tcpWindow = 4 * time.Second

var tcpFaults = []tcpFault{
	{name: "Kinesis/LatencyJitter", svc: faultnet.Kinesis, apply: func(t *faultnet.TCP) func() { return t.Latency(400*time.Millisecond, 300*time.Millisecond) }},
	{name: "Kinesis/Bandwidth", svc: faultnet.Kinesis, apply: func(t *faultnet.TCP) func() { return t.Bandwidth(8) }},
	{name: "Kinesis/ResetPeer", svc: faultnet.Kinesis, apply: func(t *faultnet.TCP) func() { return t.ResetPeer(0) }, ambiguous: true},
	{name: "Kinesis/BlackHole", svc: faultnet.Kinesis, apply: func(t *faultnet.TCP) func() { return t.BlackHole() }},
	{name: "SQS/LatencyJitter", svc: faultnet.SQS, apply: func(t *faultnet.TCP) func() { return t.Latency(400*time.Millisecond, 300*time.Millisecond) }},
	{name: "SQS/ResetPeer", svc: faultnet.SQS, apply: func(t *faultnet.TCP) func() { return t.ResetPeer(0) }, ambiguous: true},
	{name: "SQS/BlackHole", svc: faultnet.SQS, apply: func(t *faultnet.TCP) func() { return t.BlackHole() }, noDelays: true},
	{name: "DynamoDB/LatencyJitter", svc: faultnet.DynamoDB, apply: func(t *faultnet.TCP) func() { return t.Latency(300*time.Millisecond, 200*time.Millisecond) }, ecsOnly: true},
	{name: "DynamoDB/Bandwidth", svc: faultnet.DynamoDB, apply: func(t *faultnet.TCP) func() { return t.Bandwidth(16) }, ecsOnly: true},
	{name: "DynamoDB/ResetPeer", svc: faultnet.DynamoDB, apply: func(t *faultnet.TCP) func() { return t.ResetPeer(0) }, ecsOnly: true, partition: true},
}

func (r *routes) tcp(svc faultnet.Service) *faultnet.TCP {
	switch svc {
	case faultnet.Kinesis:
		return r.kinesis.TCP
	case faultnet.DynamoDB:
		return r.dynamodb.TCP
	}
	return r.sqs.TCP
}

func concurrentlyT(t *testing.T, faults []tcpFault, run func(t *testing.T, f tcpFault)) {
	done := make(chan struct{}, len(faults))
	for _, f := range faults {
		go func() {
			defer func() { done <- struct{}{} }()
			t.Run(f.name, func(t *testing.T) { run(t, f) })
		}()
	}
	for range faults {
		<-done
	}
}

// checkTCP: an ambiguous fault as checkWrites has it; otherwise every
// record handled exactly once per attempt and every drop dead-lettered
// exactly once.
func (s *writeSetup) checkTCP(t *testing.T, f tcpFault, rs []rec) {
	t.Helper()
	s.checkWrites(t, writeFault{name: f.name, svc: f.svc, ambiguous: f.ambiguous}, rs, false)
}

// TestECSTCPFaults (long-running mode, per worker and per service): a
// fault on one of the worker's TCP routes for 4 s while records (acks,
// copies, dead letters, delays) arrive: latency with jitter, low bandwidth,
// connections reset when their answer begins, and a black hole (calls time
// out; the black hole's end closes them) on Kinesis and SQS; latency,
// bandwidth and resets on DynamoDB (its black hole and cut are
// TestECSCutOffFromDynamoDB). Nothing is lost; nothing is handled twice,
// except where a reset answer makes the SDK send a copy, dead letter or
// delay message again (counted). The worker keeps its lease through the
// DynamoDB faults (a reset lease write is recognised by its writeToken).
func TestECSTCPFaults(t *testing.T) {
	concurrentlyT(t, tcpFaults, func(t *testing.T, f tcpFault) {
		s := newWriteSetup(t)
		table, store := newLeaseTable(t, s.env)
		first, second := f.records("a"), f.records("b")
		write(t, s.env, s.stream, first)
		w := startWorkerWith(t, "A", s.stream, table, s.r, s.j.handler("A"), doorOptions[lambdaadapter.ServiceOption](s.opts)...)
		awaitDone(t, s.j, first, w)
		remove := f.apply(s.r.tcp(f.svc))
		write(t, s.env, s.stream, second)
		time.Sleep(tcpWindow)
		remove()
		rs := append(first, second...)
		took := awaitDone(t, s.j, rs, w)
		if o := leaseOwners(t, store, s.stream)["shardId-000000000000"]; o != "A" {
			t.Errorf("lease owner %q after the fault, want A", o)
		}
		lost := w.logs.count("lease lost") + w.logs.count("fenced")
		w.stop(t)
		if f.partition {
			// Nothing lost (awaited above); what came again is counted.
			n, eg := s.j.extra(rs)
			t.Logf("partition: the shard stopped %d times; %d handlings beyond one per attempt, e.g. %v", lost, n, eg)
			return
		}
		s.checkTCP(t, f, rs)
		if lost > 0 {
			t.Errorf("the worker lost or fenced its lease %d times", lost)
		}
		t.Logf("done %v after the fault ended", took.Round(time.Millisecond))
	})
}

// TestLambdaTCPFaults (Lambda mode): the same Kinesis and SQS faults on
// the event source's reads and the adapter's writes for 4 s. The event
// source (Lambda) retries its reads; the writes are retried within the
// invocation or, past its deadline, the record is reported and comes
// again. Nothing is lost; no duplicate but those a reset answer causes.
func TestLambdaTCPFaults(t *testing.T) {
	var faults []tcpFault
	for _, f := range tcpFaults {
		if !f.ecsOnly {
			faults = append(faults, f)
		}
	}
	concurrentlyT(t, faults, func(t *testing.T, f tcpFault) {
		s := newWriteSetup(t)
		a, err := lambdaadapter.NewFunction(s.j.handler("lambda"), doorOptions[lambdaadapter.FunctionOption](s.opts)...)
		if err != nil {
			t.Fatal(err)
		}
		es := &lambdaadaptertest.EventSource{StreamARN: s.arn, Kinesis: s.r.K, BatchSize: 25, QueueURL: s.delay, SQS: s.env.SQS}
		rs := append(f.records("a"), f.records("b")...)
		write(t, s.env, s.stream, rs)
		remove := f.apply(s.r.tcp(f.svc))
		timer := time.AfterFunc(tcpWindow, remove)
		defer timer.Stop()
		lr := driveLambda(t, es, a, s.j, rs)
		remove()
		s.checkTCP(t, f, rs)
		t.Logf("%d rounds (%d failed), %d invocations", lr.rounds, lr.roundErrors, lr.invocations)
	})
}

// records returns the 20 records of one half of a TCP fault test.
func (f tcpFault) records(prefix string) []rec {
	rs := writeRecords(prefix, 20)
	if f.noDelays {
		rs = mixed(prefix, 20)
	}
	return rs
}
