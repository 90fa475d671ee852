//go:build integration

package standin_test

import (
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"sync"
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

	// The records are all there: want = n returns once they are read, and
	// the quiet window (which would only start at the tip) never matters.
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

	// want = n+1 proves there are no more: ReadAll reads every shard up to
	// its tip, however long that takes, and only then waits out the quiet
	// window. So it returns all n records, and not before the window has
	// passed. (No upper bound: how long reading the n records takes
	// depends on the machine.)
	const quiet = 300 * time.Millisecond
	start := time.Now()
	again := env.ReadAll(ctx, t, name, n+1, quiet)
	if d := time.Since(start); d < quiet {
		t.Errorf("ReadAll(want %d) returned after %v, before its %v quiet window could pass", n+1, d, quiet)
	}
	if len(again) != n {
		t.Errorf("ReadAll(want %d) returned %d records, want all %d there are", n+1, len(again), n)
	}
	var gotAgain []put
	for _, r := range again {
		gotAgain = append(gotAgain, put{aws.ToString(r.PartitionKey), string(r.Data), r.ShardID, aws.ToString(r.SequenceNumber)})
	}
	byKey(gotAgain)
	if diff := cmp.Diff(want, gotAgain); diff != "" {
		t.Errorf("ReadAll(want %d) (-put +read):\n%s", n+1, diff)
	}
}

// TestKinesisReadAllSeesLateRecord checks that a record written while
// ReadAll waits out its quiet window is read: the window is a wait for more
// records, not a deadline. The record is written after a short pause, most
// likely once ReadAll has reached the tip; when the machine is slow it is
// already there before, and is read like the others. Either way ReadAll
// returns as soon as it has it; the long window only bounds a failure.
func TestKinesisReadAllSeesLateRecord(t *testing.T) {
	env := standin.Require(t)
	ctx := t.Context()
	name, _ := env.NewStream(t, 2)
	for i := range 2 {
		if _, err := env.Kinesis.PutRecord(ctx, &kinesis.PutRecordInput{
			StreamName: aws.String(name), PartitionKey: aws.String(fmt.Sprintf("early-%d", i)), Data: []byte("early"),
		}); err != nil {
			t.Fatalf("PutRecord: %v", err)
		}
	}

	errc := make(chan error, 1)
	var wg sync.WaitGroup
	// Should ReadAll end the test, the context is canceled before the
	// cleanups run, so the writer stops at once and is waited for.
	t.Cleanup(wg.Wait)
	wg.Go(func() {
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			errc <- ctx.Err()
			return
		}
		_, err := env.Kinesis.PutRecord(ctx, &kinesis.PutRecordInput{
			StreamName: aws.String(name), PartitionKey: aws.String("late"), Data: []byte("late"),
		})
		errc <- err
	})
	records := env.ReadAll(ctx, t, name, 3, time.Minute)
	if err := <-errc; err != nil {
		t.Fatalf("PutRecord of the late record: %v", err)
	}
	var keys []string
	for _, r := range records {
		keys = append(keys, aws.ToString(r.PartitionKey))
	}
	sort.Strings(keys)
	if diff := cmp.Diff([]string{"early-0", "early-1", "late"}, keys); diff != "" {
		t.Errorf("ReadAll partition keys (-want +got):\n%s", diff)
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
	earlyTook := time.Since(sent)
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	wantCount := "1"
	if len(early.Messages) != 0 {
		// The message may be received only once its delay has passed,
		// and the delay cannot have passed before the send began. A
		// receive that ended later proves nothing: on a slow machine the
		// delay may have passed by then. Make the message visible again;
		// it will then have been received twice.
		if earlyTook < time.Second {
			t.Fatalf("a message sent with DelaySeconds=1 was received %v after the send began: %+v", earlyTook, early.Messages)
		}
		t.Logf("the early receive ended %v after the send began, past the 1s delay: it cannot show that the delay was kept", earlyTook)
		if _, err := env.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(url), ReceiptHandle: early.Messages[0].ReceiptHandle, VisibilityTimeout: 0,
		}); err != nil {
			t.Fatalf("ChangeMessageVisibility: %v", err)
		}
		wantCount = "2"
	}

	// The queue looks empty until the delay has passed; a 10s quiet window
	// waits for the message, and ReceiveAll returns as soon as it has it.
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
	if diff := cmp.Diff(view{"hello", "greeting", wantCount}, got); diff != "" {
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
