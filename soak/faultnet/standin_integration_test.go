//go:build integration

package faultnet_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// These tests put the fault layers in front of the running stand-ins
// (kinesis-local, dynalite, fauxqs; scripts/standins.sh starts them) and
// check each fault with the real SDK clients. They fail, never skip, when a
// stand-in is missing.

// setupTimeout bounds creating a table or a consumer.
const setupTimeout = 30 * time.Second

// layers are one AWS layer per stand-in, and a target of real resources.
type layers struct {
	env                    *standin.Env
	kinesis, dynamodb, sqs *faultnet.AWS
	tg                     target
}

// newLayers starts an AWS layer in front of each stand-in and creates a
// one-shard stream, a table and a queue, all removed when the test ends.
func newLayers(t *testing.T) *layers {
	t.Helper()
	env := standin.Require(t)
	l := &layers{
		env:      env,
		kinesis:  newAWS(t, faultnet.Kinesis, env.KinesisEndpoint),
		dynamodb: newAWS(t, faultnet.DynamoDB, env.DynamoDBEndpoint),
		sqs:      newAWS(t, faultnet.SQS, env.SQSEndpoint),
	}
	l.tg.stream, _ = env.NewStream(t, 1)
	it, err := env.Kinesis.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{StreamName: aws.String(l.tg.stream), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kinesistypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatalf("GetShardIterator: %v", err)
	}
	l.tg.iterator = aws.ToString(it.ShardIterator)
	l.tg.table = newTable(t, env)
	l.tg.queue = env.NewQueue(t, nil)
	return l
}

// clients returns SDK clients through the three layers.
func (l *layers) clients(t *testing.T, r retries) *clients {
	return newClients(t, r, l.kinesis.URL(), l.dynamodb.URL(), l.sqs.URL())
}

func (l *layers) layer(svc faultnet.Service) *faultnet.AWS {
	switch svc {
	case faultnet.Kinesis:
		return l.kinesis
	case faultnet.DynamoDB:
		return l.dynamodb
	}
	return l.sqs
}

// newTable creates a table with string hash key "k", deleted when the test
// ends.
func newTable(t *testing.T, env *standin.Env) string {
	t.Helper()
	name := uniqueName(t)
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()
	_, err := env.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []dynamodbtypes.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: dynamodbtypes.ScalarAttributeTypeS}},
		KeySchema:            []dynamodbtypes.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: dynamodbtypes.KeyTypeHash}},
		BillingMode:          dynamodbtypes.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if _, err := env.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			t.Errorf("delete table %s: %v", name, err)
		}
	})
	if err := dynamodb.NewTableExistsWaiter(env.DynamoDB, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 20 * time.Millisecond
	}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, setupTimeout); err != nil {
		t.Fatalf("table %s not ACTIVE: %v", name, err)
	}
	return name
}

// uniqueName returns a name made of the test's name and a random suffix.
func uniqueName(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, t.Name())
	if len(name) > 60 {
		name = name[:60]
	}
	return name + "-" + hex.EncodeToString(b[:])
}

// TestStandinErrors: against the stand-ins, each error fault reaches the SDK
// without retries exactly as AWS's answer would (typed exception, code,
// status, retry classification). With the standard retryer, a fault the SDK
// retries is retried until the rule is spent and the call then succeeds at
// the stand-in; one it does not retry reaches the caller after one attempt.
func TestStandinErrors(t *testing.T) {
	l := newLayers(t)
	once := l.clients(t, noRetries)
	retrying := l.clients(t, defaultRetries)
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			a := l.layer(tc.svc)
			remove := a.Inject(faultnet.Rule{Fault: tc.fault, Times: 1})
			defer remove()
			before := a.Calls("")
			tc.checkError(t, tc.call(t.Context(), once, l.tg))
			if d := diffCounts(before, a.Calls("")); d != (faultnet.Counts{Calls: 1, Faulted: 1}) {
				t.Errorf("without retries: counts grew by %+v, want one call faulted, none forwarded", d)
			}

			// Two faulted attempts, then the stand-in: the standard retryer makes three.
			a.Inject(faultnet.Rule{Fault: tc.fault, Times: 2})
			before = a.Calls("")
			err := tc.call(t.Context(), retrying, l.tg)
			grew := diffCounts(before, a.Calls(""))
			if !tc.retried {
				tc.checkError(t, err)
				if grew != (faultnet.Counts{Calls: 1, Faulted: 1}) {
					t.Errorf("standard retryer: counts grew by %+v, want one attempt", grew)
				}
				a.Clear()
				return
			}
			if err != nil && !isStandinAnswer(err) {
				t.Errorf("standard retryer: %v, want the stand-in's answer after two retries", err)
			}
			if grew != (faultnet.Counts{Calls: 3, Faulted: 2, Forwarded: 1}) {
				t.Errorf("standard retryer: counts grew by %+v, want 2 faulted and 1 forwarded", grew)
			}
		})
	}
}

// isStandinAnswer reports whether err is an answer of a stand-in to the
// test's placeholder input (DeleteMessageBatch with an unknown receipt
// handle answers per entry, not with an error; the others succeed).
func isStandinAnswer(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && status(err) == 400
}

func diffCounts(before, after faultnet.Counts) faultnet.Counts {
	return faultnet.Counts{Calls: after.Calls - before.Calls, Forwarded: after.Forwarded - before.Forwarded, Faulted: after.Faulted - before.Faulted}
}

// TestStandinPartialFailurePutRecords: only the records that succeed are
// written (read back from the stream); the failed ones carry their code.
func TestStandinPartialFailurePutRecords(t *testing.T) {
	for _, code := range []string{"ProvisionedThroughputExceededException", "InternalFailure"} {
		t.Run(code, func(t *testing.T) {
			l := newLayers(t)
			c := l.clients(t, noRetries)
			l.kinesis.Inject(faultnet.Rule{Fault: faultnet.PartialFailure(3, code)})
			var entries []kinesistypes.PutRecordsRequestEntry
			for i := range 8 {
				entries = append(entries, kinesistypes.PutRecordsRequestEntry{Data: []byte(fmt.Sprintf("r%d", i)), PartitionKey: aws.String(fmt.Sprint(i))})
			}
			out, err := c.kinesis.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(l.tg.stream), Records: entries})
			if err != nil {
				t.Fatal(err)
			}
			if aws.ToInt32(out.FailedRecordCount) != 2 {
				t.Errorf("FailedRecordCount %d, want 2", aws.ToInt32(out.FailedRecordCount))
			}
			var failed, succeeded []string
			for i, r := range out.Records {
				if r.ErrorCode != nil {
					if aws.ToString(r.ErrorCode) != code || aws.ToString(r.ErrorMessage) == "" {
						t.Errorf("record %d: %s %q", i, aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage))
					}
					failed = append(failed, fmt.Sprintf("r%d", i))
				} else if r.SequenceNumber != nil && aws.ToString(r.ShardId) == "shardId-000000000000" {
					succeeded = append(succeeded, fmt.Sprintf("r%d", i))
				}
			}
			if d := cmp.Diff([]string{"r2", "r5"}, failed); d != "" {
				t.Errorf("failed (-want +got):\n%s", d)
			}
			// Ask for one more than expected: ReadAll then proves there are exactly six.
			var read []string
			for _, r := range l.env.ReadAll(t.Context(), t, l.tg.stream, 7, 2*time.Second) {
				read = append(read, string(r.Data))
			}
			if d := cmp.Diff(succeeded, read); d != "" || len(read) != 6 {
				t.Errorf("in the stream (-answered +read):\n%s", d)
			}
		})
	}
}

// TestStandinPartialFailureSendMessageBatch: only the entries that succeed
// are sent (received back from the queue); the failed ones are in Failed.
func TestStandinPartialFailureSendMessageBatch(t *testing.T) {
	l := newLayers(t)
	c := l.clients(t, noRetries)
	l.sqs.Inject(faultnet.Rule{Fault: faultnet.PartialFailure(2, "InternalError")})
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i := range 5 {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprintf("e%d", i)), MessageBody: aws.String(fmt.Sprintf("m%d", i))})
	}
	out, err := c.sqs.SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(l.tg.queue), Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	var ok, failed []string
	for _, s := range out.Successful {
		ok = append(ok, aws.ToString(s.Id))
	}
	for _, f := range out.Failed {
		if aws.ToString(f.Code) != "InternalError" || f.SenderFault || aws.ToString(f.Message) == "" {
			t.Errorf("failed entry %+v", f)
		}
		failed = append(failed, aws.ToString(f.Id))
	}
	slices.Sort(ok)
	if d := cmp.Diff([]string{"e0", "e2", "e4"}, ok); d != "" {
		t.Errorf("Successful (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"e1", "e3"}, failed); d != "" {
		t.Errorf("Failed (-want +got):\n%s", d)
	}
	var got []string
	for _, m := range l.env.ReceiveAll(t.Context(), t, l.tg.queue, 4, 2*time.Second) {
		got = append(got, aws.ToString(m.Body))
	}
	slices.Sort(got)
	if d := cmp.Diff([]string{"m0", "m2", "m4"}, got); d != "" {
		t.Errorf("in the queue (-want +got):\n%s", d)
	}
}

// TestStandinLostResponse: the conditional write is applied (read back), yet
// the caller gets ConditionalCheckFailedException, with or without retries.
func TestStandinLostResponse(t *testing.T) {
	l := newLayers(t)
	for _, r := range []retries{noRetries, defaultRetries} {
		c := l.clients(t, r)
		key := fmt.Sprintf("lease-%d", r)
		l.dynamodb.Inject(faultnet.Rule{Ops: []string{"PutItem"}, Fault: faultnet.LostResponse(), Times: 1})
		_, err := c.dynamodb.PutItem(t.Context(), &dynamodb.PutItemInput{
			TableName:           aws.String(l.tg.table),
			Item:                map[string]dynamodbtypes.AttributeValue{"k": &dynamodbtypes.AttributeValueMemberS{Value: key}, "owner": &dynamodbtypes.AttributeValueMemberS{Value: "w1"}},
			ConditionExpression: aws.String("attribute_not_exists(k)"),
		})
		var ccf *dynamodbtypes.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t.Errorf("retries %d: PutItem: %v, want ConditionalCheckFailedException", r, err)
		}
		got, err := l.env.DynamoDB.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(l.tg.table), ConsistentRead: aws.Bool(true),
			Key: map[string]dynamodbtypes.AttributeValue{"k": &dynamodbtypes.AttributeValueMemberS{Value: key}}})
		if err != nil {
			t.Fatal(err)
		}
		if owner, _ := got.Item["owner"].(*dynamodbtypes.AttributeValueMemberS); owner == nil || owner.Value != "w1" {
			t.Errorf("retries %d: item %v, want the write applied", r, got.Item)
		}
	}
}

// TestStandinCutBody: the write happens at the stand-in; the SDK fails to
// read the cut answer.
func TestStandinCutBody(t *testing.T) {
	l := newLayers(t)
	c := l.clients(t, noRetries)
	l.kinesis.Inject(faultnet.Rule{Ops: []string{"PutRecord"}, Fault: faultnet.CutBody()})
	_, err := c.kinesis.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String(l.tg.stream), PartitionKey: aws.String("k"), Data: []byte("cut")})
	var de *smithy.DeserializationError
	if !errors.As(err, &de) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("PutRecord: %v, want a deserialization error with unexpected EOF", err)
	}
	if recs := l.env.ReadAll(t.Context(), t, l.tg.stream, 2, 2*time.Second); len(recs) != 1 || string(recs[0].Data) != "cut" {
		t.Errorf("stream holds %d records, want the one written", len(recs))
	}
	l.dynamodb.Inject(faultnet.Rule{Ops: []string{"GetItem"}, Fault: faultnet.CutBody()})
	if err := getItem(t.Context(), c, l.tg); err == nil {
		t.Errorf("GetItem with a cut answer succeeded")
	}
}

// newRoute starts a route to upstream, closed when the test ends.
func newRoute(t *testing.T, svc faultnet.Service, upstream string) *faultnet.Route {
	t.Helper()
	r, err := faultnet.NewRoute(svc, upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Route.Close: %v", err)
		}
	})
	return r
}

// TestStandinTCP: through a route to kinesis-local, a black hole makes a
// call time out on a 1 s deadline, a cut refuses it, a reset resets it
// after the write happened, and latency delays it.
func TestStandinTCP(t *testing.T) {
	env := standin.Require(t)
	stream, _ := env.NewStream(t, 1)
	r := newRoute(t, faultnet.Kinesis, env.KinesisEndpoint)
	c := newClients(t, noRetries, r.URL(), "", "")
	tg := target{stream: stream}
	put := func(ctx context.Context, data string) error {
		_, err := c.kinesis.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte(data)})
		return err
	}
	if err := listShards(t.Context(), c, tg); err != nil {
		t.Fatalf("ListShards through the route: %v", err)
	}

	remove := r.TCP.BlackHole()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	err := put(ctx, "lost")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("PutRecord into a black hole: %v, want the 1s deadline", err)
	}
	remove()

	restore := r.TCP.Cut()
	c.tr.CloseIdleConnections()
	if err := listShards(t.Context(), c, tg); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("ListShards while cut: %v, want connection refused", err)
	}
	restore()

	remove = r.TCP.ResetPeer(0)
	if err := put(t.Context(), "reset"); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("PutRecord with reset: %v, want connection reset", err)
	}
	remove()

	const latency = 500 * time.Millisecond
	remove = r.TCP.Latency(latency, 0)
	start := time.Now()
	if err := listShards(t.Context(), c, tg); err != nil {
		t.Errorf("ListShards with latency: %v", err)
	}
	if took := time.Since(start); took < latency {
		t.Errorf("ListShards took %v, want at least %v", took, latency)
	}
	remove()

	// The black-holed record never arrived; the reset one was written.
	var data []string
	for _, rec := range env.ReadAll(t.Context(), t, stream, 2, 2*time.Second) {
		data = append(data, string(rec.Data))
	}
	if d := cmp.Diff([]string{"reset"}, data); d != "" {
		t.Errorf("stream (-want +got):\n%s", d)
	}
}

// noInitialResponse is the SDK's protocol without the event stream's
// initial-response message, which kinesis-local does not send (see
// /work/shared/EMULATORS.md and integration/efo_test.go).
type noInitialResponse struct{ smithyhttp.ClientProtocol }

func (noInitialResponse) HasInitialEventMessage() bool { return false }

func withoutInitialResponse(o *kinesis.Options) { o.Protocol = noInitialResponse{o.Protocol} }

// newConsumer registers an enhanced fan-out consumer of the stream and
// waits until it is ACTIVE.
func newConsumer(t *testing.T, env *standin.Env, streamARN string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()
	out, err := env.Kinesis.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String("faultnet")})
	if err != nil {
		t.Fatalf("RegisterStreamConsumer: %v", err)
	}
	arn := aws.ToString(out.Consumer.ConsumerARN)
	for {
		d, err := env.Kinesis.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
		if err != nil {
			t.Fatalf("DescribeStreamConsumer: %v", err)
		}
		if d.ConsumerDescription.ConsumerStatus == kinesistypes.ConsumerStatusActive {
			return arn
		}
		select {
		case <-ctx.Done():
			t.Fatalf("consumer not ACTIVE within %v", setupTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestStandinSubscribeToShard: a subscription through both layers streams
// events as they come (records put after it opened arrive on it, long
// before the subscription's five minutes end); a fault on SubscribeToShard
// answers its error before any event, as AWS does.
func TestStandinSubscribeToShard(t *testing.T) {
	env := standin.Require(t)
	stream, streamARN := env.NewStream(t, 1)
	consumer := newConsumer(t, env, streamARN)
	r := newRoute(t, faultnet.Kinesis, env.KinesisEndpoint)
	c := newClients(t, noRetries, r.URL(), "", "")
	in := &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(consumer), ShardId: aws.String("shardId-000000000000"),
		StartingPosition: &kinesistypes.StartingPosition{Type: kinesistypes.ShardIteratorTypeTrimHorizon}}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sub, err := c.kinesis.SubscribeToShard(ctx, in, withoutInitialResponse)
	if err != nil {
		t.Fatalf("SubscribeToShard through the route: %v", err)
	}
	es := sub.GetStream()
	defer es.Close()
	want := []string{"e0", "e1", "e2", "e3", "e4"}
	for _, d := range want {
		if _, err := env.Kinesis.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte(d)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for len(got) < len(want) {
		select {
		case ev, ok := <-es.Events():
			if !ok {
				t.Fatalf("subscription ended after %v: %v", got, es.Err())
			}
			if e, ok := ev.(*kinesistypes.SubscribeToShardEventStreamMemberSubscribeToShardEvent); ok {
				for _, rec := range e.Value.Records {
					got = append(got, string(rec.Data))
				}
			}
		case <-ctx.Done():
			t.Fatalf("only %v arrived within a minute", got)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if n := r.AWS.Calls("SubscribeToShard"); n != (faultnet.Counts{Calls: 1, Forwarded: 1}) {
		t.Errorf("counts %+v", n)
	}

	for _, tc := range []struct {
		fault faultnet.Fault
		typed func(error) bool
	}{
		{faultnet.LimitExceeded(), as[*kinesistypes.LimitExceededException]},
		{faultnet.APIError(400, "ResourceInUseException", "Another active subscription exists for this consumer"), as[*kinesistypes.ResourceInUseException]},
		{faultnet.Throttled(), as[*kinesistypes.ProvisionedThroughputExceededException]},
	} {
		r.AWS.Inject(faultnet.Rule{Ops: []string{"SubscribeToShard"}, Fault: tc.fault, Times: 1})
		sub, err := c.kinesis.SubscribeToShard(ctx, in, withoutInitialResponse)
		if err == nil {
			sub.GetStream().Close()
		}
		if !tc.typed(err) {
			t.Errorf("%v on SubscribeToShard: %v", tc.fault, err)
		}
	}
}
