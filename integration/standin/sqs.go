package standin

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

const (
	// maxQueueName is the longest queue name SQS accepts, ".fifo" included.
	maxQueueName = 80
	// maxWaitSeconds is the longest long poll SQS accepts.
	maxWaitSeconds = 20
	// maxReceive is the most messages one ReceiveMessage call returns.
	maxReceive = 10
)

// NewQueue creates a queue with a unique name and the given attributes (nil
// for the defaults, e.g. {"VisibilityTimeout": "5"}), and returns its URL.
// With {"FifoQueue": "true"} the name ends in ".fifo", as SQS requires. The
// queue is deleted when the test and its subtests have finished. A failure
// fails the test with t.Fatalf.
func (e *Env) NewQueue(t testing.TB, attrs map[string]string) (url string) {
	t.Helper()
	suffix := ""
	if attrs[string(sqstypes.QueueAttributeNameFifoQueue)] == "true" {
		suffix = ".fifo"
	}
	name := uniqueName(t, maxQueueName-len(suffix)) + suffix
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()
	out, err := e.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("standin: create queue %s: %v", name, err)
	}
	url = aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		// t.Context() is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		_, err := e.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		var missing *sqstypes.QueueDoesNotExist
		if err != nil && !errors.As(err, &missing) {
			t.Errorf("standin: delete queue %s: %v", url, err)
		}
	})
	return url
}

// ReceiveAll long-polls the queue until it has received at least want
// messages, the timeout has passed or ctx is done, deletes every message it
// received, and returns them in the order received. The messages carry all
// their message attributes and all system attributes (ApproximateReceiveCount,
// SentTimestamp, ...). It returns early only by seeing want messages, so a
// caller that expects exactly n can pass want = n+1 and a short timeout to
// prove that no more arrive. A message received by a call that the timeout
// cut short may stay in flight until its visibility timeout ends. An API
// error fails the test with t.Fatalf.
func (e *Env) ReceiveAll(ctx context.Context, t testing.TB, url string, want int, timeout time.Duration) []sqstypes.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var out []sqstypes.Message
	for len(out) < want {
		wait := min(int32(time.Until(deadline)/time.Second), maxWaitSeconds)
		res, err := e.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(url),
			MaxNumberOfMessages:         int32(min(want-len(out), maxReceive)),
			WaitTimeSeconds:             max(wait, 0),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			t.Fatalf("standin: receive from %s: %v", url, err)
		}
		if len(res.Messages) == 0 {
			if wait <= 0 && sleep(ctx, pollInterval) != nil {
				break
			}
			continue
		}
		out = append(out, res.Messages...)
		e.deleteMessages(ctx, t, url, res.Messages)
	}
	if len(out) < want {
		t.Logf("standin: received %d of %d messages from %s before the %v timeout", len(out), want, url, timeout)
	}
	return out
}

// deleteMessages deletes received messages in one batch, even when ctx has
// just expired.
func (e *Env) deleteMessages(ctx context.Context, t testing.TB, url string, msgs []sqstypes.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout)
	defer cancel()
	entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	res, err := e.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err != nil {
		t.Fatalf("standin: delete %d messages from %s: %v", len(msgs), url, err)
	}
	if len(res.Failed) > 0 {
		f := res.Failed[0]
		t.Fatalf("standin: delete %d messages from %s: %d failed, first %s: %s: %s",
			len(msgs), url, len(res.Failed), aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message))
	}
}
