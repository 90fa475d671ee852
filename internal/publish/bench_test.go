package publish

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter/envelope"
)

// benchRecords returns n records of a 512-byte payload with a key and one
// header, so that each carries the envelope.
func benchRecords(n int) []Record {
	h := envelope.Headers{{Name: "content-type", Value: "application/json"}}
	rs := make([]Record, n)
	for i := range rs {
		payload := make([]byte, 512)
		copy(payload, fmt.Sprintf(`{"id":%d}`, i))
		rs[i] = Record{Stream: testARN, PartitionKey: fmt.Sprintf("user-%d", i), Headers: h, Payload: payload}
	}
	return rs
}

func BenchmarkPutBatch(b *testing.B) {
	for _, tt := range []struct {
		name    string
		headers bool
	}{{"envelope", true}, {"raw", false}} {
		b.Run(tt.name, func(b *testing.B) {
			k := &nopKinesis{}
			p := newPublisher(b, k)
			rs := benchRecords(1000)
			if !tt.headers {
				for i := range rs {
					rs[i].Headers = nil
				}
			}
			ctx := context.Background()
			b.SetBytes(int64(len(rs) * 512))
			b.ReportAllocs()
			for b.Loop() {
				for i, r := range p.PutBatch(ctx, rs) {
					if r.Err != nil {
						b.Fatalf("result %d: %v", i, r.Err)
					}
				}
			}
			b.ReportMetric(float64(k.calls)/float64(b.N), "calls/op")
		})
	}
}

func BenchmarkPut(b *testing.B) {
	k := &nopKinesis{}
	p := newPublisher(b, k)
	r := benchRecords(1)[0]
	ctx := context.Background()
	b.SetBytes(512)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Put(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(k.calls)/float64(b.N), "calls/op")
}

func BenchmarkPutBuffer(b *testing.B) {
	k := &nopKinesis{}
	p := newPublisher(b, k)
	r := benchRecords(1)[0]
	ctx := context.Background()
	var buf []byte
	b.SetBytes(512)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.PutBuffer(ctx, r, &buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSendBatch(b *testing.B) {
	f := &fakeSQS{}
	q := newQueue(b, f)
	ms := messages(100, 512)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		f.mu.Lock()
		f.calls, f.sent = f.calls[:0], f.sent[:0]
		f.mu.Unlock()
		for i, r := range q.SendBatch(ctx, testQueue, ms) {
			if r.Err != nil {
				b.Fatalf("result %d: %v", i, r.Err)
			}
		}
	}
}

func BenchmarkDeadLetterBody(b *testing.B) {
	d := sampleDeadLetter()
	d.Payload = make([]byte, 512)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DeadLetterBody(d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseDelayed(b *testing.B) {
	d := sampleDelayed()
	d.Payload = make([]byte, 512)
	d.NotBefore = time.Date(2024, 5, 1, 12, 15, 0, 0, time.UTC)
	body, err := d.Body()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ours, err := ParseDelayed(body); !ours || err != nil {
			b.Fatal(ours, err)
		}
	}
}
