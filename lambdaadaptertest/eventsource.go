package lambdaadaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// StreamReader is the part of the Kinesis API an EventSource reads with
// (the SDK client, or the in-memory fake Kinesis).
type StreamReader interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// QueueReceiver is the part of the SQS API an EventSource receives with.
type QueueReceiver interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Function is a Lambda function as the event source sees it: a raw JSON
// invocation in, a raw JSON response out (lambdaadapter.Function.Invoke).
type Function func(ctx context.Context, payload []byte) ([]byte, error)

// EventSource is a local stand-in for Lambda's event source mappings: it
// reads a Kinesis stream the way a Kinesis event source mapping with
// ReportBatchItemFailures does and, optionally, an SQS queue the way an SQS
// event source mapping does, and invokes a Function with the events.
//
// Per shard, parents before children, one invocation at a time with up to
// BatchSize records: an empty batchItemFailures list checkpoints after the
// batch; an itemIdentifier checkpoints just before that record, and the next
// batch starts at it; a function error or a response that cannot be read
// retries the whole batch (as MaximumRetryAttempts -1 does). Shards are
// invoked concurrently, like Lambda with one concurrent batch per shard
// (ParallelizationFactor 1). For the queue, up to 10 messages per
// invocation; a message named in batchItemFailures stays in the queue
// (visible again after its visibility timeout), the others are deleted.
//
// What it does not emulate: batching windows, payload size limits,
// bisection, MaximumRecordAgeInSeconds, on-failure destinations,
// parallelization factors above 1, and the retry backoff of the service.
// An EventSource is not safe for concurrent calls of Round.
type EventSource struct {
	// StreamARN is the stream's ARN (an event's eventSourceARN; the adapter
	// writes counted copies there). A plain stream name is turned into an
	// ARN in us-east-1, account 123456789012.
	StreamARN string
	// Kinesis reads the stream.
	Kinesis StreamReader
	// BatchSize is the most records per invocation (default 100).
	BatchSize int
	// StartingPosition is "TRIM_HORIZON" (default) or "LATEST".
	StartingPosition string
	// BatchWindow is MaximumBatchingWindowInSeconds: a shard's batch is
	// gathered until it holds BatchSize records or the window has passed
	// since the first read of the round (0: one read per batch).
	BatchWindow time.Duration
	// Timeout is each invocation's deadline (default 60 s).
	Timeout time.Duration
	// MaxConcurrency bounds the invocations in flight at once (0: one per
	// shard, all shards at once; 1 for a function that takes one invocation
	// at a time, such as one Runtime Interface Emulator).
	MaxConcurrency int

	// QueueURL and SQS, when set, are an SQS event source (the delay queue
	// wired back to the same function).
	QueueURL string
	SQS      QueueReceiver
	// VisibilityTimeout is the queue's visibility timeout (default 30 s).
	VisibilityTimeout time.Duration

	once   sync.Once
	shards map[string]*sourceShard
}

type sourceShard struct {
	id       string
	parents  []string
	iterator *string // next batch; nil: get one from the checkpoint
	cp       string  // sequence number of the last record checkpointed
	ended    bool    // read to its end and checkpointed
	pending  bool    // records were returned but not all checkpointed
}

// Stats is what one Round did.
type Stats struct {
	// Invocations counts the invocations made (Kinesis and SQS).
	Invocations int
	// Records counts the records and messages passed to them.
	Records int
	// Checkpointed counts the records checkpointed (settled for good).
	Checkpointed int
}

// Round lists the stream's shards, invokes fn once for every shard that has
// records past its checkpoint (concurrently) and once for the queue when it
// has visible messages, and applies the responses. It returns what it did;
// a Round with zero Invocations found nothing to do. It returns an error
// only when the stream or queue cannot be read.
func (s *EventSource) Round(ctx context.Context, fn Function) (Stats, error) {
	s.once.Do(func() {
		s.shards = map[string]*sourceShard{}
		if !strings.HasPrefix(s.StreamARN, "arn:") {
			s.StreamARN = "arn:aws:kinesis:us-east-1:123456789012:stream/" + s.StreamARN
		}
	})
	if err := s.list(ctx); err != nil {
		return Stats{}, err
	}
	var (
		mu    sync.Mutex
		total Stats
		errs  []error
		wg    sync.WaitGroup
	)
	var sem chan struct{}
	if s.MaxConcurrency > 0 {
		sem = make(chan struct{}, s.MaxConcurrency)
	}
	for _, sh := range s.ready() {
		wg.Go(func() {
			if sem != nil {
				sem <- struct{}{}
				defer func() { <-sem }()
			}
			st, err := s.poll(ctx, sh, fn)
			mu.Lock()
			defer mu.Unlock()
			total.Invocations += st.Invocations
			total.Records += st.Records
			total.Checkpointed += st.Checkpointed
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if s.SQS != nil && s.QueueURL != "" {
		st, err := s.pollQueue(ctx, fn)
		total.Invocations += st.Invocations
		total.Records += st.Records
		total.Checkpointed += st.Checkpointed
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// Pending reports whether a shard has records that were delivered but not
// all checkpointed yet.
func (s *EventSource) Pending() bool {
	for _, sh := range s.shards {
		if sh.pending {
			return true
		}
	}
	return false
}

// Checkpoint returns the sequence number checkpointed last on shardID (""
// before the first).
func (s *EventSource) Checkpoint(shardID string) string {
	if sh := s.shards[shardID]; sh != nil {
		return sh.cp
	}
	return ""
}

func (s *EventSource) list(ctx context.Context) error {
	in := &kinesis.ListShardsInput{StreamARN: aws.String(s.StreamARN)}
	for {
		out, err := s.Kinesis.ListShards(ctx, in)
		if err != nil {
			return fmt.Errorf("lambdaadaptertest: list the shards of %s: %w", s.StreamARN, err)
		}
		for _, sh := range out.Shards {
			id := aws.ToString(sh.ShardId)
			if s.shards[id] == nil {
				var parents []string
				for _, p := range []*string{sh.ParentShardId, sh.AdjacentParentShardId} {
					if p != nil {
						parents = append(parents, *p)
					}
				}
				s.shards[id] = &sourceShard{id: id, parents: parents}
			}
		}
		if out.NextToken == nil {
			return nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// ready returns the shards to poll: not ended, every parent ended or
// unknown (trimmed, or from before this source).
func (s *EventSource) ready() []*sourceShard {
	var out []*sourceShard
	for _, sh := range s.shards {
		if sh.ended {
			continue
		}
		ok := true
		for _, p := range sh.parents {
			if ps := s.shards[p]; ps != nil && !ps.ended {
				ok = false
			}
		}
		if ok {
			out = append(out, sh)
		}
	}
	slices.SortFunc(out, func(a, b *sourceShard) int { return strings.Compare(a.id, b.id) })
	return out
}

// iterator returns where the next batch of sh starts.
func (s *EventSource) iterator(ctx context.Context, sh *sourceShard) (*string, error) {
	if sh.iterator != nil {
		return sh.iterator, nil
	}
	in := &kinesis.GetShardIteratorInput{StreamARN: aws.String(s.StreamARN), ShardId: aws.String(sh.id)}
	switch {
	case sh.cp != "":
		in.ShardIteratorType = kinesistypes.ShardIteratorTypeAfterSequenceNumber
		in.StartingSequenceNumber = aws.String(sh.cp)
	case s.StartingPosition == "LATEST" && len(sh.parents) == 0:
		in.ShardIteratorType = kinesistypes.ShardIteratorTypeLatest
	default:
		in.ShardIteratorType = kinesistypes.ShardIteratorTypeTrimHorizon
	}
	out, err := s.Kinesis.GetShardIterator(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.ShardIterator, nil
}

func (s *EventSource) poll(ctx context.Context, sh *sourceShard, fn Function) (Stats, error) {
	var st Stats
	it, err := s.iterator(ctx, sh)
	if err != nil {
		var gone *kinesistypes.ResourceNotFoundException
		if errors.As(err, &gone) {
			sh.ended = true // trimmed away
			return st, nil
		}
		return st, fmt.Errorf("lambdaadaptertest: iterator for %s: %w", sh.id, err)
	}
	batch := s.BatchSize
	if batch <= 0 {
		batch = 100
	}
	out, err := s.read(ctx, it, batch)
	if err != nil {
		var expired *kinesistypes.ExpiredIteratorException
		if errors.As(err, &expired) {
			sh.iterator = nil
			return st, nil
		}
		return st, fmt.Errorf("lambdaadaptertest: read %s: %w", sh.id, err)
	}
	if len(out.Records) == 0 {
		sh.iterator = out.NextShardIterator
		sh.pending = false
		if out.NextShardIterator == nil {
			sh.ended = true
		}
		return st, nil
	}
	sh.pending = true
	payload, err := json.Marshal(s.event(sh.id, out.Records))
	if err != nil {
		return st, err
	}
	st.Invocations, st.Records = 1, len(out.Records)
	resp, ferr := s.invoke(ctx, fn, payload)
	failed := 0 // index of the first record not done: none on an error
	if ferr == nil {
		var r events.KinesisEventResponse
		if json.Unmarshal(resp, &r) == nil {
			failed = firstFailed(r, out.Records)
		}
	}
	if failed > 0 {
		sh.cp = aws.ToString(out.Records[failed-1].SequenceNumber)
		st.Checkpointed = failed
	}
	if failed == len(out.Records) {
		sh.iterator = out.NextShardIterator
		if out.NextShardIterator == nil {
			// Read to its end in this batch: the next round sees no records
			// and ends it.
			sh.iterator = nil
		}
	} else {
		sh.iterator = nil // from the checkpoint again
	}
	return st, nil
}

// read gathers one batch from it: up to batch records, reading again within
// BatchWindow while the batch is short and the shard open.
func (s *EventSource) read(ctx context.Context, it *string, batch int) (*kinesis.GetRecordsOutput, error) {
	until := time.Now().Add(s.BatchWindow)
	var all *kinesis.GetRecordsOutput
	for {
		out, err := s.Kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it, StreamARN: aws.String(s.StreamARN), Limit: aws.Int32(int32(batch))})
		if err != nil {
			if all != nil && len(all.Records) > 0 {
				return all, nil // what was gathered; the error comes again
			}
			return nil, err
		}
		if all == nil {
			all = out
		} else {
			all.Records = append(all.Records, out.Records...)
			all.NextShardIterator = out.NextShardIterator
		}
		batch -= len(out.Records)
		if batch <= 0 || out.NextShardIterator == nil || s.BatchWindow <= 0 || !time.Now().Before(until) {
			return all, nil
		}
		it = out.NextShardIterator
		select {
		case <-ctx.Done():
			return all, nil
		case <-time.After(min(200*time.Millisecond, time.Until(until))):
		}
	}
}

// firstFailed returns the index of the record named by the response (the
// batch length when none is, -1 → 0 when the name matches no record: the
// whole batch comes again, as Lambda treats an unknown identifier).
func firstFailed(r events.KinesisEventResponse, recs []kinesistypes.Record) int {
	if len(r.BatchItemFailures) == 0 {
		return len(recs)
	}
	first := len(recs)
	for _, f := range r.BatchItemFailures {
		i := slices.IndexFunc(recs, func(rec kinesistypes.Record) bool { return aws.ToString(rec.SequenceNumber) == f.ItemIdentifier })
		if i < 0 {
			return 0
		}
		first = min(first, i)
	}
	return first
}

func (s *EventSource) event(shard string, recs []kinesistypes.Record) events.KinesisEvent {
	ev := events.KinesisEvent{Records: make([]events.KinesisEventRecord, len(recs))}
	for i, r := range recs {
		seq := aws.ToString(r.SequenceNumber)
		ev.Records[i] = events.KinesisEventRecord{
			AwsRegion: "us-east-1", EventID: shard + ":" + seq, EventName: "aws:kinesis:record",
			EventSource: "aws:kinesis", EventSourceArn: s.StreamARN, EventVersion: "1.0",
			InvokeIdentityArn: "arn:aws:iam::123456789012:role/lambda-kinesis-role",
			Kinesis: events.KinesisRecord{
				ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: aws.ToTime(r.ApproximateArrivalTimestamp)},
				Data:                        r.Data, PartitionKey: aws.ToString(r.PartitionKey),
				SequenceNumber: seq, KinesisSchemaVersion: "1.0",
			},
		}
	}
	return ev
}

func (s *EventSource) invoke(ctx context.Context, fn Function, payload []byte) ([]byte, error) {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn(ctx, payload)
}

func (s *EventSource) pollQueue(ctx context.Context, fn Function) (Stats, error) {
	var st Stats
	vis := s.VisibilityTimeout
	if vis <= 0 {
		vis = 30 * time.Second
	}
	out, err := s.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(s.QueueURL), MaxNumberOfMessages: 10, VisibilityTimeout: int32(vis / time.Second),
		MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"},
	})
	if err != nil {
		return st, fmt.Errorf("lambdaadaptertest: receive from %s: %w", s.QueueURL, err)
	}
	if len(out.Messages) == 0 {
		return st, nil
	}
	arn := queueARN(s.QueueURL)
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(out.Messages))}
	for i, m := range out.Messages {
		attrs := map[string]events.SQSMessageAttribute{}
		for k, v := range m.MessageAttributes {
			attrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, DataType: aws.ToString(v.DataType)}
		}
		ev.Records[i] = events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Attributes: m.Attributes, MessageAttributes: attrs, EventSource: "aws:sqs", EventSourceARN: arn, AWSRegion: "us-east-1",
		}
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return st, err
	}
	st.Invocations, st.Records = 1, len(out.Messages)
	resp, ferr := s.invoke(ctx, fn, payload)
	if ferr != nil {
		return st, nil // every message comes again after its visibility timeout
	}
	var r events.SQSEventResponse
	if json.Unmarshal(resp, &r) != nil {
		return st, nil
	}
	failed := map[string]bool{}
	for _, f := range r.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	var del []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range out.Messages {
		if !failed[aws.ToString(m.MessageId)] {
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(del) == 0 {
		return st, nil
	}
	dout, err := s.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(s.QueueURL), Entries: del})
	if err != nil {
		return st, fmt.Errorf("lambdaadaptertest: delete from %s: %w", s.QueueURL, err)
	}
	st.Checkpointed = len(dout.Successful)
	return st, nil
}

// queueARN derives an SQS queue ARN from its URL
// (https://sqs.<region>.amazonaws.com/<account>/<name>), or a placeholder.
func queueARN(url string) string {
	parts := strings.Split(strings.TrimSuffix(url, "/"), "/")
	if len(parts) >= 2 {
		return "arn:aws:sqs:us-east-1:" + parts[len(parts)-2] + ":" + parts[len(parts)-1]
	}
	return "arn:aws:sqs:us-east-1:123456789012:queue"
}
