package lambdaadapter_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

// writeOnly hides every call of a Kinesis client but PutRecord(s).
type writeOnly struct{ publish.KinesisAPI }

func TestDoorsWiring(t *testing.T) {
	h := lambdaadapter.HandlerFunc(noop)
	k := lambdaadaptertest.NewKinesis()
	if _, err := lambdaadapter.NewService(h, lambdaadapter.WithKinesisClient(k)); err == nil || !strings.Contains(err.Error(), "WithStream") {
		t.Errorf("a service without a stream: %v", err)
	}
	// A client that only writes cannot read the stream.
	if _, err := lambdaadapter.NewService(h, lambdaadapter.WithStream("s"), lambdaadapter.WithKinesisClient(writeOnly{k})); err == nil || !strings.Contains(err.Error(), "GetRecords") {
		t.Errorf("a service with a write-only client: %v", err)
	}
	// The library builds no AWS configuration of its own.
	if _, err := lambdaadapter.NewService(h, lambdaadapter.WithStream("s")); err == nil || !strings.Contains(err.Error(), "WithAWSConfig") {
		t.Errorf("a service without a client or AWS configuration: %v", err)
	}
	if _, err := lambdaadapter.NewService(h, lambdaadapter.WithStream("s"), lambdaadapter.WithKinesisClient(k), lambdaadapter.WithLeaseTable("t")); err == nil || !strings.Contains(err.Error(), "DynamoDB") {
		t.Errorf("a lease table without a DynamoDB client: %v", err)
	}
	if _, err := lambdaadapter.NewFunction(h, lambdaadapter.WithMaxAttempts(3)); err == nil || !strings.Contains(err.Error(), "WithAWSConfig") {
		t.Errorf("counted copies without a Kinesis client: %v", err)
	}
	if _, err := lambdaadapter.NewFunction(h, lambdaadapter.WithKinesisClient(k), lambdaadapter.WithDeadLetterQueue("https://sqs.example/1/q")); err == nil || !strings.Contains(err.Error(), "SQS") {
		t.Errorf("a dead-letter queue without an SQS client: %v", err)
	}
	cfg := aws.Config{Region: "us-east-1", Credentials: aws.AnonymousCredentials{}}
	s, err := lambdaadapter.NewService(h, lambdaadapter.WithStream("s"), lambdaadapter.WithAWSConfig(cfg), lambdaadapter.WithLeaseTable("t"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Owner(), "worker-") || len(s.Owned()) != 0 {
		t.Errorf("owner %q, owned %v; want a random worker id and no shard before Run", s.Owner(), s.Owned())
	}
	// A function that only acks, drops and retries needs no AWS at all.
	f, err := lambdaadapter.NewFunction(h)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Invoke(t.Context(), lambdaadaptertest.NewBatch("s").Generate(3, 2, 8, false).JSON())
	if err != nil || string(res) != `{"batchItemFailures":[]}` {
		t.Errorf("Invoke = %s, %v", res, err)
	}
	// A reply naming a stream then fails with a clear error.
	var replyErr error
	f, err = lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		replyErr = m.Reply(ctx, lambdaadapter.Reply{Stream: "answers", Payload: []byte("x")})
		return lambdaadapter.Ack()
	}), lambdaadapter.WithConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Invoke(t.Context(), lambdaadaptertest.NewBatch("s").Generate(1, 1, 8, false).JSON()); err != nil {
		t.Fatal(err)
	}
	if replyErr == nil || !strings.Contains(replyErr.Error(), "WithKinesisClient") {
		t.Errorf("reply without a Kinesis client: %v", replyErr)
	}
	bh := lambdaadapter.BatchHandlerFunc(func(context.Context, []*message.Message) []message.Outcome { return nil })
	if _, err := lambdaadapter.NewBatchService(bh, lambdaadapter.WithStream("s"), lambdaadapter.WithKinesisClient(k), lambdaadapter.WithBatchSize(500)); err != nil {
		t.Errorf("NewBatchService: %v", err)
	}
	if _, err := lambdaadapter.NewBatchService(bh, lambdaadapter.WithStream("s"), lambdaadapter.WithKinesisClient(k), lambdaadapter.WithBatchSize(20000)); err == nil {
		t.Error("batch size 20000 accepted")
	}
}
