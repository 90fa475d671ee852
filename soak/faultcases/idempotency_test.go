//go:build integration

package faultcases_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/idempotency"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// idemFault is one fault on the idempotency table's calls.
type idemFault struct {
	name string
	rule faultnet.Rule
}

// idemFaults: each DynamoDB error kind on the claim (PutItem) and the
// completion (UpdateItem), four in a row (beyond the SDK's retries), and
// lost answers to claims, completions and releases.
var idemFaults = func() []idemFault {
	var fs []idemFault
	for _, f := range []faultnet.Fault{
		faultnet.Throttled(), faultnet.ThrottlingException(), faultnet.RequestLimitExceeded(),
		faultnet.InternalFailure(), faultnet.ServiceUnavailable(),
	} {
		for _, op := range []string{"PutItem", "UpdateItem"} {
			fs = append(fs, idemFault{op + "/" + f.String(), faultnet.Rule{Ops: []string{op}, Fault: f, Times: faultTimes}})
		}
	}
	fs = append(fs, idemFault{"LostResponse", faultnet.Rule{Ops: []string{"PutItem", "UpdateItem", "DeleteItem"}, Fault: faultnet.LostResponse(), Times: 6}})
	return fs
}()

// idemSetup: a stream, an idempotency table reached through its own
// route, a dead-letter queue, and the wrapped handler.
type idemSetup struct {
	*writeSetup
	idem *faultnet.Route
	h    *idempotency.Handler
}

func newIdemSetup(t *testing.T) *idemSetup {
	s := &idemSetup{writeSetup: newWriteSetup(t)}
	table := "idem-" + randomSuffix()
	ctx, cancel := context.WithTimeout(t.Context(), sdkTimeout)
	defer cancel()
	if err := idempotency.CreateTable(ctx, s.env.DynamoDB, table); err != nil && !isTTLUnsupported(err) {
		t.Fatalf("create idempotency table: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), sdkTimeout)
		defer cancel()
		_, _ = s.env.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	s.idem = newRoute(t, faultnet.DynamoDB, s.env.DynamoDBEndpoint)
	d := dynamodb.NewFromConfig(clientConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(s.idem.URL()) })
	h, err := idempotency.New(s.j.handler("h"), d, table, idempotency.WithKeyPrefix("faultcases"))
	if err != nil {
		t.Fatal(err)
	}
	s.h = h
	return s
}

func isTTLUnsupported(err error) bool {
	return err != nil && errorsIs(err, idempotency.ErrTTLUnsupported)
}

// idemRecords: per 5, 4 acks and a drop.
func idemRecords(n int) []rec {
	rs := acks("i", n)
	for i := range rs {
		if i%5 == 3 {
			rs[i].Outcome = "drop"
		}
	}
	return rs
}

// handledOnce reports whether every record's handler ran (at any attempt).
func (j *journal) handledAll(rs []rec) (bool, string) {
	got := j.attempts()
	var miss []string
	for _, r := range rs {
		if len(got[r.ID]) == 0 {
			miss = append(miss, r.ID)
		}
	}
	return len(miss) == 0, fmt.Sprintf("%d of %d not handled, first %v", len(miss), len(rs), miss[:min(len(miss), 5)])
}

// checkIdem: every record's handler ran exactly once, at attempt 1 (a
// store fault spends no attempt), drops dead-lettered once, nothing else
// dead-lettered; every injected fault was met. When a long-running worker
// fenced itself meanwhile (fenced: a renewal missed its deadline on a
// loaded machine), its records since the checkpoint came again; the
// idempotency table kept their handlers from running twice, but a
// completed drop is repeated as a Drop so that its dead letter is written
// (idempotency's documented outcome), so a drop may be dead-lettered more
// than once then.
func (s *idemSetup) checkIdem(t *testing.T, f idemFault, rs []rec, fenced bool) {
	t.Helper()
	met := 0
	for _, op := range []string{"PutItem", "UpdateItem", "DeleteItem"} {
		met += s.idem.AWS.Calls(op).Faulted
	}
	if met < f.rule.Times {
		t.Errorf("%d of %d injected faults met", met, f.rule.Times)
	}
	s.j.checkExact(t, rs)
	if fenced {
		t.Logf("the worker fenced itself (a lease renewal missed its deadline): drops may be dead-lettered again")
	}
	checkDeadLettersAgain(t, s.env, s.deadLetter, rs, fenced)
}

// TestECSIdempotencyFaults (long-running mode, idempotency.Handler): each
// DynamoDB fault on the idempotency table's claim and completion, beyond
// the SDK's retries, and lost answers. A failed claim runs no handler and
// the record comes again; a failed completion is logged. Promised: every
// record handled exactly once, at its first attempt (a store fault spends
// no attempt), drops dead-lettered once, nothing lost.
func TestECSIdempotencyFaults(t *testing.T) {
	concurrentlyI(t, func(t *testing.T, f idemFault) {
		s := newIdemSetup(t)
		table, _ := newLeaseTable(t, s.env)
		rs := idemRecords(30)
		write(t, s.env, s.stream, rs)
		s.idem.AWS.Inject(f.rule)
		w := startWorkerWith(t, "A", s.stream, table, s.r, s.h, doorOptions[lambdaadapter.ServiceOption](s.opts)...)
		eventually(t, handledWithin, "every record handled", func() (bool, string) {
			w.alive(t)
			return s.j.handledAll(rs)
		})
		time.Sleep(time.Second) // a record handled twice would show now
		w.stop(t)
		s.checkIdem(t, f, rs, w.logs.count("lease not renewed in time (fenced)") > 0)
	})
}

// TestLambdaIdempotencyFaults: the same in Lambda mode.
func TestLambdaIdempotencyFaults(t *testing.T) {
	concurrentlyI(t, func(t *testing.T, f idemFault) {
		s := newIdemSetup(t)
		a, err := lambdaadapter.NewFunction(s.h, doorOptions[lambdaadapter.FunctionOption](s.opts)...)
		if err != nil {
			t.Fatal(err)
		}
		es := &lambdaadaptertest.EventSource{StreamARN: s.arn, Kinesis: s.env.Kinesis, BatchSize: 25, QueueURL: s.delay, SQS: s.env.SQS}
		rs := idemRecords(30)
		write(t, s.env, s.stream, rs)
		s.idem.AWS.Inject(f.rule)
		driveLambdaUntil(t, es, a, func() (bool, string) { return s.j.handledAll(rs) })
		s.checkIdem(t, f, rs, false)
	})
}

func concurrentlyI(t *testing.T, run func(t *testing.T, f idemFault)) {
	done := make(chan struct{}, len(idemFaults))
	for _, f := range idemFaults {
		go func() {
			defer func() { done <- struct{}{} }()
			t.Run(f.name, func(t *testing.T) { run(t, f) })
		}()
	}
	for range idemFaults {
		<-done
	}
}

// claimOutage is how long every claim fails in the outage tests: longer
// than the SDK's retries of one call, shorter than a lease.
const claimOutage = 3 * time.Second

// TestECSIdempotencyClaimOutage (long-running mode): every claim
// (PutItem) is throttled for 3 s, so claims fail beyond the SDK's retries.
// A failed claim runs no handler, and must spend no attempt: every record
// is handled exactly once at attempt 1, nothing but the drops is
// dead-lettered, nothing is lost.
func TestECSIdempotencyClaimOutage(t *testing.T) {
	s := newIdemSetup(t)
	table, _ := newLeaseTable(t, s.env)
	rs := idemRecords(30)
	write(t, s.env, s.stream, rs)
	remove := s.idem.AWS.Inject(faultnet.Rule{Ops: []string{"PutItem"}, Fault: faultnet.Throttled()})
	w := startWorkerWith(t, "A", s.stream, table, s.r, s.h, doorOptions[lambdaadapter.ServiceOption](s.opts)...)
	time.Sleep(claimOutage)
	remove()
	eventually(t, handledWithin, "every record handled", func() (bool, string) {
		w.alive(t)
		return s.j.handledAll(rs)
	})
	time.Sleep(time.Second)
	w.stop(t)
	s.checkIdem(t, idemFault{"outage", faultnet.Rule{Times: 1}}, rs, w.logs.count("lease not renewed in time (fenced)") > 0)
}

// TestLambdaIdempotencyClaimOutage: the same in Lambda mode.
func TestLambdaIdempotencyClaimOutage(t *testing.T) {
	s := newIdemSetup(t)
	a, err := lambdaadapter.NewFunction(s.h, doorOptions[lambdaadapter.FunctionOption](s.opts)...)
	if err != nil {
		t.Fatal(err)
	}
	es := &lambdaadaptertest.EventSource{StreamARN: s.arn, Kinesis: s.env.Kinesis, BatchSize: 25, QueueURL: s.delay, SQS: s.env.SQS}
	rs := idemRecords(30)
	write(t, s.env, s.stream, rs)
	remove := s.idem.AWS.Inject(faultnet.Rule{Ops: []string{"PutItem"}, Fault: faultnet.Throttled()})
	time.AfterFunc(claimOutage, remove)
	driveLambdaUntil(t, es, a, func() (bool, string) { return s.j.handledAll(rs) })
	s.checkIdem(t, idemFault{"outage", faultnet.Rule{Times: 1}}, rs, false)
}
