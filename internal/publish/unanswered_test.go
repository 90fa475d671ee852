package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// unansweredCases are whole-call failures and whether they leave open that
// the call was applied.
var unansweredCases = []struct {
	name string
	err  error
	want bool
}{
	{"throughput exceeded", errThroughput, false},
	{"limit exceeded", errLimit, false},
	{"throttling code", errGeneric, false},
	{"internal failure", errInternal, false},
	{"503 answer", err500, false},
	{"connection reset", errSend, true},
	{"answer cut mid-body", &smithy.DeserializationError{Err: io.ErrUnexpectedEOF}, true},
	{"attempt timed out", &smithyhttp.RequestSendError{Err: context.DeadlineExceeded}, true},
	{"success answer unreadable", &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 200}}, Err: errors.New("bad body")}, true},
	{"connection refused", &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}, false},
}

// A record written after a call without an answer is reported Unanswered:
// the call may have been applied, so the record may exist twice. A call
// answered with an AWS error, or never sent, leaves it false.
func TestUnansweredCalls(t *testing.T) {
	for _, tc := range unansweredCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeKinesis{script: failTimes(1, tc.err)}
				p := newPublisher(t, f)
				rs := records(3, 8)
				for i, res := range p.PutBatch(t.Context(), rs) {
					if res.Err != nil || res.Unanswered != tc.want {
						t.Errorf("PutBatch result %d: error %v, unanswered %v; want no error, %v", i, res.Err, res.Unanswered, tc.want)
					}
				}
				f = &fakeKinesis{script: failTimes(1, tc.err)}
				p = newPublisher(t, f)
				if res, err := p.Put(t.Context(), rs[0]); err != nil || res.Unanswered != tc.want {
					t.Errorf("Put: error %v, unanswered %v; want no error, %v", err, res.Unanswered, tc.want)
				}
				q := newQueue(t, &fakeSQS{script: sqFail(1, tc.err)})
				for i, res := range q.SendBatch(t.Context(), testQueue, messages(3, 8)) {
					if res.Err != nil || res.Unanswered != tc.want {
						t.Errorf("SendBatch result %d: error %v, unanswered %v; want no error, %v", i, res.Err, res.Unanswered, tc.want)
					}
				}
			})
		})
	}
}

// Only the entries a call without an answer carried are reported, and a
// record that fails in the end after such a call is reported too.
func TestUnansweredEntries(t *testing.T) {
	t.Run("written", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeKinesis{script: func(n int, c *kcall) ([]string, error) {
				switch n {
				case 0: // entries 1 and 3 throttled, the others written
					return []string{"", "ProvisionedThroughputExceededException", "", "ProvisionedThroughputExceededException", ""}, nil
				case 1: // the retry of 1 and 3 gets no answer
					return nil, errSend
				}
				return nil, nil
			}}
			p := newPublisher(t, f)
			var got []bool
			for i, res := range p.PutBatch(t.Context(), records(5, 8)) {
				if res.Err != nil {
					t.Errorf("result %d: %v", i, res.Err)
				}
				got = append(got, res.Unanswered)
			}
			if want := fmt.Sprint([]bool{false, true, false, true, false}); fmt.Sprint(got) != want {
				t.Errorf("unanswered %v, want %v", got, want)
			}
		})
	})
	t.Run("failed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeKinesis{script: func(n int, c *kcall) ([]string, error) {
				if n == 0 {
					return nil, errSend
				}
				return nil, errValidation
			}}
			p := newPublisher(t, f)
			for i, res := range p.PutBatch(t.Context(), records(2, 8)) {
				if res.Err == nil || !res.Unanswered {
					t.Errorf("result %d: error %v, unanswered %v; want an error, true", i, res.Err, res.Unanswered)
				}
			}
		})
	})
}

// The SDK's own retryer makes the next attempt after a connection reset
// without the publisher seeing the first: a real client against a server
// that takes the first request and resets the connection, then answers.
// The record is reported Unanswered; after a refused connection it is not.
func TestUnansweredInsideTheSDK(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if calls.Add(1) == 1 {
			// Applied, but the answer is lost: reset the connection.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = io.WriteString(w, `{"FailedRecordCount":0,"Records":[{"SequenceNumber":"49590000000000000000000000001","ShardId":"shardId-000000000000"}]}`)
	}))
	defer srv.Close()
	client := func(endpoint string) *kinesis.Client {
		return kinesis.NewFromConfig(aws.Config{
			Region:      "eu-west-1",
			Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		}, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(endpoint) })
	}
	p := newPublisher(t, client(srv.URL))
	res := p.PutBatch(t.Context(), records(1, 8))[0]
	if res.Err != nil || !res.Unanswered {
		t.Errorf("after a reset: error %v, unanswered %v; want no error, true", res.Err, res.Unanswered)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d requests reached the server, want 2 (the SDK's retry)", n)
	}

	// A port nobody listens on: the request never leaves. Each attempt
	// dials it for real. The call's context ends after the sixth refusal,
	// from the client's retryer, so between attempts: a context that ends
	// while an attempt is under way rightly makes it count as no answer
	// (the SDK then reports the attempt cancelled, whatever it was doing).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	cctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var refusals atomic.Int32
	refusing := kinesis.NewFromConfig(aws.Config{
		Region:      "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	}, func(o *kinesis.Options) {
		o.BaseEndpoint = aws.String("http://" + closed)
		o.Retryer = cancelAfter{RetryerV2: retry.NewStandard(), n: &refusals, at: 6, cancel: cancel}
	})
	p = newPublisher(t, refusing, WithBackoff(time.Millisecond, 10*time.Millisecond))
	res = p.PutBatch(cctx, records(1, 8))[0]
	if res.Err == nil || res.Unanswered {
		t.Errorf("connection refused: error %v, unanswered %v; want an error, false", res.Err, res.Unanswered)
	}
	if n := refusals.Load(); n < 6 {
		t.Errorf("%d refused attempts, want at least 6", n)
	}
}

// cancelAfter is a retryer that counts the attempts it is asked about and
// calls cancel at the at-th.
type cancelAfter struct {
	aws.RetryerV2
	n      *atomic.Int32
	at     int32
	cancel context.CancelFunc
}

func (c cancelAfter) IsErrorRetryable(err error) bool {
	if c.n.Add(1) == c.at {
		c.cancel()
	}
	return c.RetryerV2.IsErrorRetryable(err)
}
