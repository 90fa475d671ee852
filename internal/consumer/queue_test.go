package consumer

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// fakeQueue is one SQS queue with delays and visibility timeouts: a fake of
// DelayQueueAPI and of publish.SQSAPI's SendMessage, on the fake clock of
// synctest.
type fakeQueue struct {
	mu       sync.Mutex
	msgs     []*fakeMsg
	n        int
	received int
}

type fakeMsg struct {
	id, body, receipt string
	visibleAt         time.Time
	delay             int32
}

func (q *fakeQueue) add(body string, delay int32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.n++
	q.msgs = append(q.msgs, &fakeMsg{id: "m" + strconv.Itoa(q.n), body: body, delay: delay, visibleAt: time.Now().Add(time.Duration(delay) * time.Second)})
}

// snapshot returns the bodies and delays of the messages in the queue.
func (q *fakeQueue) snapshot() []fakeMsg {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]fakeMsg, len(q.msgs))
	for i, m := range q.msgs {
		out[i] = *m
	}
	return out
}

func (q *fakeQueue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.add(aws.ToString(in.MessageBody), in.DelaySeconds)
	return &sqs.SendMessageOutput{MessageId: aws.String("sent")}, nil
}

func (q *fakeQueue) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		q.add(aws.ToString(e.MessageBody), e.DelaySeconds)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("sent")})
	}
	return out, nil
}

func (q *fakeQueue) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	deadline := time.Now().Add(time.Duration(in.WaitTimeSeconds) * time.Second)
	for {
		q.mu.Lock()
		now := time.Now()
		out := &sqs.ReceiveMessageOutput{}
		for _, m := range q.msgs {
			if len(out.Messages) == int(in.MaxNumberOfMessages) || m.visibleAt.After(now) {
				continue
			}
			q.received++
			m.receipt = m.id + "-" + strconv.Itoa(q.received)
			m.visibleAt = now.Add(time.Duration(in.VisibilityTimeout) * time.Second)
			out.Messages = append(out.Messages, sqstypes.Message{MessageId: aws.String(m.id), Body: aws.String(m.body), ReceiptHandle: aws.String(m.receipt)})
		}
		q.mu.Unlock()
		if len(out.Messages) > 0 || !now.Before(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (q *fakeQueue) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		i := slices.IndexFunc(q.msgs, func(m *fakeMsg) bool { return m.receipt == aws.ToString(e.ReceiptHandle) })
		if i < 0 {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid")})
			continue
		}
		q.msgs = slices.Delete(q.msgs, i, i+1)
		out.Successful = append(out.Successful, sqstypes.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}
