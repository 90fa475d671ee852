package publish

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func ptr[T any](v T) *T { return &v }

// Errors as the SDK returns them.
var (
	errThroughput  = &ktypes.ProvisionedThroughputExceededException{Message: ptr("Rate exceeded for shard shardId-000000000000")}
	errLimit       = &ktypes.LimitExceededException{Message: ptr("limit exceeded")}
	errKMSThrottle = &ktypes.KMSThrottlingException{Message: ptr("kms throttled")}
	errNotFound    = &ktypes.ResourceNotFoundException{Message: ptr("Stream orders not found")}
	errValidation  = &ktypes.ValidationException{Message: ptr("bad request")}
	errAccess      = &ktypes.AccessDeniedException{Message: ptr("denied")}
	errInternal    = &ktypes.InternalFailureException{Message: ptr("internal")}
	err500         = &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 503}}, Err: fmt.Errorf("service unavailable")}
	errSend        = &smithyhttp.RequestSendError{Err: fmt.Errorf("connection reset by peer")}
	errGeneric     = &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
)

// kentry is one entry of a recorded Kinesis request, copied.
type kentry struct {
	Data            []byte
	PartitionKey    string
	ExplicitHashKey string
}

// kcall is one recorded Kinesis request.
type kcall struct {
	Op         string // "PutRecord" or "PutRecords"
	StreamName string
	StreamARN  string
	Entries    []kentry
	At         time.Time
}

// written is one record the fake stream holds.
type written struct {
	Seq   string
	Entry kentry
}

// fakeKinesis is a KinesisAPI that records every request and answers by
// script. Each call n (from 0) asks script for a whole-call error or the
// per-entry error codes ("" = written; nil codes = all written). Written
// entries are kept in order, with their sequence numbers.
type fakeKinesis struct {
	mu      sync.Mutex
	script  func(n int, c *kcall) (codes []string, err error)
	calls   []kcall
	written []written
	seq     int
	// short, when set, answers the first PutRecords with one entry fewer
	// than asked (though it wrote them all).
	short bool
	// noSeq, when set, answers the entries of the first PutRecords without
	// error code nor sequence number (and does not write them).
	noSeq bool
}

func (f *fakeKinesis) record(op string, name, arn *string, entries []kentry) (int, *kcall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := kcall{Op: op, Entries: entries, At: time.Now()}
	if name != nil {
		c.StreamName = *name
	}
	if arn != nil {
		c.StreamARN = *arn
	}
	f.calls = append(f.calls, c)
	return len(f.calls) - 1, &f.calls[len(f.calls)-1]
}

func (f *fakeKinesis) answer(n int, c *kcall) ([]string, error) {
	if f.script == nil {
		return nil, nil
	}
	cc := *c
	return f.script(n, &cc)
}

func (f *fakeKinesis) write(e kentry) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	s := fmt.Sprintf("4959%020d", f.seq)
	f.written = append(f.written, written{Seq: s, Entry: e})
	return s
}

func copyEntry(data []byte, key, ehk *string) kentry {
	e := kentry{Data: bytes.Clone(data)}
	if key != nil {
		e.PartitionKey = *key
	}
	if ehk != nil {
		e.ExplicitHashKey = *ehk
	}
	return e
}

func (f *fakeKinesis) PutRecord(ctx context.Context, in *kinesis.PutRecordInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	e := copyEntry(in.Data, in.PartitionKey, in.ExplicitHashKey)
	n, c := f.record("PutRecord", in.StreamName, in.StreamARN, []kentry{e})
	codes, err := f.answer(n, c)
	if err != nil {
		return nil, err
	}
	if len(codes) > 0 && codes[0] != "" {
		return nil, &smithy.GenericAPIError{Code: codes[0], Message: "scripted"}
	}
	return &kinesis.PutRecordOutput{ShardId: ptr("shardId-000000000000"), SequenceNumber: ptr(f.write(e))}, nil
}

func (f *fakeKinesis) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	entries := make([]kentry, len(in.Records))
	for i, r := range in.Records {
		entries[i] = copyEntry(r.Data, r.PartitionKey, r.ExplicitHashKey)
	}
	n, c := f.record("PutRecords", in.StreamName, in.StreamARN, entries)
	codes, err := f.answer(n, c)
	if err != nil {
		return nil, err
	}
	out := &kinesis.PutRecordsOutput{Records: make([]ktypes.PutRecordsResultEntry, len(entries))}
	failed := int32(0)
	for i, e := range entries {
		if i < len(codes) && codes[i] != "" {
			out.Records[i] = ktypes.PutRecordsResultEntry{ErrorCode: ptr(codes[i]), ErrorMessage: ptr("scripted " + codes[i])}
			failed++
			continue
		}
		if f.noSeq && n == 0 {
			failed++
			continue
		}
		out.Records[i] = ktypes.PutRecordsResultEntry{ShardId: ptr("shardId-000000000000"), SequenceNumber: ptr(f.write(e))}
	}
	out.FailedRecordCount = &failed
	if f.short && n == 0 && len(out.Records) > 0 {
		out.Records = out.Records[:len(out.Records)-1]
	}
	return out, nil
}

func (f *fakeKinesis) Calls() []kcall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]kcall(nil), f.calls...)
}

func (f *fakeKinesis) Written() []written {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]written(nil), f.written...)
}

// throttleTimes returns a script that fails the first n calls with err and
// lets the others through.
func failTimes(n int, err error) func(int, *kcall) ([]string, error) {
	return func(i int, _ *kcall) ([]string, error) {
		if i < n {
			return nil, err
		}
		return nil, nil
	}
}

// sqentry is one entry of a recorded SQS request.
type sqentry struct {
	ID           string
	Body         string
	DelaySeconds int32
	Attributes   map[string]string
}

// sqcall is one recorded SQS request.
type sqcall struct {
	Op       string // "SendMessage" or "SendMessageBatch"
	QueueURL string
	Entries  []sqentry
	At       time.Time
}

// sqAnswer is the scripted answer for one entry of a batch.
type sqAnswer struct {
	Code        string // "" = sent
	SenderFault bool
	Omit        bool // leave the entry out of the response
	Both        bool // list it as successful and as failed
}

// fakeSQS is an SQSAPI that records every request and answers by script.
type fakeSQS struct {
	mu     sync.Mutex
	script func(n int, c *sqcall) ([]sqAnswer, error)
	calls  []sqcall
	sent   []sqentry
	ids    int
}

func copyAttrs(m map[string]sqstypes.MessageAttributeValue) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = *v.DataType + ":" + *v.StringValue
	}
	return out
}

func (f *fakeSQS) record(op, url string, entries []sqentry) (int, sqcall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := sqcall{Op: op, QueueURL: url, Entries: entries, At: time.Now()}
	f.calls = append(f.calls, c)
	return len(f.calls) - 1, c
}

func (f *fakeSQS) send(e sqentry) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids++
	f.sent = append(f.sent, e)
	return "msg-" + strconv.Itoa(f.ids)
}

func (f *fakeSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	e := sqentry{Body: *in.MessageBody, DelaySeconds: in.DelaySeconds, Attributes: copyAttrs(in.MessageAttributes)}
	n, c := f.record("SendMessage", *in.QueueUrl, []sqentry{e})
	if f.script != nil {
		if _, err := f.script(n, &c); err != nil {
			return nil, err
		}
	}
	return &sqs.SendMessageOutput{MessageId: ptr(f.send(e))}, nil
}

func (f *fakeSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	entries := make([]sqentry, len(in.Entries))
	for i, e := range in.Entries {
		entries[i] = sqentry{ID: *e.Id, Body: *e.MessageBody, DelaySeconds: e.DelaySeconds, Attributes: copyAttrs(e.MessageAttributes)}
	}
	n, c := f.record("SendMessageBatch", *in.QueueUrl, entries)
	var answers []sqAnswer
	if f.script != nil {
		var err error
		if answers, err = f.script(n, &c); err != nil {
			return nil, err
		}
	}
	out := &sqs.SendMessageBatchOutput{}
	for i, e := range entries {
		var a sqAnswer
		if i < len(answers) {
			a = answers[i]
		}
		switch {
		case a.Omit:
		case a.Code != "":
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: ptr(e.ID), Code: ptr(a.Code), Message: ptr("scripted"), SenderFault: a.SenderFault})
		case a.Both:
			// Listed twice, contradicting itself: sent, and failed.
			out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: ptr(e.ID), MessageId: ptr(f.send(e))})
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: ptr(e.ID), Code: ptr("InternalError"), Message: ptr("scripted")})
		default:
			out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: ptr(e.ID), MessageId: ptr(f.send(e))})
		}
	}
	return out, nil
}

func (f *fakeSQS) Calls() []sqcall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sqcall(nil), f.calls...)
}

// nopKinesis accepts everything and counts calls, for benchmarks.
type nopKinesis struct {
	calls int
	out   kinesis.PutRecordsOutput
	one   kinesis.PutRecordOutput
}

func (f *nopKinesis) PutRecord(ctx context.Context, in *kinesis.PutRecordInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	f.calls++
	if f.one.SequenceNumber == nil {
		f.one = kinesis.PutRecordOutput{ShardId: ptr("shardId-000000000000"), SequenceNumber: ptr("1")}
	}
	return &f.one, nil
}

func (f *nopKinesis) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	f.calls++
	if len(f.out.Records) < len(in.Records) {
		f.out.Records = make([]ktypes.PutRecordsResultEntry, len(in.Records))
		for i := range f.out.Records {
			f.out.Records[i] = ktypes.PutRecordsResultEntry{ShardId: ptr("shardId-000000000000"), SequenceNumber: ptr(strconv.Itoa(i + 1))}
		}
	}
	out := f.out
	out.Records = out.Records[:len(in.Records)]
	return &out, nil
}
