package publish_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/publish"
)

// printingKinesis stands in for *kinesis.Client: it prints each request and
// accepts every record.
type printingKinesis struct{ seq int }

func (k *printingKinesis) PutRecord(_ context.Context, in *kinesis.PutRecordInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	k.seq++
	fmt.Printf("PutRecord stream=%s key=%s data=%q\n", *in.StreamName, *in.PartitionKey, in.Data)
	shard, seq := "shardId-000000000000", strconv.Itoa(k.seq)
	return &kinesis.PutRecordOutput{ShardId: &shard, SequenceNumber: &seq}, nil
}

func (k *printingKinesis) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	fmt.Printf("PutRecords stream=%s entries=%d\n", *in.StreamName, len(in.Records))
	out := &kinesis.PutRecordsOutput{}
	for range in.Records {
		k.seq++
		shard, seq := "shardId-000000000000", strconv.Itoa(k.seq)
		out.Records = append(out.Records, ktypes.PutRecordsResultEntry{ShardId: &shard, SequenceNumber: &seq})
	}
	return out, nil
}

func ExamplePublisher_Put() {
	// In production: publish.NewPublisher(kinesis.NewFromConfig(cfg)).
	p, err := publish.NewPublisher(&printingKinesis{}, publish.WithPartitionKey("tenant-acme"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	// A header besides partition-key: the data carries the RSK1 envelope.
	res, err := p.Put(ctx, publish.Record{
		Stream:  "orders",
		Headers: envelope.Headers{{Name: "content-type", Value: "application/json"}},
		Payload: []byte(`{"id":1}`),
	})
	fmt.Println(res.SequenceNumber, err)

	// Only the key: the data is the payload as it is.
	res, err = p.Put(ctx, publish.Record{Stream: "orders", PartitionKey: "user-42", Payload: []byte(`{"id":2}`)})
	fmt.Println(res.SequenceNumber, err)

	results := p.PutBatch(ctx, []publish.Record{
		{Stream: "orders", PartitionKey: "a", Payload: []byte("1")},
		{Stream: "orders", PartitionKey: "b", Payload: []byte("2")},
	})
	for i, r := range results {
		fmt.Println(i, r.SequenceNumber, r.Err)
	}
	// Output:
	// PutRecord stream=orders key=tenant-acme data="RSK1\x00\x00\x00\x1fcontent-type: application/json\n{\"id\":1}"
	// 1 <nil>
	// PutRecord stream=orders key=user-42 data="{\"id\":2}"
	// 2 <nil>
	// PutRecords stream=orders entries=2
	// 0 3 <nil>
	// 1 4 <nil>
}

func ExampleDeadLetterBody() {
	body, err := publish.DeadLetterBody(publish.DeadLetter{
		Reason:          "handler: bad input",
		SourceStreamARN: "arn:aws:kinesis:eu-west-1:123456789012:stream/orders",
		ShardID:         "shardId-000000000001",
		SequenceNumber:  "4959",
		PartitionKey:    "user-42",
		Attempts:        3,
		FirstArrival:    time.Date(2024, 5, 1, 12, 0, 0, 123e6, time.UTC),
		DeadLetteredAt:  time.Date(2024, 5, 1, 12, 0, 5, 0, time.UTC),
		Headers:         envelope.Headers{{Name: "content-type", Value: "application/json"}},
		Payload:         []byte(`{"id":1}`),
	})
	fmt.Println(string(body), err)

	d, err := publish.ParseDeadLetterBody(body)
	fmt.Println(d.Reason, d.Attempts, string(d.Payload), err)
	// Output:
	// {"version":1,"reason":"handler: bad input","source_stream_arn":"arn:aws:kinesis:eu-west-1:123456789012:stream/orders","shard_id":"shardId-000000000001","sequence_number":"4959","partition_key":"user-42","attempts":3,"first_arrival":"2024-05-01T12:00:00.123Z","dead_lettered_at":"2024-05-01T12:00:05.000Z","headers":[{"name":"content-type","value":"application/json"}],"payload_base64":"eyJpZCI6MX0="} <nil>
	// handler: bad input 3 {"id":1} <nil>
}

func ExampleDeadLetterRecord() {
	r := publish.DeadLetterRecord("orders-dead-letters", publish.DeadLetter{
		Reason:       "handler: bad input\non two lines",
		PartitionKey: "user-42",
		Attempts:     3,
		Payload:      []byte(`{"id":1}`),
	})
	fmt.Println(r.Stream, r.PartitionKey)
	for name, value := range r.Headers.All() {
		fmt.Printf("%s: %s\n", name, value)
	}
	// Output:
	// orders-dead-letters user-42
	// x-dead-letter-reason: handler: bad input on two lines
	// x-dead-letter-attempts: 3
}

func ExampleParseDelayed() {
	d := publish.Delayed{
		StreamARN:    "arn:aws:kinesis:eu-west-1:123456789012:stream/orders",
		PartitionKey: "user-42",
		Payload:      []byte(`{"id":1}`),
		NotBefore:    time.Date(2024, 5, 1, 12, 15, 0, 0, time.UTC),
	}
	body, err := d.Body()
	fmt.Println(string(body), err)

	// The queue consumer tells its own messages from others.
	for _, b := range [][]byte{body, []byte("something else")} {
		got, ours, err := publish.ParseDelayed(b)
		fmt.Println(ours, got.PartitionKey, got.NotBefore.Format(time.RFC3339), err)
	}
	// Output:
	// {"kind":"lambdaadapter.delay/v1","stream_arn":"arn:aws:kinesis:eu-west-1:123456789012:stream/orders","partition_key":"user-42","not_before":"2024-05-01T12:15:00.000Z","headers":[],"payload_base64":"eyJpZCI6MX0="} <nil>
	// true user-42 2024-05-01T12:15:00Z <nil>
	// false  0001-01-01T00:00:00Z <nil>
}

func ExampleDelaySeconds() {
	for _, d := range []time.Duration{0, 1500 * time.Millisecond, 10 * time.Minute, time.Hour} {
		fmt.Println(d, publish.DelaySeconds(d))
	}
	// Output:
	// 0s 0
	// 1.5s 2
	// 10m0s 600
	// 1h0m0s 900
}
