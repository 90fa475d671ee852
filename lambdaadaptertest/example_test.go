package lambdaadaptertest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

// Build a realistic Kinesis event, run it through a real Function with the
// in-memory Kinesis fake, and look at what Lambda would be told and what was
// written. The handler fails the record of tenant acme: without a cap the
// response reports exactly that record (Lambda checkpoints just before it);
// with WithMaxAttempts the record is copied to its stream instead, and every
// record settles.
func Example() {
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("user-1", []byte(`{"id":1}`))
	acme := b.Add("user-2", []byte(`{"id":2}`), "x-tenant", "acme") // an RSK1 header
	b.Add("user-3", []byte(`{"id":3}`))

	h := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		if m.Header("x-tenant") == "acme" {
			return lambdaadapter.Retry(errors.New("tenant database down"))
		}
		return lambdaadapter.Ack()
	})
	kin := lambdaadaptertest.NewKinesis()

	// Not counted: HandleEvent takes the decoded event and returns the
	// partial batch response.
	f, err := lambdaadapter.NewFunction(h, lambdaadapter.WithKinesisClient(kin))
	if err != nil {
		panic(err)
	}
	resp, err := f.HandleEvent(context.Background(), b.Event())
	if err != nil {
		panic(err)
	}
	for _, failure := range resp.BatchItemFailures {
		fmt.Println("reported:", failure.ItemIdentifier == acme, len(failure.ItemIdentifier), "digits")
	}

	// Counted: Invoke takes the raw JSON Lambda sends and answers JSON.
	f, err = lambdaadapter.NewFunction(h, lambdaadapter.WithKinesisClient(kin), lambdaadapter.WithMaxAttempts(3))
	if err != nil {
		panic(err)
	}
	raw, err := f.Invoke(context.Background(), b.JSON())
	if err != nil {
		panic(err)
	}
	fmt.Println(string(raw))
	for _, w := range kin.Written() {
		fmt.Println("copy:", w.PartitionKey, string(w.Payload),
			"x-tenant="+w.Headers.Get("x-tenant"), "x-ruststream-retry-count="+w.Headers.Get("x-ruststream-retry-count"))
	}
	// Output:
	// reported: true 56 digits
	// {"batchItemFailures":[]}
	// copy: user-2 {"id":2} x-tenant=acme x-ruststream-retry-count=1
}
