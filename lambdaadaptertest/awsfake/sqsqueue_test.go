package awsfake

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func TestQueueDelayVisibilityDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewSQS()
		ctx := context.Background()
		url := "https://sqs.example/q"
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("later"), DelaySeconds: 10}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 5})
		if err != nil || len(out.Messages) != 0 {
			t.Fatalf("got %v, %v before the delay passed, want nothing", out, err)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("long poll waited %v, want 5s", waited)
		}
		out, err = q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20, VisibilityTimeout: 30})
		if err != nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "later" {
			t.Fatalf("got %v, %v, want the message", out, err)
		}
		if waited := time.Since(start); waited != 10*time.Second {
			t.Errorf("message received after %v, want 10s (its delay)", waited)
		}
		first := out.Messages[0].ReceiptHandle
		// Hidden for its visibility timeout, then received again under a new handle.
		out, _ = q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
		if len(out.Messages) != 0 {
			t.Fatalf("message visible again within its visibility timeout")
		}
		out, _ = q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
		if len(out.Messages) != 1 {
			t.Fatalf("message not visible again after its visibility timeout")
		}
		del, _ := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: first}}})
		if len(del.Failed) != 1 {
			t.Errorf("a stale receipt handle deleted the message")
		}
		del, _ = q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: out.Messages[0].ReceiptHandle}}})
		if len(del.Successful) != 1 || q.Waiting(url) != 0 {
			t.Errorf("delete with the current handle: %+v, %d waiting", del, q.Waiting(url))
		}
	})
}
