package consumer

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/shardsettle/lambdaadapter/envelope"
)

// written is one record a sink accepted.
type written struct {
	Stream  string
	Key     string
	Headers envelope.Headers
	Payload []byte
}

// sink is a fake of the Kinesis writes of package publish (PutRecord,
// PutRecords) with an optional round-trip time and per-record failures.
type sink struct {
	mu      sync.Mutex
	written []written
	calls   map[string]int
	delay   time.Duration // round trip (fake time under synctest)
	// fail, when set, fails the records it returns an error code for.
	fail func(payload []byte) string
}

func newSink() *sink { return &sink{calls: map[string]int{}} }

func (k *sink) Written() []written {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]written(nil), k.written...)
}

func (k *sink) Calls(api string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[api]
}

func (k *sink) accept(stream, key string, data []byte) string {
	h, p := envelope.Decode(data)
	if k.fail != nil {
		if code := k.fail(p); code != "" {
			return code
		}
	}
	k.written = append(k.written, written{Stream: stream, Key: key, Headers: h.Clone(), Payload: append([]byte(nil), p...)})
	return ""
}

func streamName(arn, name *string) string {
	if s := aws.ToString(arn); s != "" {
		return s
	}
	return aws.ToString(name)
}

// wait is the round trip; like an SDK call it ends early with ctx.
func (k *sink) wait(ctx context.Context) error {
	if k.delay == 0 {
		return nil
	}
	t := time.NewTimer(k.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (k *sink) PutRecord(ctx context.Context, in *kinesis.PutRecordInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	if err := k.wait(ctx); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls["PutRecord"]++
	if code := k.accept(streamName(in.StreamARN, in.StreamName), aws.ToString(in.PartitionKey), in.Data); code != "" {
		return nil, &smithy.GenericAPIError{Code: code, Message: "fake failure"}
	}
	return &kinesis.PutRecordOutput{SequenceNumber: aws.String(strconv.Itoa(len(k.written))), ShardId: aws.String("shardId-000000000000")}, nil
}

func (k *sink) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	if err := k.wait(ctx); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls["PutRecords"]++
	out := &kinesis.PutRecordsOutput{Records: make([]kinesistypes.PutRecordsResultEntry, len(in.Records))}
	failed := int32(0)
	for i, e := range in.Records {
		if code := k.accept(streamName(in.StreamARN, in.StreamName), aws.ToString(e.PartitionKey), e.Data); code != "" {
			failed++
			out.Records[i] = kinesistypes.PutRecordsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String("fake failure")}
			continue
		}
		out.Records[i] = kinesistypes.PutRecordsResultEntry{SequenceNumber: aws.String(strconv.Itoa(len(k.written))), ShardId: aws.String("shardId-000000000000")}
	}
	out.FailedRecordCount = aws.Int32(failed)
	return out, nil
}

// queueSink is a fake of the SQS sends of package publish.
type queueSink struct {
	mu     sync.Mutex
	bodies []string
}

func (q *queueSink) Bodies() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.bodies...)
}

func (q *queueSink) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.bodies = append(q.bodies, aws.ToString(in.MessageBody))
	return &sqs.SendMessageOutput{MessageId: aws.String("m" + strconv.Itoa(len(q.bodies)))}, nil
}

func (q *queueSink) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	panic("not used by the consumer")
}

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

func (q *fakeQueue) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	panic("not used by the consumer")
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
