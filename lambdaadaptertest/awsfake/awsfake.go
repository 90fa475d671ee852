// Package awsfake holds in-memory fakes of the Kinesis and SQS calls the
// adapter makes: the writes (PutRecord, PutRecords, SendMessage,
// SendMessageBatch), Kinesis reads (below), and SQS's ReceiveMessage,
// DeleteMessage and DeleteMessageBatch on what was sent (a queue with delays and visibility
// timeouts). They record what they accept and can be told to fail or to
// take time. Package
// lambdaadaptertest offers them under the same names; this package exists so
// that packages lambdaadaptertest depends on can use them in their tests too.
//
// The Kinesis fake is also a small in-memory Kinesis that can be read. A
// stream made with CreateStream has shards that split the hash key space as
// Kinesis does; writes addressed to it are placed in the shard that holds
// the MD5 of their partition key (or their ExplicitHashKey), with growing
// 56-digit sequence numbers, and ListShards, GetShardIterator, GetRecords and
// DescribeStreamSummary serve it with the SDK's shapes and typed errors, so
// copies a handler writes back to its own stream come round again. Split,
// Merge and Trim reshard and age it; ReadFail injects throttling and
// outages; Records and Put inspect and seed it. Writes to a stream that was
// never created are only recorded (Written), as before. The fake has no
// throughput or size limits, no enhanced fan-out (SubscribeToShard), no
// encryption, no per-record retention and no stream management calls; it
// keeps the time with time.Now, so it runs under testing/synctest.
//
//	k := awsfake.NewKinesis()
//	arn := k.CreateStream("orders", 2)
//	k.Put("orders", "customer-1", []byte("hello")) // seed the stream
//	// ... run the code under test with k as its Kinesis client ...
//	recs := k.Records(arn) // every record placed, shard by shard
package awsfake

import (
	"context"
	"fmt"
	"math/big"
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

// Written is one record a fake Kinesis accepted.
type Written struct {
	// Stream is the StreamARN or StreamName the record was written to.
	Stream       string
	PartitionKey string
	// Data is the record's data as written (with its RSK1 envelope, if any).
	Data []byte
	// Headers and Payload are Data opened.
	Headers envelope.Headers
	Payload []byte
}

// Kinesis is an in-memory fake of the Kinesis calls the adapter makes: the
// writes (PutRecord, PutRecords), which it records and can be told to fail,
// and, for streams made with CreateStream, the reads (ListShards,
// GetShardIterator, GetRecords, DescribeStreamSummary). See the package
// documentation for what it does not fake. Make one with NewKinesis. It is
// safe for concurrent use.
type Kinesis struct {
	mu      sync.Mutex
	written []Written
	calls   map[string]int
	seq     int
	streams map[string]*stream // by name; see CreateStream
	// Fail, when set, is asked for every record before it is accepted; a
	// non-empty error code fails that record (PutRecords reports it per
	// entry; PutRecord returns an error).
	Fail func(stream, partitionKey string, data []byte) (errorCode string)
	// Delay, when set, is the round trip of every call: it waits that long
	// (or until its context ends, failing the call like an SDK client)
	// before it accepts anything. Set it before the first call.
	Delay time.Duration
	// ReadFail, when set, is asked by every GetShardIterator and GetRecords
	// call, with api "GetShardIterator" or "GetRecords" and the shard read,
	// before the call answers; a non-nil error is returned instead of the
	// answer (for example &types.ProvisionedThroughputExceededException{}
	// to throttle, or any error for an outage) and changes nothing, so an
	// iterator stays usable. The call is still counted by Calls. ReadFail is
	// called without the fake's lock held, possibly from several goroutines
	// at once, so it may call the fake's methods and must guard its own
	// state. Set it before the first call.
	ReadFail func(api, shardID string) error
	// ListPageSize, when positive, caps the number of shards one ListShards
	// answer holds (below MaxResults and the default of 1000), so tests can
	// force pagination with a few shards. Set it before the first call.
	ListPageSize int
}

// wait is the call's round trip (Delay).
func (k *Kinesis) wait(ctx context.Context) error {
	if k.Delay <= 0 {
		return nil
	}
	t := time.NewTimer(k.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// NewKinesis returns an empty fake.
func NewKinesis() *Kinesis { return &Kinesis{calls: map[string]int{}} }

// Written returns the records accepted so far, in order.
func (k *Kinesis) Written() []Written {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Written(nil), k.written...)
}

// Calls returns how many times the named API (PutRecord, PutRecords,
// ListShards, GetShardIterator, GetRecords, DescribeStreamSummary) was called.
// A call counts once its Delay has passed, whether it then succeeds or fails;
// a call whose context ended first does not count. Put does not count.
func (k *Kinesis) Calls(api string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[api]
}

func (k *Kinesis) accept(stream, key string, data []byte) (seq string, code string) {
	if k.Fail != nil {
		if c := k.Fail(stream, key, data); c != "" {
			return "", c
		}
	}
	h, p := envelope.Decode(data)
	d := append([]byte(nil), data...)
	k.seq++
	k.written = append(k.written, Written{Stream: stream, PartitionKey: key, Data: d, Headers: h.Clone(), Payload: append([]byte(nil), p...)})
	return fmt.Sprintf("4960000000000000000000000000000000000000000000%010d", k.seq), ""
}

func streamOf(arn, name *string) string {
	if s := aws.ToString(arn); s != "" {
		return s
	}
	return aws.ToString(name)
}

// PutRecord implements the adapter's Kinesis client interface. It waits
// Delay, asks Fail, and records the accepted record in Written. Addressed (by
// StreamName or StreamARN) to a stream made with CreateStream, it also checks
// the partition key (1 to 256 characters) and ExplicitHashKey
// (InvalidArgumentException) and places the record in the open shard whose
// hash key range holds its ExplicitHashKey or the MD5 of its partition key,
// returning that shard and the record's sequence number. Addressed to any
// other stream, it answers shardId-000000000000 and a sequence number of its
// own, and places nothing.
func (k *Kinesis) PutRecord(ctx context.Context, in *kinesis.PutRecordInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	if err := k.wait(ctx); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls["PutRecord"]++
	st, err := k.target(in.StreamARN, in.StreamName)
	if err != nil {
		return nil, err
	}
	var hash *big.Int
	if st != nil {
		if hash, err = hashKeyOf(aws.ToString(in.PartitionKey), in.ExplicitHashKey); err != nil {
			return nil, err
		}
	}
	seq, code := k.accept(streamOf(in.StreamARN, in.StreamName), aws.ToString(in.PartitionKey), in.Data)
	if code != "" {
		return nil, fakeError(code)
	}
	shard := "shardId-000000000000"
	if st != nil {
		shard, seq = st.place(hash, aws.ToString(in.PartitionKey), in.Data)
	}
	return &kinesis.PutRecordOutput{SequenceNumber: aws.String(seq), ShardId: aws.String(shard)}, nil
}

// PutRecords implements the adapter's Kinesis client interface. It treats
// every entry as PutRecord does, reporting a failure (Fail) per entry; a
// failed entry is neither recorded nor placed. For a stream made with
// CreateStream, an invalid partition key or ExplicitHashKey in any entry
// fails the whole call with InvalidArgumentException before anything is
// accepted. The number of entries is not limited.
func (k *Kinesis) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	if err := k.wait(ctx); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls["PutRecords"]++
	st, err := k.target(in.StreamARN, in.StreamName)
	if err != nil {
		return nil, err
	}
	var hashes []*big.Int
	if st != nil {
		hashes = make([]*big.Int, len(in.Records))
		for i, e := range in.Records {
			if hashes[i], err = hashKeyOf(aws.ToString(e.PartitionKey), e.ExplicitHashKey); err != nil {
				return nil, err
			}
		}
	}
	out := &kinesis.PutRecordsOutput{Records: make([]kinesistypes.PutRecordsResultEntry, len(in.Records))}
	failed := int32(0)
	for i, e := range in.Records {
		seq, code := k.accept(streamOf(in.StreamARN, in.StreamName), aws.ToString(e.PartitionKey), e.Data)
		if code != "" {
			failed++
			out.Records[i] = kinesistypes.PutRecordsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String("fake failure")}
			continue
		}
		shard := "shardId-000000000000"
		if st != nil {
			shard, seq = st.place(hashes[i], aws.ToString(e.PartitionKey), e.Data)
		}
		out.Records[i] = kinesistypes.PutRecordsResultEntry{SequenceNumber: aws.String(seq), ShardId: aws.String(shard)}
	}
	out.FailedRecordCount = aws.Int32(failed)
	return out, nil
}

// fakeError is an API error with a code, as the SDK returns them.
type fakeError string

func (e fakeError) Error() string                 { return "fake: " + string(e) }
func (e fakeError) ErrorCode() string             { return string(e) }
func (e fakeError) ErrorMessage() string          { return "fake failure" }
func (e fakeError) ErrorFault() smithy.ErrorFault { return smithy.FaultUnknown }

// Sent is one message a fake SQS accepted.
type Sent struct {
	QueueURL     string
	Body         string
	DelaySeconds int32
	Attributes   map[string]string
}

// SQS is an in-memory fake of the SQS calls the adapter makes
// (SendMessage, SendMessageBatch), and of the receiving side of a queue
// (ReceiveMessage with delays, visibility timeouts and long polls;
// DeleteMessage, DeleteMessageBatch), so a delay queue can be forwarded. It
// is safe for concurrent use.
type SQS struct {
	mu       sync.Mutex
	sent     []Sent
	calls    map[string]int
	n        int
	queues   map[string][]*queued
	receipts int
	arrived  chan struct{} // closed when a message is enqueued
	// Fail, when set, is asked for every message before it is accepted; a
	// non-empty error code fails it.
	Fail func(queueURL, body string) (errorCode string)
}

// NewSQS returns an empty fake.
func NewSQS() *SQS { return &SQS{calls: map[string]int{}} }

// Sent returns the messages accepted so far, in order.
func (s *SQS) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// Calls returns how many times the named API was called.
func (s *SQS) Calls(api string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[api]
}

func (s *SQS) accept(url, body string, delay int32, attrs map[string]sqstypes.MessageAttributeValue) (string, string) {
	if s.Fail != nil {
		if c := s.Fail(url, body); c != "" {
			return "", c
		}
	}
	a := map[string]string{}
	for k, v := range attrs {
		a[k] = aws.ToString(v.StringValue)
	}
	s.n++
	s.sent = append(s.sent, Sent{QueueURL: url, Body: body, DelaySeconds: delay, Attributes: a})
	id := "msg-" + strconv.Itoa(s.n)
	s.enqueue(url, id, body, delay, attrs)
	return id, ""
}

// SendMessage implements the adapter's SQS client interface.
func (s *SQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["SendMessage"]++
	id, code := s.accept(aws.ToString(in.QueueUrl), aws.ToString(in.MessageBody), in.DelaySeconds, in.MessageAttributes)
	if code != "" {
		return nil, fakeError(code)
	}
	return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
}

// SendMessageBatch implements the adapter's SQS client interface.
func (s *SQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["SendMessageBatch"]++
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		id, code := s.accept(aws.ToString(in.QueueUrl), aws.ToString(e.MessageBody), e.DelaySeconds, e.MessageAttributes)
		if code != "" {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String(code), SenderFault: false, Message: aws.String("fake failure")})
			continue
		}
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(id)})
	}
	return out, nil
}
