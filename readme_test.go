package lambdaadapter_test

// The Go code of README.md, compiled here and run by go test. TestDocsCode
// (docs_test.go) checks that every block the README marks "checked against
// readme_test.go" declares exactly what this file declares under the same
// names, character for character, so the README cannot rot.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

type Order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// What the README leaves to the reader ("charge, errInvalid and
// errRateLimited are your code"): a negative amount is invalid, a large one
// is rate limited.
var (
	errInvalid     = errors.New("invalid order")
	errRateLimited = errors.New("rate limited")
)

func charge(ctx context.Context, o Order) error {
	switch {
	case o.Amount < 0:
		return errInvalid
	case o.Amount > 1000:
		return errRateLimited
	}
	return nil
}

var handleOrder = lambdaadapter.JSON(func(ctx context.Context, o Order, m *lambdaadapter.Message) lambdaadapter.Outcome {
	switch err := charge(ctx, o); {
	case err == nil:
		return lambdaadapter.Ack()
	case errors.Is(err, errInvalid):
		return lambdaadapter.Drop(err) // poison: never blocks the shard
	case errors.Is(err, errRateLimited):
		return lambdaadapter.RetryAfter(30*time.Second, err)
	default:
		return lambdaadapter.Retry(err)
	}
})

// main is the README's quick start; here it only has to compile.
func main() {
	lambdaadapter.Handle(handleOrder,
		lambdaadapter.WithConcurrency(32),
		lambdaadapter.WithMaxAttempts(5),
		lambdaadapter.WithDeadLetterStream("orders-dlq"),
		lambdaadapter.WithDelayQueue("https://sqs.us-east-1.amazonaws.com/123456789012/orders-delay"),
	)
}

func runService(ctx context.Context, cfg aws.Config) error {
	s, err := lambdaadapter.NewService(handleOrder, lambdaadapter.WithAWSConfig(cfg),
		lambdaadapter.WithStream("orders"),
		lambdaadapter.WithLeaseTable("orders-leases"))
	if err != nil {
		return err
	}
	return s.Run(ctx) // until ctx ends, then a graceful stop
}

// The README's quick start and service must at least build their doors.
var _, _ = main, runService

func TestHandleOrder(t *testing.T) {
	b := lambdaadaptertest.NewBatch("orders") // a realistic event: 56-digit sequence numbers
	b.Add("user-1", []byte(`{"id":"a","amount":5}`))
	b.Add("user-2", []byte(`{"id":"b","amount":-1}`), "x-tenant", "acme") // RSK1 headers; invalid: dropped
	b.Add("user-3", []byte(`{"id":"c","amount":9000}`))                   // rate limited: a counted copy
	res := lambdaadaptertest.Run(t, handleOrder, b, lambdaadapter.WithMaxAttempts(5))
	if !res.AllSettled() || len(res.Kinesis.Written()) != 1 {
		t.Fatalf("response %s, copies %v", res.Raw, res.Kinesis.Written())
	}
}
