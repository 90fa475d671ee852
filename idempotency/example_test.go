package idempotency_test

import (
	"context"
	"encoding/json"
	"log"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/idempotency"
)

// charge stands for a side effect that must happen once per order.
func charge(context.Context, string) error { return nil }

// Wrap a handler so that an order is charged once, however often its
// record (or a copy of it) is delivered: the key is the order id.
func Example() {
	cfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	handler := lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		var o struct{ ID string }
		if err := json.Unmarshal(m.Payload, &o); err != nil {
			return lambdaadapter.Drop(err)
		}
		if err := charge(ctx, o.ID); err != nil {
			return lambdaadapter.Retry(err)
		}
		return lambdaadapter.Ack()
	})
	h, err := idempotency.New(handler, dynamodb.NewFromConfig(cfg), "idempotency",
		idempotency.WithKeyPrefix("orders-charge"),
		idempotency.WithTTL(24*time.Hour),
		idempotency.WithKeyFunc(func(m *lambdaadapter.Message) (string, error) {
			var o struct{ ID string }
			err := json.Unmarshal(m.Payload, &o)
			return "order-" + o.ID, err
		}))
	if err != nil {
		log.Fatal(err)
	}
	lambdaadapter.Handle(h, lambdaadapter.WithConcurrency(32))
}
