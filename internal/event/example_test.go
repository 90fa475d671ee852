package event_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/event"
)

func ExampleDecodeKinesis() {
	payload := []byte(`{"Records":[{"kinesis":{"kinesisSchemaVersion":"1.0","partitionKey":"1",
		"sequenceNumber":"49590338271490256608559692538361571095921575989136588898",
		"data":"SGVsbG8sIHRoaXMgaXMgYSB0ZXN0Lg==","approximateArrivalTimestamp":1545084650.987,"encryptionType":"NONE"},
		"eventSource":"aws:kinesis","eventVersion":"1.0",
		"eventID":"shardId-000000000006:49590338271490256608559692538361571095921575989136588898",
		"eventName":"aws:kinesis:record","invokeIdentityArn":"arn:aws:iam::123456789012:role/lambda-role",
		"awsRegion":"us-east-2","eventSourceARN":"arn:aws:kinesis:us-east-2:123456789012:stream/lambda-stream"}]}`)

	ev, err := event.DecodeKinesis(payload)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range ev.Records {
		fmt.Println(r.ShardID, r.SequenceNumber)
		fmt.Println(r.PartitionKey, r.ArrivalTime.Format(time.RFC3339Nano), r.AWSRegion)
		fmt.Printf("%q\n", r.Data)
	}
	// Output:
	// shardId-000000000006 49590338271490256608559692538361571095921575989136588898
	// 1 2018-12-17T22:10:50.987Z us-east-2
	// "Hello, this is a test."
}

func ExampleDecodeKinesis_errors() {
	for _, payload := range []string{
		`{"Records":[{"kinesis":{"sequenceNumber":"1"}},{"kinesis":{"data":"QUJD"}}]}`,
		`{"Records":[{"body":"hello","eventSource":"aws:sqs"}]}`,
		`{"Records":[{"kinesis":{"sequenceNumber" "1"}}]}`,
	} {
		_, err := event.DecodeKinesis([]byte(payload))
		var re *event.RecordError
		var se *event.SyntaxError
		switch {
		case errors.Is(err, event.ErrNotKinesis):
			fmt.Println("wrong event type:", err)
		case errors.As(err, &re):
			fmt.Printf("bad record %d (%s): %v\n", re.Index, re.Field, err)
		case errors.As(err, &se):
			fmt.Printf("malformed at byte %d: %v\n", se.Offset, err)
		}
	}
	// Output:
	// bad record 1 (kinesis.sequenceNumber): event: record 1: kinesis.sequenceNumber missing
	// wrong event type: event: record 0: not a Kinesis record (eventSource "aws:sqs")
	// malformed at byte 41: event: invalid JSON at offset 41: expected ':' after object key
}
