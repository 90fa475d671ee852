//go:build integration

package standin_test

import (
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/integration/standin"
)

// put is one record as PutRecords placed it.
type put struct {
	PartitionKey, Data, ShardID, SequenceNumber string
}

func TestKinesisStreamAndReadAll(t *testing.T) {
	env := standin.Require(t)
	ctx := t.Context()
	name, arn := env.NewStream(t, 2)
	if !strings.HasSuffix(arn, ":stream/"+name) || !strings.HasPrefix(arn, "arn:aws:kinesis:us-east-1:") {
		t.Errorf("NewStream ARN = %q, want arn:aws:kinesis:us-east-1:...:stream/%s", arn, name)
	}

	const n = 10
	entries := make([]kinesistypes.PutRecordsRequestEntry, n)
	for i := range entries {
		entries[i] = kinesistypes.PutRecordsRequestEntry{
			PartitionKey: aws.String(fmt.Sprintf("key-%d", i)),
			Data:         []byte(fmt.Sprintf("record %d", i)),
		}
	}
	res, err := env.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamARN: aws.String(arn), Records: entries})
	if err != nil {
		t.Fatalf("PutRecords: %v", err)
	}
	if c := aws.ToInt32(res.FailedRecordCount); c != 0 {
		t.Fatalf("PutRecords: %d records failed: %+v", c, res.Records)
	}
	var want []put
	shards := map[string]bool{}
	for i, r := range res.Records {
		key := aws.ToString(entries[i].PartitionKey)
		want = append(want, put{key, string(entries[i].Data), aws.ToString(r.ShardId), aws.ToString(r.SequenceNumber)})
		shards[aws.ToString(r.ShardId)] = true
		if got := env.ShardOf(ctx, t, name, key); got != aws.ToString(r.ShardId) {
			t.Errorf("ShardOf(%q) = %s, but PutRecords placed it in %s", key, got, aws.ToString(r.ShardId))
		}
	}
	if len(shards) != 2 {
		t.Fatalf("the %d keys landed in shards %v; the test needs keys in both shards", n, shards)
	}

	records := env.ReadAll(ctx, t, name, n, 20*time.Second)

	var got []put
	lastSeq := map[string]*big.Int{}
	for _, r := range records {
		got = append(got, put{aws.ToString(r.PartitionKey), string(r.Data), r.ShardID, aws.ToString(r.SequenceNumber)})
		seq, ok := new(big.Int).SetString(aws.ToString(r.SequenceNumber), 10)
		if !ok {
			t.Fatalf("record %q has sequence number %q", r.Data, aws.ToString(r.SequenceNumber))
		}
		if prev := lastSeq[r.ShardID]; prev != nil && prev.Cmp(seq) >= 0 {
			t.Errorf("ReadAll returned %s after %s in %s; want sequence-number order per shard", seq, prev, r.ShardID)
		}
		lastSeq[r.ShardID] = seq
	}
	byKey := func(s []put) { sort.Slice(s, func(i, j int) bool { return s[i].PartitionKey < s[j].PartitionKey }) }
	byKey(want)
	byKey(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadAll (-put +read):\n%s", diff)
	}

	start := time.Now()
	if again := env.ReadAll(ctx, t, name, n+1, 300*time.Millisecond); len(again) != n {
		t.Errorf("ReadAll(want %d) returned %d records, want all %d there are", n+1, len(again), n)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 10*time.Second {
		t.Errorf("ReadAll with a 300ms timeout took %v", d)
	}
}

func TestNewStreamCleanup(t *testing.T) {
	env := standin.Require(t)
	var name string
	t.Run("create", func(t *testing.T) {
		name, _ = env.NewStream(t, 1)
	})
	out, err := env.Kinesis.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	var missing *kinesistypes.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
	case err != nil:
		t.Fatalf("DescribeStreamSummary after cleanup: %v", err)
	case out.StreamDescriptionSummary.StreamStatus != kinesistypes.StreamStatusDeleting:
		t.Errorf("after cleanup stream %s is %s, want deleted or DELETING", name, out.StreamDescriptionSummary.StreamStatus)
	}
}

func TestSQSQueueAndReceiveAll(t *testing.T) {
	env := standin.Require(t)
	ctx := t.Context()
	url := env.NewQueue(t, map[string]string{"VisibilityTimeout": "7"})
	attrs, err := env.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout},
	})
	if err != nil {
		t.Fatalf("GetQueueAttributes: %v", err)
	}
	if got := attrs.Attributes["VisibilityTimeout"]; got != "7" {
		t.Errorf("NewQueue: VisibilityTimeout = %q, want 7", got)
	}

	sent := time.Now()
	_, err = env.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(url),
		MessageBody:  aws.String("hello"),
		DelaySeconds: 1,
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"kind": {DataType: aws.String("String"), StringValue: aws.String("greeting")},
		},
	})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	early, err := env.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 0})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if len(early.Messages) != 0 {
		t.Fatalf("a message sent with DelaySeconds=1 was received at once: %+v", early.Messages)
	}

	msgs := env.ReceiveAll(ctx, t, url, 1, 10*time.Second)
	elapsed := time.Since(sent)

	if len(msgs) != 1 {
		t.Fatalf("ReceiveAll returned %d messages, want 1", len(msgs))
	}
	if elapsed < time.Second {
		t.Errorf("received %v after sending with DelaySeconds=1, want at least 1s", elapsed)
	}
	m := msgs[0]
	type view struct{ Body, Kind, ReceiveCount string }
	got := view{aws.ToString(m.Body), aws.ToString(m.MessageAttributes["kind"].StringValue), m.Attributes["ApproximateReceiveCount"]}
	if diff := cmp.Diff(view{"hello", "greeting", "1"}, got); diff != "" {
		t.Errorf("ReceiveAll message (-want +got):\n%s", diff)
	}

	counts, err := env.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		t.Fatalf("GetQueueAttributes: %v", err)
	}
	for k, v := range counts.Attributes {
		if v != "0" {
			t.Errorf("after ReceiveAll %s = %s, want 0 (ReceiveAll deletes what it received)", k, v)
		}
	}
}

func TestNewQueueCleanup(t *testing.T) {
	env := standin.Require(t)
	var url string
	t.Run("create", func(t *testing.T) {
		url = env.NewQueue(t, map[string]string{"FifoQueue": "true"})
		if !strings.HasSuffix(url, ".fifo") {
			t.Errorf("FIFO queue URL %q does not end in .fifo", url)
		}
	})
	_, err := env.SQS.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url)})
	var missing *sqstypes.QueueDoesNotExist
	if !errors.As(err, &missing) {
		t.Errorf("GetQueueAttributes after cleanup: err = %v, want QueueDoesNotExist", err)
	}
}

func TestDynamoDBListTables(t *testing.T) {
	env := standin.Require(t)
	if _, err := env.DynamoDB.ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("ListTables: %v", err)
	}
}
