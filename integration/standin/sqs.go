package standin

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
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

// receiveVisibility is the visibility timeout of ReceiveAll's receives:
// half the quiet window, at least 5 s (so a message is deleted long before
// it could come again) and at most 30 s. A receive whose answer is lost on
// the way (the SDK then retries the call, on a loaded machine) leaves its
// messages in flight for that long; with the queue's default of 30 s they
// stayed hidden past a 20 s window and a dead-letter read came up 10
// messages short.
func receiveVisibility(quiet time.Duration) int32 {
	return int32(min(max(quiet/2, 5*time.Second), 30*time.Second) / time.Second)
}

// ReceiveAll receives messages from the queue, deletes every message it
// received, and returns them in the order received. The messages carry all
// their message attributes and all system attributes (ApproximateReceiveCount,
// SentTimestamp, ...).
//
// It returns as soon as it has received want messages. Otherwise it receives
// until the queue has been quiet for the window quiet, which does not depend
// on how fast the machine is: the window starts only once a receive found the
// queue empty, it starts again whenever a message arrives, and it ends with a
// receive that began after it and still found nothing; inside the window
// ReceiveAll long-polls. Receiving the messages already visible never counts
// against it. So a caller that expects exactly n messages passes want = n+1
// and a short quiet (say 750ms) to prove that no more are there, and a caller
// waiting for a message that is not visible yet (delayed, or in flight until
// its visibility timeout ends) passes want = n and a quiet longer than that.
// It also returns when ctx is done, with what it has received so far. Each
// of these returns with fewer than want messages logs why.
//
// Receiving is capped at quiet + readCap (2 minutes): when messages keep
// arriving for that long without reaching want, ReceiveAll fails the test
// with t.Fatalf. A message received by a call that ctx or the cap cut short
// may stay in flight until its visibility timeout ends. An API error fails
// the test with t.Fatalf.
func (e *Env) ReceiveAll(ctx context.Context, t testing.TB, url string, want int, quiet time.Duration) []sqstypes.Message {
	t.Helper()
	begin := time.Now()
	ctx, cancel := withReadCap(ctx, quiet)
	defer cancel()
	q := quietWindow{window: quiet}
	var hiddenUntil time.Time // messages of a lost receive answer are invisible until then
	var out []sqstypes.Message
	// stop ends the receiving after err: hitting the cap fails the test,
	// the end of the caller's ctx returns what was received, any other
	// error fails the test.
	stop := func(err error) []sqstypes.Message {
		t.Helper()
		switch {
		case capped(ctx):
			t.Fatalf("standin: ReceiveAll from %s gave up after %v with %d of %d messages: the queue never stayed empty for %v (messages kept arriving)",
				url, time.Since(begin).Round(time.Millisecond), len(out), want, quiet)
		case ctx.Err() != nil:
			t.Logf("standin: received %d of %d messages from %s before the caller's context ended: %v", len(out), want, url, context.Cause(ctx))
		default:
			t.Fatalf("standin: receive from %s: %v", url, err)
		}
		return out
	}
	for len(out) < want {
		// Short polls take what is visible; long polls wait inside the
		// window, never past its end.
		var wait int32
		if q.started() {
			wait = int32(min(q.left()/time.Second, maxWaitSeconds))
		}
		start := time.Now()
		res, err := e.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(url),
			MaxNumberOfMessages:         int32(min(want-len(out), maxReceive)),
			WaitTimeSeconds:             wait,
			VisibilityTimeout:           receiveVisibility(quiet),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			return stop(err)
		}
		if ar, ok := retry.GetAttemptResults(res.ResultMetadata); ok && len(ar.Results) > 1 {
			// The messages of the lost answer are hidden for the
			// visibility timeout: the queue cannot count as quiet
			// before they are visible again.
			hiddenUntil = start.Add(time.Duration(receiveVisibility(quiet))*time.Second + time.Second)
			t.Logf("standin: a receive from %s took %d attempts: messages of a lost answer come again after %ds; receiving until then",
				url, len(ar.Results), receiveVisibility(quiet))
		}
		if len(res.Messages) > 0 {
			out = append(out, res.Messages...)
			e.deleteMessages(ctx, t, url, res.Messages)
		}
		switch {
		case len(out) >= want:
			return out
		case q.polled(start, len(res.Messages) == 0) && !time.Now().Before(hiddenUntil):
			t.Logf("standin: received %d of %d messages from %s; no more arrived in the %v after the queue was found empty",
				len(out), want, url, quiet)
			return out
		case len(res.Messages) == 0 && wait == 0:
			if err := sleep(ctx, max(q.pause(), min(time.Until(hiddenUntil), pollInterval))); err != nil {
				return stop(err)
			}
		}
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
