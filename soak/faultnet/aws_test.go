package faultnet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// target names the resources an sdkCall uses: made-up names against the
// fake, real ones against the stand-ins.
type target struct {
	stream, iterator, table, queue string
}

// fakeTarget is the target of the unit tests.
var fakeTarget = target{stream: "s", iterator: "it", table: "leases", queue: "http://127.0.0.1/000000000000/q"}

// sdkCall is one SDK call a fault is tried on.
type sdkCall func(ctx context.Context, c *clients, tg target) error

var (
	getRecords = func(ctx context.Context, c *clients, tg target) error {
		_, err := c.kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(tg.iterator)})
		return err
	}
	listShards = func(ctx context.Context, c *clients, tg target) error {
		_, err := c.kinesis.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(tg.stream)})
		return err
	}
	getShardIterator = func(ctx context.Context, c *clients, tg target) error {
		_, err := c.kinesis.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(tg.stream), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kinesistypes.ShardIteratorTypeTrimHorizon})
		return err
	}
	putItem = func(ctx context.Context, c *clients, tg target) error {
		_, err := c.dynamodb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tg.table), Item: map[string]dynamodbtypes.AttributeValue{"k": &dynamodbtypes.AttributeValueMemberS{Value: "v"}}})
		return err
	}
	getItem = func(ctx context.Context, c *clients, tg target) error {
		_, err := c.dynamodb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tg.table), Key: map[string]dynamodbtypes.AttributeValue{"k": &dynamodbtypes.AttributeValueMemberS{Value: "v"}}})
		return err
	}
	sendMessage = func(ctx context.Context, c *clients, tg target) error {
		_, err := c.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(tg.queue), MessageBody: aws.String("hello")})
		return err
	}
	receiveMessage = func(ctx context.Context, c *clients, tg target) error {
		_, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(tg.queue), WaitTimeSeconds: 0})
		return err
	}
	deleteMessageBatch = func(ctx context.Context, c *clients, tg target) error {
		_, err := c.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(tg.queue), Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("a"), ReceiptHandle: aws.String("none")}}})
		return err
	}
)

// errorCase is one fault on one service and what the SDK makes of it.
type errorCase struct {
	name  string
	svc   faultnet.Service
	fault faultnet.Fault
	call  sdkCall
	// typed checks err with errors.As on the SDK's type, if the model has one.
	typed func(err error) bool
	code  string            // smithy.APIError's ErrorCode
	side  smithy.ErrorFault // smithy.APIError's ErrorFault
	http  int
	// retried and throttle: the standard retryer's classification.
	retried, throttle bool
}

func as[T error](err error) bool {
	var v T
	return errors.As(err, &v)
}

// errorCases are the faults that answer an error, on every service that has
// them, with the classification AWS's own answers get.
var errorCases = []errorCase{
	{name: "kinesis/Throttled/GetRecords", svc: faultnet.Kinesis, fault: faultnet.Throttled(), call: getRecords,
		typed: as[*kinesistypes.ProvisionedThroughputExceededException], code: "ProvisionedThroughputExceededException", side: smithy.FaultClient, http: 400, retried: true, throttle: true},
	{name: "kinesis/Throttled/GetShardIterator", svc: faultnet.Kinesis, fault: faultnet.Throttled(), call: getShardIterator,
		typed: as[*kinesistypes.ProvisionedThroughputExceededException], code: "ProvisionedThroughputExceededException", side: smithy.FaultClient, http: 400, retried: true, throttle: true},
	{name: "kinesis/LimitExceeded/ListShards", svc: faultnet.Kinesis, fault: faultnet.LimitExceeded(), call: listShards,
		typed: as[*kinesistypes.LimitExceededException], code: "LimitExceededException", side: smithy.FaultClient, http: 400, retried: true, throttle: true},
	{name: "kinesis/LimitExceeded/GetShardIterator", svc: faultnet.Kinesis, fault: faultnet.LimitExceeded(), call: getShardIterator,
		typed: as[*kinesistypes.LimitExceededException], code: "LimitExceededException", side: smithy.FaultClient, http: 400, retried: true, throttle: true},
	{name: "kinesis/ExpiredIterator/GetRecords", svc: faultnet.Kinesis, fault: faultnet.ExpiredIterator(), call: getRecords,
		typed: as[*kinesistypes.ExpiredIteratorException], code: "ExpiredIteratorException", side: smithy.FaultClient, http: 400},
	{name: "kinesis/KMSThrottling/GetRecords", svc: faultnet.Kinesis, fault: faultnet.KMSThrottling(), call: getRecords,
		typed: as[*kinesistypes.KMSThrottlingException], code: "KMSThrottlingException", side: smithy.FaultClient, http: 400},
	{name: "kinesis/InternalFailure/GetRecords", svc: faultnet.Kinesis, fault: faultnet.InternalFailure(), call: getRecords,
		code: "InternalFailure", side: smithy.FaultUnknown, http: 500, retried: true},
	{name: "kinesis/ServiceUnavailable/ListShards", svc: faultnet.Kinesis, fault: faultnet.ServiceUnavailable(), call: listShards,
		code: "ServiceUnavailable", side: smithy.FaultUnknown, http: 503, retried: true},
	{name: "dynamodb/Throttled/PutItem", svc: faultnet.DynamoDB, fault: faultnet.Throttled(), call: putItem,
		typed: as[*dynamodbtypes.ProvisionedThroughputExceededException], code: "ProvisionedThroughputExceededException", side: smithy.FaultClient, http: 400, retried: true, throttle: true},
	{name: "dynamodb/ThrottlingException/GetItem", svc: faultnet.DynamoDB, fault: faultnet.ThrottlingException(), call: getItem,
		typed: as[*dynamodbtypes.ThrottlingException], code: "ThrottlingException", side: smithy.FaultClient, http: 400, retried: true, throttle: true},
	{name: "dynamodb/RequestLimitExceeded/PutItem", svc: faultnet.DynamoDB, fault: faultnet.RequestLimitExceeded(), call: putItem,
		typed: as[*dynamodbtypes.RequestLimitExceeded], code: "RequestLimitExceeded", side: smithy.FaultClient, http: 400, retried: true, throttle: true},
	{name: "dynamodb/InternalFailure/PutItem", svc: faultnet.DynamoDB, fault: faultnet.InternalFailure(), call: putItem,
		typed: as[*dynamodbtypes.InternalServerError], code: "InternalServerError", side: smithy.FaultServer, http: 500, retried: true},
	{name: "dynamodb/ServiceUnavailable/GetItem", svc: faultnet.DynamoDB, fault: faultnet.ServiceUnavailable(), call: getItem,
		code: "ServiceUnavailable", side: smithy.FaultUnknown, http: 503, retried: true},
	{name: "sqs/SQSThrottled/SendMessage", svc: faultnet.SQS, fault: faultnet.SQSThrottled(), call: sendMessage,
		typed: as[*sqstypes.RequestThrottled], code: "RequestThrottled", side: smithy.FaultClient, http: 403, retried: true, throttle: true},
	{name: "sqs/Throttled/SendMessage", svc: faultnet.SQS, fault: faultnet.Throttled(), call: sendMessage,
		typed: as[*sqstypes.RequestThrottled], code: "RequestThrottled", side: smithy.FaultClient, http: 403, retried: true, throttle: true},
	{name: "sqs/SQSThrottled/ReceiveMessage", svc: faultnet.SQS, fault: faultnet.SQSThrottled(), call: receiveMessage,
		typed: as[*sqstypes.RequestThrottled], code: "RequestThrottled", side: smithy.FaultClient, http: 403, retried: true, throttle: true},
	{name: "sqs/InternalFailure/DeleteMessageBatch", svc: faultnet.SQS, fault: faultnet.InternalFailure(), call: deleteMessageBatch,
		code: "InternalError", side: smithy.FaultServer, http: 500, retried: true},
	{name: "sqs/InternalFailure/SendMessage", svc: faultnet.SQS, fault: faultnet.InternalFailure(), call: sendMessage,
		code: "InternalError", side: smithy.FaultServer, http: 500, retried: true},
	{name: "sqs/ServiceUnavailable/SendMessage", svc: faultnet.SQS, fault: faultnet.ServiceUnavailable(), call: sendMessage,
		code: "ServiceUnavailable", side: smithy.FaultServer, http: 503, retried: true},
}

// checkError checks err against what the case says the SDK makes of it.
func (tc errorCase) checkError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("call succeeded, want %s", tc.code)
	}
	if tc.typed != nil && !tc.typed(err) {
		t.Errorf("errors.As on the SDK's type failed for %T: %v", errors.Unwrap(err), err)
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		t.Fatalf("not a smithy.APIError: %v", err)
	}
	if api.ErrorCode() != tc.code || api.ErrorFault() != tc.side {
		t.Errorf("code %q fault %v, want %q %v (%v)", api.ErrorCode(), api.ErrorFault(), tc.code, tc.side, err)
	}
	if api.ErrorMessage() == "" {
		t.Errorf("empty message: %v", err)
	}
	if got := status(err); got != tc.http {
		t.Errorf("HTTP status %d, want %d", got, tc.http)
	}
	retried := retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
	throttle := retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary
	if retried != tc.retried || throttle != tc.throttle {
		t.Errorf("standard retryer: retryable %v throttle %v, want %v %v", retried, throttle, tc.retried, tc.throttle)
	}
}

// endpoints returns the client endpoints with url for svc.
func endpoints(svc faultnet.Service, url string) (k, d, s string) {
	switch svc {
	case faultnet.Kinesis:
		return url, "", ""
	case faultnet.DynamoDB:
		return "", url, ""
	}
	return "", "", url
}

// TestErrorShapes: each error fault reaches the real SDK client, without
// retries, as the error AWS sends: the SDK's typed exception, code, fault
// side, status, and the standard retryer's classification. Nothing reaches
// the stand-in.
func TestErrorShapes(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			up := newFake(t)
			a := newAWS(t, tc.svc, up.URL())
			a.Inject(faultnet.Rule{Fault: tc.fault})
			k, d, s := endpoints(tc.svc, a.URL())
			c := newClients(t, noRetries, k, d, s)
			tc.checkError(t, tc.call(t.Context(), c, fakeTarget))
			if got := a.Calls(""); got != (faultnet.Counts{Calls: 1, Faulted: 1}) {
				t.Errorf("counts %+v, want one call faulted and none forwarded", got)
			}
			if n := up.n(); n != 0 {
				t.Errorf("the stand-in got %d calls, want 0", n)
			}
		})
	}
}

// TestDynamoDBThrottlingReasons: DynamoDB's throttling answers name the
// table and the kind of capacity, as AWS's do.
func TestDynamoDBThrottlingReasons(t *testing.T) {
	up := newFake(t)
	a := newAWS(t, faultnet.DynamoDB, up.URL())
	c := newClients(t, noRetries, "", a.URL(), "")
	a.Inject(faultnet.Rule{Fault: faultnet.Throttled(), Times: 1})
	a.Inject(faultnet.Rule{Fault: faultnet.RequestLimitExceeded(), Times: 1})
	arn := "arn:aws:dynamodb:us-east-1:000000000000:table/leases"

	var pt *dynamodbtypes.ProvisionedThroughputExceededException
	if err := putItem(t.Context(), c, fakeTarget); !errors.As(err, &pt) {
		t.Fatalf("PutItem: %v, want ProvisionedThroughputExceededException", err)
	}
	want := []dynamodbtypes.ThrottlingReason{{Reason: aws.String("TableWriteProvisionedThroughputExceeded"), Resource: aws.String(arn)}}
	if d := cmp.Diff(want, pt.ThrottlingReasons, cmp.AllowUnexported(dynamodbtypes.ThrottlingReason{})); d != "" {
		t.Errorf("ThrottlingReasons (-want +got):\n%s", d)
	}
	var rl *dynamodbtypes.RequestLimitExceeded
	if err := getItem(t.Context(), c, fakeTarget); !errors.As(err, &rl) {
		t.Fatalf("GetItem: %v, want RequestLimitExceeded", err)
	}
	want = []dynamodbtypes.ThrottlingReason{{Reason: aws.String("TableReadAccountLimitExceeded"), Resource: aws.String(arn)}}
	if d := cmp.Diff(want, rl.ThrottlingReasons, cmp.AllowUnexported(dynamodbtypes.ThrottlingReason{})); d != "" {
		t.Errorf("ThrottlingReasons (-want +got):\n%s", d)
	}
}

// TestWireShape: the raw answer carries the service's headers and body
// fields (a DynamoDB answer's x-amz-crc32 is the body's CRC32, which the SDK
// checks), and no X-Amzn-ErrorType, as the stand-ins and AWS's documented
// examples do not.
func TestWireShape(t *testing.T) {
	cases := []struct {
		svc         faultnet.Service
		fault       faultnet.Fault
		target, ct  string
		typ, query  string
		status      int
		crc, hasID2 bool
	}{
		{faultnet.Kinesis, faultnet.Throttled(), "Kinesis_20131202.GetRecords", "application/x-amz-json-1.1", "ProvisionedThroughputExceededException", "", 400, false, true},
		{faultnet.DynamoDB, faultnet.Throttled(), "DynamoDB_20120810.PutItem", "application/x-amz-json-1.0", "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException", "", 400, true, false},
		{faultnet.DynamoDB, faultnet.ThrottlingException(), "DynamoDB_20120810.PutItem", "application/x-amz-json-1.0", "com.amazon.coral.availability#ThrottlingException", "", 400, true, false},
		{faultnet.SQS, faultnet.SQSThrottled(), "AmazonSQS.SendMessage", "application/x-amz-json-1.0", "com.amazonaws.sqs#RequestThrottled", "RequestThrottled;Sender", 403, false, false},
		{faultnet.SQS, faultnet.InternalFailure(), "AmazonSQS.ReceiveMessage", "application/x-amz-json-1.0", "com.amazonaws.sqs#InternalError", "InternalError;Receiver", 500, false, false},
	}
	for _, tc := range cases {
		t.Run(string(tc.svc)+"/"+tc.fault.String(), func(t *testing.T) {
			a := newAWS(t, tc.svc, newFake(t).URL())
			a.Inject(faultnet.Rule{Fault: tc.fault})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, a.URL()+"/", strings.NewReader(`{"TableName":"t"}`))
			req.Header.Set("X-Amz-Target", tc.target)
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != tc.ct || resp.Header.Get("X-Amzn-Query-Error") != tc.query {
				t.Errorf("status %d, Content-Type %q, x-amzn-query-error %q; want %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Amzn-Query-Error"), tc.status, tc.ct, tc.query)
			}
			if resp.Header.Get("X-Amzn-Requestid") == "" || resp.Header.Get("X-Amzn-Errortype") != "" {
				t.Errorf("x-amzn-RequestId %q, x-amzn-ErrorType %q: want an id and no error type header", resp.Header.Get("X-Amzn-Requestid"), resp.Header.Get("X-Amzn-Errortype"))
			}
			if (resp.Header.Get("X-Amz-Id-2") != "") != tc.hasID2 {
				t.Errorf("x-amz-id-2 %q", resp.Header.Get("X-Amz-Id-2"))
			}
			if tc.crc {
				if got, want := resp.Header.Get("X-Amz-Crc32"), strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10); got != want {
					t.Errorf("x-amz-crc32 %q, want %q", got, want)
				}
			}
			var v struct {
				Type    string `json:"__type"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(body, &v); err != nil || v.Type != tc.typ || v.Message == "" {
				t.Errorf("body %s: want __type %q and a message (%v)", body, tc.typ, err)
			}
		})
	}
}

// TestForwardUnchanged: with no rule (and with a rule for another
// operation), a call and its answer pass unchanged, status and error answers
// included.
func TestForwardUnchanged(t *testing.T) {
	up := newFake(t)
	up.setAnswer("DescribeTable", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Custom", "kept")
		w.WriteHeader(400)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}`))
	})
	a := newAWS(t, faultnet.DynamoDB, up.URL())
	a.Inject(faultnet.Rule{Ops: []string{"PutItem"}, Fault: faultnet.InternalFailure()})
	in := `{"TableName":"nope"}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, a.URL()+"/", strings.NewReader(in))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.DescribeTable")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || resp.Header.Get("X-Custom") != "kept" || !strings.Contains(string(body), "ResourceNotFoundException") {
		t.Errorf("answer %d %v %s: want the stand-in's", resp.StatusCode, resp.Header, body)
	}
	if got := up.got("DescribeTable"); len(got) != 1 || string(got[0]) != in {
		t.Errorf("stand-in got %q, want %q", got, in)
	}
	if got := a.Calls("DescribeTable"); got != (faultnet.Counts{Calls: 1, Forwarded: 1}) {
		t.Errorf("counts %+v", got)
	}
}

// TestRetriedUntilSpent: with the standard retryer, a throttle rule spent
// after two calls costs two attempts, and the third reaches the stand-in.
func TestRetriedUntilSpent(t *testing.T) {
	up := newFake(t)
	a := newAWS(t, faultnet.Kinesis, up.URL())
	a.Inject(faultnet.Rule{Ops: []string{"GetRecords"}, Fault: faultnet.Throttled(), Times: 2})
	c := newClients(t, defaultRetries, a.URL(), "", "")
	if err := getRecords(t.Context(), c, fakeTarget); err != nil {
		t.Fatalf("GetRecords: %v, want success on the third attempt", err)
	}
	if got := a.Calls("GetRecords"); got != (faultnet.Counts{Calls: 3, Forwarded: 1, Faulted: 2}) {
		t.Errorf("counts %+v, want 3 calls, 2 faulted, 1 forwarded", got)
	}
}

// TestRules: operations, Match, order, Times, remove and Clear decide which
// calls get which fault.
func TestRules(t *testing.T) {
	up := newFake(t)
	a := newAWS(t, faultnet.Kinesis, up.URL())
	c := newClients(t, noRetries, a.URL(), "", "")
	code := func(err error) string {
		var api smithy.APIError
		if errors.As(err, &api) {
			return api.ErrorCode()
		}
		if err != nil {
			return err.Error()
		}
		return "ok"
	}
	ctx := t.Context()

	// Only the operations named.
	removeLimit := a.Inject(faultnet.Rule{Ops: []string{"ListShards"}, Fault: faultnet.LimitExceeded()})
	if got := code(getRecords(ctx, c, fakeTarget)); got != "ok" {
		t.Errorf("GetRecords: %s, want ok (rule for ListShards)", got)
	}
	if got := code(listShards(ctx, c, fakeTarget)); got != "LimitExceededException" {
		t.Errorf("ListShards: %s", got)
	}
	// The first rule that applies wins; Times spends it.
	a.Inject(faultnet.Rule{Fault: faultnet.InternalFailure(), Times: 1})
	if got := code(listShards(ctx, c, fakeTarget)); got != "LimitExceededException" {
		t.Errorf("ListShards: %s, want the earlier rule", got)
	}
	if got := code(getRecords(ctx, c, fakeTarget)); got != "InternalFailure" {
		t.Errorf("GetRecords: %s, want InternalFailure once", got)
	}
	if got := code(getRecords(ctx, c, fakeTarget)); got != "ok" {
		t.Errorf("GetRecords: %s, want ok (rule spent)", got)
	}
	// remove is idempotent.
	removeLimit()
	removeLimit()
	if got := code(listShards(ctx, c, fakeTarget)); got != "ok" {
		t.Errorf("ListShards: %s, want ok (rule removed)", got)
	}
	// Match filters on the body: one shard only.
	a.Inject(faultnet.Rule{Fault: faultnet.Throttled(), Match: func(op string, body []byte) bool {
		return bytes.Contains(body, []byte(`"shardId-000000000000"`))
	}})
	if got := code(getShardIterator(ctx, c, fakeTarget)); got != "ProvisionedThroughputExceededException" {
		t.Errorf("GetShardIterator shard 0: %s", got)
	}
	_, err := c.kinesis.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000002"), ShardIteratorType: kinesistypes.ShardIteratorTypeTrimHorizon})
	if got := code(err); got != "ok" {
		t.Errorf("GetShardIterator shard 2: %s, want ok", got)
	}
	// A spent rule's remove does nothing; Clear removes the rest.
	removeSpent := a.Inject(faultnet.Rule{Fault: faultnet.ServiceUnavailable(), Times: 1, Ops: []string{"PutRecord"}})
	_, _ = c.kinesis.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("k"), Data: []byte("x")})
	removeSpent()
	a.Clear()
	if got := code(getShardIterator(ctx, c, fakeTarget)); got != "ok" {
		t.Errorf("GetShardIterator after Clear: %s", got)
	}
	want := map[string]faultnet.Counts{
		"GetRecords":       {Calls: 3, Forwarded: 2, Faulted: 1},
		"ListShards":       {Calls: 3, Forwarded: 1, Faulted: 2},
		"GetShardIterator": {Calls: 3, Forwarded: 2, Faulted: 1},
		"PutRecord":        {Calls: 1, Faulted: 1},
	}
	got := map[string]faultnet.Counts{}
	for op := range want {
		got[op] = a.Calls(op)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
	if all := a.Calls(""); all != (faultnet.Counts{Calls: 10, Forwarded: 5, Faulted: 5}) {
		t.Errorf("Calls(\"\") %+v", all)
	}
}

// faultedSequence makes n calls through a layer seeded with seed and a rule
// of rate 0.3, and returns which were faulted.
func faultedSequence(t *testing.T, seed int64, n int) []bool {
	t.Helper()
	a := newAWS(t, faultnet.Kinesis, newFake(t).URL())
	a.SetSeed(seed)
	a.Inject(faultnet.Rule{Fault: faultnet.InternalFailure(), Rate: 0.3})
	c := newClients(t, noRetries, a.URL(), "", "")
	out := make([]bool, n)
	for i := range out {
		out[i] = getRecords(t.Context(), c, fakeTarget) != nil
	}
	return out
}

// TestRateSeeded: Rate draws from the layer's seeded generator, so a seed
// gives the same faulted calls on every run; another seed gives others;
// the share is about the rate.
func TestRateSeeded(t *testing.T) {
	const n = 200
	first, again, other := faultedSequence(t, 42, n), faultedSequence(t, 42, n), faultedSequence(t, 43, n)
	if d := cmp.Diff(first, again); d != "" {
		t.Errorf("same seed, other faults (-first +again):\n%s", d)
	}
	if cmp.Equal(first, other) {
		t.Errorf("seeds 42 and 43 faulted the same calls")
	}
	faulted := 0
	for _, f := range first {
		if f {
			faulted++
		}
	}
	// Binomial(200, 0.3): mean 60, sd 6.5; the seed is fixed, so this cannot flake.
	if faulted < 30 || faulted > 90 {
		t.Errorf("%d of %d faulted at rate 0.3", faulted, n)
	}
}

// TestInjectPanics: a fault the service does not have, or a rule out of
// range, is a programmer's error.
func TestInjectPanics(t *testing.T) {
	a := newAWS(t, faultnet.SQS, newFake(t).URL())
	for name, r := range map[string]faultnet.Rule{
		"no fault":       {},
		"kinesis-only":   {Fault: faultnet.ExpiredIterator()},
		"dynamodb-only":  {Fault: faultnet.ThrottlingException()},
		"negative Times": {Fault: faultnet.Throttled(), Times: -1},
		"Rate over 1":    {Fault: faultnet.Throttled(), Rate: 1.5},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if v := recover(); v == nil || !strings.HasPrefix(fmt.Sprint(v), "faultnet: ") {
					t.Errorf("recovered %v, want a faultnet panic", v)
				}
			}()
			a.Inject(r)
		})
	}
}

// TestPartialFailurePutRecords: every third record fails with the code; the
// stand-in gets only the others, and the answer keeps request order.
func TestPartialFailurePutRecords(t *testing.T) {
	up := newFake(t)
	a := newAWS(t, faultnet.Kinesis, up.URL())
	a.Inject(faultnet.Rule{Fault: faultnet.PartialFailure(3, "ProvisionedThroughputExceededException")})
	c := newClients(t, noRetries, a.URL(), "", "")
	var entries []kinesistypes.PutRecordsRequestEntry
	for i := range 7 {
		entries = append(entries, kinesistypes.PutRecordsRequestEntry{Data: []byte(fmt.Sprintf("r%d", i)), PartitionKey: aws.String("k")})
	}
	out, err := c.kinesis.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: entries})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt32(out.FailedRecordCount) != 2 || len(out.Records) != 7 {
		t.Fatalf("FailedRecordCount %d, %d records; want 2 of 7", aws.ToInt32(out.FailedRecordCount), len(out.Records))
	}
	for i, r := range out.Records {
		failed := (i+1)%3 == 0
		if failed != (r.ErrorCode != nil) || failed == (r.SequenceNumber != nil) {
			t.Errorf("record %d: %+v, failed %v", i, r, failed)
		}
		if failed && (aws.ToString(r.ErrorCode) != "ProvisionedThroughputExceededException" || !strings.Contains(aws.ToString(r.ErrorMessage), "in stream s")) {
			t.Errorf("record %d: %s %s", i, aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage))
		}
	}
	got := up.got("PutRecords")
	if len(got) != 1 {
		t.Fatalf("stand-in got %d PutRecords", len(got))
	}
	var sent struct {
		StreamName string
		Records    []struct{ Data []byte }
	}
	if err := json.Unmarshal(got[0], &sent); err != nil {
		t.Fatal(err)
	}
	var data []string
	for _, r := range sent.Records {
		data = append(data, string(r.Data))
	}
	if d := cmp.Diff([]string{"r0", "r1", "r3", "r4", "r6"}, data); d != "" || sent.StreamName != "s" {
		t.Errorf("stand-in got stream %q, records (-want +got):\n%s", sent.StreamName, d)
	}
}

// TestPartialFailureAll: when every entry fails, nothing reaches the
// stand-in; SendMessageBatch reports every entry in Failed.
func TestPartialFailureAll(t *testing.T) {
	up := newFake(t)
	a := newAWS(t, faultnet.SQS, up.URL())
	a.Inject(faultnet.Rule{Fault: faultnet.PartialFailure(1, "RequestThrottled")})
	c := newClients(t, noRetries, "", "", a.URL())
	out, err := c.sqs.SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String("http://127.0.0.1/000000000000/q"), Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("1")}, {Id: aws.String("b"), MessageBody: aws.String("2")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Successful) != 0 || len(out.Failed) != 2 || aws.ToString(out.Failed[1].Id) != "b" || aws.ToString(out.Failed[1].Code) != "RequestThrottled" || out.Failed[1].SenderFault {
		t.Errorf("answer %+v", out)
	}
	if n := len(up.got("SendMessageBatch")); n != 0 {
		t.Errorf("stand-in got %d batches, want 0", n)
	}
	// The fault applies only to batch writes: a rule without Ops leaves SendMessage alone.
	if err := sendMessage(t.Context(), c, fakeTarget); err != nil {
		t.Errorf("SendMessage: %v", err)
	}
}

// TestLostResponse: the write reaches the stand-in, the client gets
// ConditionalCheckFailedException.
func TestLostResponse(t *testing.T) {
	up := newFake(t)
	a := newAWS(t, faultnet.DynamoDB, up.URL())
	a.Inject(faultnet.Rule{Ops: []string{"PutItem"}, Fault: faultnet.LostResponse(), Times: 1})
	c := newClients(t, defaultRetries, "", a.URL(), "")
	var ccf *dynamodbtypes.ConditionalCheckFailedException
	if err := putItem(t.Context(), c, fakeTarget); !errors.As(err, &ccf) {
		t.Fatalf("PutItem: %v, want ConditionalCheckFailedException", err)
	}
	if n := len(up.got("PutItem")); n != 1 {
		t.Errorf("stand-in got %d PutItem, want 1", n)
	}
}

// TestCutBody: the call reaches the stand-in; the SDK gets a truncated
// answer and fails to read it.
func TestCutBody(t *testing.T) {
	up := newFake(t)
	a := newAWS(t, faultnet.Kinesis, up.URL())
	a.Inject(faultnet.Rule{Ops: []string{"PutRecords"}, Fault: faultnet.CutBody()})
	c := newClients(t, noRetries, a.URL(), "", "")
	_, err := c.kinesis.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []kinesistypes.PutRecordsRequestEntry{{Data: []byte("x"), PartitionKey: aws.String("k")}}})
	var de *smithy.DeserializationError
	if !errors.As(err, &de) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("PutRecords: %v, want a deserialization error with unexpected EOF", err)
	}
	if n := len(up.got("PutRecords")); n != 1 {
		t.Errorf("stand-in got %d PutRecords, want 1", n)
	}
}

// TestLatency: a Latency fault delays the call by at least its duration;
// the client giving up ends the wait without a call to the stand-in.
func TestLatency(t *testing.T) {
	up := newFake(t)
	a := newAWS(t, faultnet.Kinesis, up.URL())
	const d = 300 * time.Millisecond
	a.Inject(faultnet.Rule{Fault: faultnet.Latency(d), Times: 1})
	c := newClients(t, noRetries, a.URL(), "", "")
	start := time.Now()
	if err := getRecords(t.Context(), c, fakeTarget); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < d {
		t.Errorf("call took %v, want at least %v", took, d)
	}
	a.Inject(faultnet.Rule{Fault: faultnet.Latency(time.Hour)})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := getRecords(ctx, c, fakeTarget); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GetRecords: %v, want the deadline", err)
	}
	if err := a.Close(); err != nil { // waits for the abandoned call's handler
		t.Fatal(err)
	}
	if got := a.Calls("GetRecords"); got != (faultnet.Counts{Calls: 2, Forwarded: 1, Faulted: 2}) {
		t.Errorf("counts %+v, want one forwarded", got)
	}
}

// TestStreamsAsBytesArrive: an answer's bytes reach the client as the
// stand-in sends them (as SubscribeToShard's events must): the fake sends
// a first part and waits for the client to have it before it ends the
// answer, so a layer that buffered would hold the test until its deadline.
func TestStreamsAsBytesArrive(t *testing.T) {
	up := newFake(t)
	got := make(chan struct{})
	up.setAnswer("SubscribeToShard", func(w http.ResponseWriter, _ []byte) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		_, _ = w.Write([]byte("first event"))
		_ = http.NewResponseController(w).Flush()
		select {
		case <-got:
			_, _ = w.Write([]byte(", second event"))
		case <-time.After(30 * time.Second):
		}
	})
	a := newAWS(t, faultnet.Kinesis, up.URL())
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, a.URL()+"/", strings.NewReader(`{}`))
	req.Header.Set("X-Amz-Target", "Kinesis_20131202.SubscribeToShard")
	start := time.Now()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len("first event"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first event" {
		t.Fatalf("first part %q, %v", first, err)
	}
	if took := time.Since(start); took >= 30*time.Second {
		t.Fatalf("first part came only when the stand-in ended the answer (%v)", took)
	}
	close(got)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != ", second event" {
		t.Errorf("rest %q, %v", rest, err)
	}
}
