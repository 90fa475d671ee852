package consumer

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
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
