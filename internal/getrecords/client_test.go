package getrecords

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	smithy "github.com/aws/smithy-go"
)

// answer is one canned HTTP answer of the fake Kinesis endpoint.
type answer struct {
	status  int
	body    []byte
	chunked bool // no Content-Length
}

// endpoint is an httptest server that answers Kinesis calls with canned
// answers, in order, the last one to every later call (retries), and checks
// each request looks like the SDK's.
type endpoint struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	answers []answer
	calls   []string // X-Amz-Target of each request
}

func newEndpoint(t *testing.T) *endpoint {
	e := &endpoint{t: t}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

// answer sets the answers of the next calls.
func (e *endpoint) answer(a ...answer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answers = a
}

func (e *endpoint) callCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.calls)
}

func (e *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	e.mu.Lock()
	e.calls = append(e.calls, r.Header.Get("X-Amz-Target"))
	if len(e.answers) == 0 {
		e.mu.Unlock()
		e.t.Errorf("unexpected call %s", r.Header.Get("X-Amz-Target"))
		w.WriteHeader(500)
		return
	}
	a := e.answers[0]
	if len(e.answers) > 1 {
		e.answers = e.answers[1:]
	}
	e.mu.Unlock()
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" {
		e.t.Errorf("request not signed or not awsJson1_1: %v", r.Header)
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.1")
	h.Set("X-Amzn-Requestid", "req-test")
	if !a.chunked {
		h.Set("Content-Length", strconv.Itoa(len(a.body)))
	}
	w.WriteHeader(a.status)
	if a.chunked && len(a.body) > 1 {
		w.Write(a.body[:len(a.body)/2])
		w.(http.Flusher).Flush()
		w.Write(a.body[len(a.body)/2:])
		return
	}
	w.Write(a.body)
}

// client returns a real Kinesis client of the endpoint making at most
// attempts attempts per call, without backoff between them.
//
// Tests allow a retry (attempts > 1) wherever they read a large body: the
// SDK's HTTP handler closes the request body as soon as the response's
// header arrived, and net/http, still checking that body for bytes beyond
// its Content-Length, then closes the connection under the response being
// read ("use of closed network connection", retried by the SDK since
// aws-sdk-go-v2#2949). On a loaded machine over loopback this hits a few
// calls in a hundred, with or without Fast.
func (e *endpoint) client(attempts int) *kinesis.Client {
	return newClient(e.srv.URL, attempts, nil)
}

func newClient(url string, attempts int, hc aws.HTTPClient) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		HTTPClient:   hc,
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = attempts
			o.RateLimiter = ratelimit.None
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		}),
	})
}

var getRecordsIn = &kinesis.GetRecordsInput{ShardIterator: aws.String("AAAAAAAAAAF+L6IxNVUqP2F3AMiMmJfV76u="), Limit: aws.Int32(1000)}

// modes are the two ways of calling GetRecords compared.
var modes = []struct {
	name string
	opts []func(*kinesis.Options)
}{
	{"sdk", nil},
	{"fast", []func(*kinesis.Options){Fast}},
}

// sharesOneBuffer reports whether the records' (non-empty) data lie one
// after the other in one buffer, as only Decode lays them out.
func sharesOneBuffer(recs []types.Record) bool {
	var prev []byte
	for _, r := range recs {
		if len(r.Data) == 0 {
			continue
		}
		if prev != nil && uintptr(unsafe.Pointer(unsafe.SliceData(r.Data))) != uintptr(unsafe.Pointer(unsafe.SliceData(prev)))+uintptr(len(prev)) {
			return false
		}
		prev = r.Data
	}
	return true
}

// within reports whether b lies inside buf.
func within(b, buf []byte) bool {
	p, lo := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(buf))
}

// TestClientAnswers calls GetRecords through a real kinesis.Client against
// an HTTP server returning the answers of kinesis-local and AWS, with and
// without Fast: the outputs are the same, request ids included, and Fast
// really decoded them.
func TestClientAnswers(t *testing.T) {
	bodies := map[string][]byte{"1000 records of 512 B": genBody(1000, 512, 7)}
	for _, name := range validFixtures {
		bodies[name] = readFixture(t, name)
	}
	for name, body := range bodies {
		for _, chunked := range []bool{false, true} {
			t.Run(name+"/chunked="+strconv.FormatBool(chunked), func(t *testing.T) {
				e := newEndpoint(t)
				// Ten attempts: under load the closed-connection race (see
				// client) can hit the same large body several times running.
				c := e.client(10)
				var outs []*kinesis.GetRecordsOutput
				for _, m := range modes {
					e.answer(answer{status: 200, body: body, chunked: chunked})
					out, err := c.GetRecords(t.Context(), getRecordsIn, m.opts...)
					if err != nil {
						t.Fatalf("%s: %v", m.name, err)
					}
					if id, _ := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata); id != "req-test" {
						t.Errorf("%s: request id %q", m.name, id)
					}
					outs = append(outs, out)
				}
				if eq, diff := equalOutputs(outs[0], outs[1]); !eq {
					t.Fatalf("(-sdk +fast):\n%s", diff)
				}
				if recs := outs[1].Records; len(recs) > 2 && !sharesOneBuffer(recs) {
					t.Error("the fast path's records do not share one data buffer: not decoded by Decode")
				}
				// The answer's data buffer comes with it (ResultMetadata),
				// where it has data at all; never with the SDK's answer.
				if DataOf(outs[0]) != nil {
					t.Error("DataOf gives a buffer for the SDK's own answer")
				}
				hasData := false
				for _, r := range outs[1].Records {
					hasData = hasData || len(r.Data) > 0
				}
				data := DataOf(outs[1])
				if hasData != (data != nil) {
					t.Fatalf("DataOf(fast answer) = %v for an answer with data %v", data, hasData)
				}
				for _, r := range outs[1].Records {
					if len(r.Data) > 0 && !within(r.Data, data.b) {
						t.Fatal("a record's data lies outside DataOf's buffer")
					}
				}
				data.Release()
			})
		}
	}
}

// TestClientErrors checks that error answers, and 200 answers Decode does
// not accept, come back exactly as without Fast: the SDK's typed errors
// (errors.As), codes and messages.
func TestClientErrors(t *testing.T) {
	tests := []struct {
		name  string
		a     answer
		check func(t *testing.T, err error)
	}{
		{"throttled (AWS)", answer{status: 400, body: readFixture(t, "error-throughput.json")}, func(t *testing.T, err error) {
			var throttled *types.ProvisionedThroughputExceededException
			if !errors.As(err, &throttled) {
				t.Fatalf("not a ProvisionedThroughputExceededException: %T %v", err, err)
			}
			if !strings.HasPrefix(throttled.ErrorMessage(), "Rate exceeded for shard") {
				t.Errorf("message %q", throttled.ErrorMessage())
			}
		}},
		{"expired iterator (AWS)", answer{status: 400, body: readFixture(t, "error-expired.json")}, func(t *testing.T, err error) {
			var expired *types.ExpiredIteratorException
			if !errors.As(err, &expired) {
				t.Fatalf("not an ExpiredIteratorException: %T %v", err, err)
			}
		}},
		{"resource not found (kinesis-local)", answer{status: 400, body: []byte(`{"__type":"ResourceNotFoundException","message":"Stream arn arn:aws:kinesis:us-east-1:000000000000:stream/nope not found"}`)},
			func(t *testing.T, err error) {
				var missing *types.ResourceNotFoundException
				if !errors.As(err, &missing) {
					t.Fatalf("not a ResourceNotFoundException: %T %v", err, err)
				}
			}},
		{"500 without a body (kinesis-local)", answer{status: 500}, func(t *testing.T, err error) {
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != "UnknownError" {
				t.Fatalf("not the SDK's UnknownError: %T %v", err, err)
			}
		}},
		{"200 with bad data", answer{status: 200, body: []byte(`{"Records":[{"Data":"!!!!"}]}`)}, func(t *testing.T, err error) {
			var de *smithy.DeserializationError
			if !errors.As(err, &de) {
				t.Fatalf("not a DeserializationError: %T %v", err, err)
			}
		}},
		{"200 truncated", answer{status: 200, body: []byte(`{"Records":[{"Data":"QQ=="`)}, func(t *testing.T, err error) {
			var de *smithy.DeserializationError
			if !errors.As(err, &de) {
				t.Fatalf("not a DeserializationError: %T %v", err, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEndpoint(t)
			c := e.client(3)
			var msgs []string
			for _, m := range modes {
				e.answer(tt.a)
				out, err := c.GetRecords(t.Context(), getRecordsIn, m.opts...)
				if err == nil {
					t.Fatalf("%s: no error: %+v", m.name, out)
				}
				tt.check(t, err)
				msgs = append(msgs, err.Error())
			}
			if msgs[0] != msgs[1] {
				t.Errorf("errors differ:\nsdk:  %s\nfast: %s", msgs[0], msgs[1])
			}
		})
	}
}

// TestClientRetriesThrottling checks the SDK's retry around the fast
// deserializer: a throttled attempt is retried (signed again), and the
// next attempt's 200 answer is decoded by Decode.
func TestClientRetriesThrottling(t *testing.T) {
	e := newEndpoint(t)
	body := genBody(3, 16, 1)
	e.answer(answer{status: 400, body: readFixture(t, "error-throughput.json")}, answer{status: 200, body: body})
	out, err := e.client(3).GetRecords(t.Context(), getRecordsIn, Fast)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.callCount(); n < 2 {
		t.Fatalf("%d calls, want a retry", n)
	}
	want, _ := sdkDecode(body)
	if eq, diff := equalOutputs(want, out); !eq || !sharesOneBuffer(out.Records) {
		t.Fatalf("(-sdk +fast):\n%s", diff)
	}
}

// TestFastElsewhere checks that Fast changes nothing for other operations,
// and that giving it twice is harmless.
func TestFastElsewhere(t *testing.T) {
	e := newEndpoint(t)
	c := e.client(3)
	e.answer(answer{status: 200, body: []byte(`{"ShardIterator":"it"}`)})
	it, err := c.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon}, Fast)
	if err != nil || aws.ToString(it.ShardIterator) != "it" {
		t.Fatalf("GetShardIterator with Fast: %v, %+v", err, it)
	}
	body := genBody(3, 8, 2)
	e.answer(answer{status: 200, body: body})
	out, err := c.GetRecords(t.Context(), getRecordsIn, Fast, Fast)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sdkDecode(body)
	if eq, diff := equalOutputs(want, out); !eq {
		t.Fatalf("(-sdk +fast):\n%s", diff)
	}
}

// failingBody yields its bytes, then err.
type failingBody struct {
	r   *bytes.Reader
	err error
}

func (b *failingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		err = b.err
	}
	return n, err
}

func (b *failingBody) Close() error { return nil }

type transportFunc func(*http.Request) (*http.Response, error)

func (f transportFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// TestClientBodyReadError checks that a body that fails while read gives
// the SDK's error, as without Fast: the SDK reads the same bytes and the
// same error.
func TestClientBodyReadError(t *testing.T) {
	body := genBody(5, 64, 3)
	readErr := errors.New("connection reset by peer")
	hc := transportFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}}, ContentLength: int64(len(body)),
			Body: &failingBody{r: bytes.NewReader(body[:len(body)/2]), err: readErr}, Request: r}, nil
	})
	c := newClient("http://kinesis.test", 1, hc)
	var msgs []string
	for _, m := range modes {
		_, err := c.GetRecords(context.Background(), getRecordsIn, m.opts...)
		if !errors.Is(err, readErr) {
			t.Fatalf("%s: %v, want the read error", m.name, err)
		}
		msgs = append(msgs, err.Error())
	}
	if msgs[0] != msgs[1] {
		t.Errorf("errors differ:\nsdk:  %s\nfast: %s", msgs[0], msgs[1])
	}
}
