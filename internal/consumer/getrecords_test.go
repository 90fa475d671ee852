package consumer

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/shardsettle/lambdaadapter/internal/message"
)

// TestGetRecordsOptions checks that every GetRecords call of a consumer
// carries the fast decoder: its options put a deserializer of their own in
// place of the SDK's "OperationDeserializer" on a GetRecords stack.
func TestGetRecordsOptions(t *testing.T) {
	c := newConsumer(t, Config{Kinesis: newStream(1), Owner: "w1"}, handler(newRecorder()))
	var o kinesis.Options
	for _, fn := range c.getRecordsOpts {
		fn(&o)
	}
	stack := middleware.NewStack("GetRecords", smithyhttp.NewStackRequest)
	sdk := middleware.DeserializeMiddlewareFunc("OperationDeserializer", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
		middleware.DeserializeOutput, middleware.Metadata, error,
	) {
		return next.HandleDeserialize(ctx, in)
	})
	stack.Deserialize.Add(sdk, middleware.After)
	for _, fn := range o.APIOptions {
		if err := fn(stack); err != nil {
			t.Fatal(err)
		}
	}
	if m, _ := stack.Deserialize.Get("OperationDeserializer"); fmt.Sprintf("%T", m) == fmt.Sprintf("%T", sdk) {
		t.Fatal("GetRecords calls keep the SDK's deserializer")
	}
}

// kinesisEndpoint is a one-shard stream behind HTTP, as a real
// kinesis.Client talks to it: ListShards, GetShardIterator and GetRecords
// (one answer with records, then empty ones).
func kinesisEndpoint(t *testing.T, records string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		switch r.Header.Get("X-Amz-Target") {
		case "Kinesis_20131202.ListShards":
			io.WriteString(w, `{"Shards":[{"ShardId":"shardId-000000000000","HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"340282366920938463463374607431768211455"},`+
				`"SequenceNumberRange":{"StartingSequenceNumber":"49680806382702797274772113167038461120679885867514331138"}}]}`)
		case "Kinesis_20131202.GetShardIterator":
			io.WriteString(w, `{"ShardIterator":"it-0"}`)
		case "Kinesis_20131202.GetRecords":
			if strings.Contains(string(in), `"it-0"`) {
				io.WriteString(w, `{"ChildShards":null,"MillisBehindLatest":0,"NextShardIterator":"it-1","Records":`+records+`}`)
				return
			}
			io.WriteString(w, `{"ChildShards":null,"MillisBehindLatest":0,"NextShardIterator":"it-1","Records":[]}`)
		default:
			w.WriteHeader(400)
			io.WriteString(w, `{"__type":"UnknownOperationException"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestConsumerThroughSDKClient runs the consumer against a real
// kinesis.Client, with the fast decoder and with the SDK's own, and checks
// the handler sees the same messages either way.
func TestConsumerThroughSDKClient(t *testing.T) {
	const n = 50
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"ApproximateArrivalTimestamp":1.796321909%03dE9,"Data":%q,"EncryptionType":"NONE","PartitionKey":"k\u00e9%d","SequenceNumber":"4968080638270279727477211316703846112067988586751433%04d"}`,
			i, base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "payload %d \xff", i)), i%5, i)
	}
	b.WriteByte(']')
	srv := kinesisEndpoint(t, b.String())

	var runs [][]string
	for _, fast := range []bool{true, false} {
		client := kinesis.New(kinesis.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
			Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
		var mu sync.Mutex
		var seen []string
		h := message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("%s %s %q %s", m.SequenceNumber, m.PartitionKey, m.Payload, m.ArrivalTime.Format(time.RFC3339Nano)))
			return message.Ack()
		})
		c := newConsumer(t, Config{Kinesis: client, StreamARN: "arn:aws:kinesis:us-east-1:000000000000:stream/s", Start: TrimHorizon(), Owner: "w1"}, handler(h))
		if !fast {
			c.getRecordsOpts = nil
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		waitFor(t, fmt.Sprintf("%d records", n), func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == n })
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		slices.Sort(seen)
		runs = append(runs, seen)
	}
	if !slices.Equal(runs[0], runs[1]) {
		t.Fatalf("the handler saw different messages:\nfast: %q\nsdk:  %q", runs[0], runs[1])
	}
	if want := fmt.Sprintf("%s k\u00e92 %q 2026-12-03T18:18:29.002Z", "49680806382702797274772113167038461120679885867514330002", "payload 2 \xff"); !slices.Contains(runs[0], want) {
		t.Errorf("no message %s in %q", want, runs[0][:3])
	}
}
