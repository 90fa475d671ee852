package event

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// benchSizes are the event shapes benchmarked: the last is about 6.5 MB,
// Lambda's payload limit for synchronous invocations.
var benchSizes = []struct{ records, dataBytes int }{
	{100, 512},
	{1000, 512},
	{10000, 100},
}

// BenchmarkDecodeKinesis compares DecodeKinesis with json.Unmarshal into
// events.KinesisEvent on the same payloads. The goal is at most a quarter
// of encoding/json's ns/op and a constant allocation count.
func BenchmarkDecodeKinesis(b *testing.B) {
	for _, size := range benchSizes {
		payload := genEvent(size.records, size.dataBytes, 1)
		name := fmt.Sprintf("%drecords_%dB", size.records, size.dataBytes)
		b.Run(name+"/event", func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeKinesis(payload); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/event_no_templates", func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			noTemplates = true
			defer func() { noTemplates = false }()
			for b.Loop() {
				if _, err := DecodeKinesis(payload); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/encoding_json", func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				var ev events.KinesisEvent
				if err := json.Unmarshal(payload, &ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeKinesisEscaped measures the slow path: every string field
// has escapes (here base64 with "\/", which some encoders emit).
func BenchmarkDecodeKinesisEscaped(b *testing.B) {
	payload := []byte(`{"Records":[`)
	for i := range 1000 {
		if i > 0 {
			payload = append(payload, ',')
		}
		payload = fmt.Appendf(payload, `{"kinesis":{"partitionKey":"k\u00e9y-%d","sequenceNumber":"4959033827149025660855969253836157109592157598913658%04d","data":"%s","approximateArrivalTimestamp":1545084650.987},"eventSource":"aws:kinesis","eventID":"shardId-000000000006:4959033827149025660855969253836157109592157598913658%04d","awsRegion":"us-east-2","eventSourceARN":"arn:aws:kinesis:us-east-2:123456789012:stream\/lambda-stream"}`,
			i, i, `SGVsbG8v`+strings.Repeat(`\/`, 24), i)
	}
	payload = append(payload, "]}"...)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeKinesis(payload); err != nil {
			b.Fatal(err)
		}
	}
}
