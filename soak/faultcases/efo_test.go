//go:build integration

package faultcases_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// noInitialResponse is the SDK's protocol without the event stream's
// initial-response message, which kinesis-local does not send (see
// integration/efo_test.go): a workaround for the stand-in, in the test's
// client only.
type noInitialResponse struct{ smithyhttp.ClientProtocol }

func (noInitialResponse) HasInitialEventMessage() bool { return false }

// TestECSFanOutSubscribeFaults (long-running mode, enhanced fan-out): the
// worker's SubscribeToShard calls meet LimitExceededException,
// ProvisionedThroughputExceededException, ResourceInUseException (the
// previous subscription still open) and 500 InternalFailure, four in a row,
// before any event. The worker backs off and subscribes again from where it
// would have started; every record is handled exactly once.
func TestECSFanOutSubscribeFaults(t *testing.T) {
	t.Parallel() // mostly waiting: runs beside another slow test (see the package comment)
	faults := []readFault{
		{faultnet.LimitExceeded(), []string{"SubscribeToShard"}},
		{faultnet.Throttled(), []string{"SubscribeToShard"}},
		{faultnet.APIError(400, "ResourceInUseException", "Another active subscription exists for this consumer"), []string{"SubscribeToShard"}},
		{faultnet.InternalFailure(), []string{"SubscribeToShard"}},
	}
	concurrently(t, faults, func(t *testing.T, f readFault) {
		s := newWriteSetup(t)
		table, _ := newLeaseTable(t, s.env)
		k := kinesis.NewFromConfig(clientConfig(), func(o *kinesis.Options) {
			o.BaseEndpoint = aws.String(s.r.kinesis.URL())
			o.Protocol = noInitialResponse{o.Protocol}
		})
		rs := acks("f", 40)
		write(t, s.env, s.stream, rs)
		n := injectReads(s.r.kinesis.AWS, f)
		w := startWorker(t, "A", s.stream, table, s.r, s.j,
			lambdaadapter.WithKinesisClient(k), lambdaadapter.WithStreamARN(s.arn), lambdaadapter.WithEnhancedFanOut("faultcases"))
		took := awaitDone(t, s.j, rs, w)
		faultedAll(t, s.r.kinesis.AWS, f.ops, n)
		if c := s.r.kinesis.AWS.Calls("GetRecords"); c.Calls > 0 || s.r.kinesis.AWS.Calls("SubscribeToShard").Forwarded == 0 {
			t.Errorf("GetRecords calls %+v, SubscribeToShard %+v: want the records pushed by a subscription", c, s.r.kinesis.AWS.Calls("SubscribeToShard"))
		}
		w.stop(t)
		s.j.checkExact(t, rs)
		t.Logf("%d faults met; every record handled %v after the start", n, took.Round(1e6))
	})
}
