//go:build unix

package getrecords

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// cpuTime returns the CPU time (user and system) this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClientGetRecords makes whole GetRecords calls of a real
// kinesis.Client (serialization, SigV4 signing, retry middleware, HTTP,
// deserialization) answered with 1,000 records of 512 bytes, through the
// SDK's deserializer and with Fast. cpu-µs/record is the process's CPU
// time per record read:
//
//   - httptest: an in-process HTTP server over loopback; its CPU (writing
//     the answer) is in the figure, the same for both;
//   - memory: the answer handed over by the HTTP client itself, no
//     network: the client stack alone.
func BenchmarkClientGetRecords(b *testing.B) {
	const records = 1000
	body := genBody(records, 512, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	defer srv.Close()
	memory := transportFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
		return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: int64(len(body)),
			Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}}, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
	})
	clients := []struct {
		name string
		c    *kinesis.Client
	}{
		{"httptest", newClient(srv.URL, 3, nil)},
		{"memory", newClient("http://kinesis.test", 3, memory)},
	}
	for _, cl := range clients {
		for _, m := range modes {
			b.Run(cl.name+"/"+m.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				ctx := context.Background()
				n := 0
				cpu := cpuTime()
				for b.Loop() {
					out, err := cl.c.GetRecords(ctx, getRecordsIn, m.opts...)
					if err != nil {
						b.Fatal(err)
					}
					if len(out.Records) != records {
						b.Fatalf("%d records", len(out.Records))
					}
					n++
				}
				cpu = cpuTime() - cpu
				b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(n*records), "cpu-µs/record")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*records), "ns/record")
			})
		}
	}
}
