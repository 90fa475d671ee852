package awsfake

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// queued is one message waiting in a fake queue.
type queued struct {
	id        string
	body      string
	attrs     map[string]sqstypes.MessageAttributeValue
	visibleAt time.Time // sent time + DelaySeconds, then receive time + visibility
	receipt   string    // of the last receive; "" before the first
	received  int
}

// defaultVisibility is a queue's visibility timeout when a receive names
// none (SQS's default).
const defaultVisibility = 30 * time.Second

// enqueue keeps an accepted message for ReceiveMessage; s.mu is held.
func (s *SQS) enqueue(url, id, body string, delay int32, attrs map[string]sqstypes.MessageAttributeValue) {
	if s.queues == nil {
		s.queues = map[string][]*queued{}
	}
	s.queues[url] = append(s.queues[url], &queued{
		id: id, body: body, attrs: attrs,
		visibleAt: time.Now().Add(time.Duration(delay) * time.Second),
	})
	if s.arrived != nil {
		close(s.arrived)
		s.arrived = nil
	}
}

// ReceiveMessage fakes SQS ReceiveMessage on the messages the fake
// accepted for QueueUrl: up to MaxNumberOfMessages (1 to 10, default 1)
// whose delay and visibility timeout have passed, oldest first, each hidden
// again for VisibilityTimeout seconds (default 30) under a new receipt
// handle. With WaitTimeSeconds it long-polls: it waits until a message is
// visible or the wait is over (it keeps the time with time.Now, so it runs
// under testing/synctest). A done context fails the call. It is safe for
// concurrent use.
func (s *SQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	url := aws.ToString(in.QueueUrl)
	n := int(in.MaxNumberOfMessages)
	if n <= 0 {
		n = 1
	}
	if n > 10 {
		return nil, fakeError("InvalidParameterValue")
	}
	visibility := defaultVisibility
	if in.VisibilityTimeout > 0 {
		visibility = time.Duration(in.VisibilityTimeout) * time.Second
	}
	deadline := time.Now().Add(time.Duration(in.WaitTimeSeconds) * time.Second)
	s.mu.Lock()
	s.calls["ReceiveMessage"]++
	s.mu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.mu.Lock()
		now := time.Now()
		out := &sqs.ReceiveMessageOutput{}
		next := deadline // the earliest moment a message becomes visible
		for _, q := range s.queues[url] {
			if len(out.Messages) == n {
				break
			}
			if q.visibleAt.After(now) {
				next = minTime(next, q.visibleAt)
				continue
			}
			s.receipts++
			q.receipt = q.id + "#" + strconv.Itoa(s.receipts)
			q.received++
			q.visibleAt = now.Add(visibility)
			out.Messages = append(out.Messages, sqstypes.Message{
				MessageId: aws.String(q.id), ReceiptHandle: aws.String(q.receipt),
				Body: aws.String(q.body), MessageAttributes: q.attrs,
				Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(q.received)},
			})
		}
		if len(out.Messages) > 0 || !now.Before(deadline) {
			s.mu.Unlock()
			return out, nil
		}
		if s.arrived == nil {
			s.arrived = make(chan struct{})
		}
		arrived := s.arrived
		s.mu.Unlock()
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-arrived:
		case <-t.C:
		}
		t.Stop()
	}
}

// DeleteMessageBatch fakes SQS DeleteMessageBatch: an entry whose receipt
// handle is the last one its message was received with deletes it; any
// other fails with ReceiptHandleIsInvalid. It is safe for concurrent use.
func (s *SQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["DeleteMessageBatch"]++
	url := aws.ToString(in.QueueUrl)
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		if s.delete(url, aws.ToString(e.ReceiptHandle)) {
			out.Successful = append(out.Successful, sqstypes.DeleteMessageBatchResultEntry{Id: e.Id})
			continue
		}
		out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true, Message: aws.String("fake: unknown receipt handle")})
	}
	return out, nil
}

// DeleteMessage fakes SQS DeleteMessage as DeleteMessageBatch does one
// entry.
func (s *SQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["DeleteMessage"]++
	if !s.delete(aws.ToString(in.QueueUrl), aws.ToString(in.ReceiptHandle)) {
		return nil, fakeError("ReceiptHandleIsInvalid")
	}
	return &sqs.DeleteMessageOutput{}, nil
}

// delete removes the message last received with receipt; s.mu is held.
func (s *SQS) delete(url, receipt string) bool {
	qs := s.queues[url]
	for i, q := range qs {
		if receipt != "" && q.receipt == receipt {
			s.queues[url] = append(qs[:i:i], qs[i+1:]...)
			return true
		}
	}
	return false
}

// Waiting returns how many messages queueURL holds (not yet deleted,
// visible or not).
func (s *SQS) Waiting(queueURL string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queues[queueURL])
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
