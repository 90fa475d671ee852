package getrecords

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	fastb64 "github.com/shardsettle/lambdaadapter/internal/base64"
)

// benchSizes are the answers benchmarked: the consumer's default Limit with
// 512-byte payloads, and a full 10,000-record answer of small ones.
var benchSizes = []struct{ records, dataBytes int }{
	{1000, 512},
	{10000, 100},
}

// BenchmarkDeserialize compares the SDK's deserializer (awsJson1_1, as the
// kinesis client runs it: the body read into its pooled buffer, then
// decoded) with what Fast does instead (the body read into a pooled buffer
// sized by Content-Length, then Decode; fast-released also gives the
// answer's Data back, as the consumer does), on the same body. floor is one
// pass over the bytes plus the base64 decoding of the data, the least any
// decoder must do (with the vectorised base64 decoder Decode uses).
func BenchmarkDeserialize(b *testing.B) {
	for _, size := range benchSizes {
		body := genBody(size.records, size.dataBytes, 1)
		name := fmt.Sprintf("%drecords_%dB", size.records, size.dataBytes)
		perRecord := func(b *testing.B) {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size.records), "ns/record")
		}
		b.Run(name+"/sdk", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			r := bytes.NewReader(body)
			resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 200, Body: io.NopCloser(r), ContentLength: int64(len(body))}}
			for b.Loop() {
				r.Reset(body)
				out := &kinesis.GetRecordsOutput{}
				if err := sdkProtocol.DeserializeResponse(context.Background(), sdkOperation, kinesis.TypeRegistry, resp, out); err != nil {
					b.Fatal(err)
				}
			}
			perRecord(b)
		})
		// fast-released is fast as the consumer runs it: each answer's
		// Data is given back once its records are done with, and the next
		// answer is decoded into it.
		for _, released := range []bool{false, true} {
			sub := "/fast"
			if released {
				sub = "/fast-released"
			}
			b.Run(name+sub, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				r := bytes.NewReader(body)
				for b.Loop() {
					r.Reset(body)
					buf, err := readBody(r, int64(len(body)))
					if err != nil {
						b.Fatal(err)
					}
					_, data, ok := decodeInto(*buf, released)
					if !ok {
						b.Fatal("not accepted")
					}
					putBuffer(buf)
					data.Release()
				}
				perRecord(b)
			})
		}
		b.Run(name+"/floor", func(b *testing.B) {
			spans := dataSpans(body)
			dst := make([]byte, len(body))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if bytes.IndexByte(body, 0) >= 0 {
					b.Fatal("NUL")
				}
				off := 0
				for _, s := range spans {
					n, err := fastb64.Decode(dst[off:], body[s[0]:s[1]])
					if err != nil {
						b.Fatal(err)
					}
					off += n
				}
			}
			perRecord(b)
		})
	}
}

// dataSpans returns where the base64 text of each record's data is in a
// body of genBody.
func dataSpans(body []byte) [][2]int {
	var spans [][2]int
	key := []byte(`"Data":"`)
	for i := 0; ; {
		j := bytes.Index(body[i:], key)
		if j < 0 {
			return spans
		}
		start := i + j + len(key)
		end := start + bytes.IndexByte(body[start:], '"')
		spans = append(spans, [2]int{start, end})
		i = end
	}
}
