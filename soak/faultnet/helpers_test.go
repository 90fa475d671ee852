package faultnet_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// retries is how a test client retries.
type retries int

const (
	noRetries      retries = iota // one attempt: the fault reaches the caller as AWS sent it
	defaultRetries                // the SDK's standard retryer, as in production
)

// clients are SDK clients of all three services, connected to one endpoint
// each, with their own HTTP transport so that a test can close its idle
// connections.
type clients struct {
	kinesis  *kinesis.Client
	dynamodb *dynamodb.Client
	sqs      *sqs.Client
	tr       *http.Transport
}

// newClients returns SDK clients on the given endpoints ("" for none).
// Their idle connections are closed when the test ends.
func newClients(t testing.TB, r retries, kinesisURL, dynamodbURL, sqsURL string) *clients {
	t.Helper()
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:  &http.Client{Transport: tr},
	}
	switch r {
	case noRetries:
		cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	case defaultRetries:
		cfg.Retryer = func() aws.Retryer { return retry.NewStandard() }
	}
	c := &clients{tr: tr}
	if kinesisURL != "" {
		c.kinesis = kinesis.NewFromConfig(cfg, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(kinesisURL) })
	}
	if dynamodbURL != "" {
		c.dynamodb = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(dynamodbURL) })
	}
	if sqsURL != "" {
		c.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(sqsURL) })
	}
	return c
}

// status returns the HTTP status of the answer err came from, or 0.
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// newAWS starts an AWS layer in front of upstream, closed when the test ends.
func newAWS(t testing.TB, svc faultnet.Service, upstream string) *faultnet.AWS {
	t.Helper()
	a, err := faultnet.NewAWS(svc, upstream)
	if err != nil {
		t.Fatalf("NewAWS: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("AWS.Close: %v", err)
		}
	})
	return a
}

// fake is a small stand-in of all three services for the unit tests: it
// answers the few operations the tests call, as the stand-ins do, and
// records every request. It listens on 127.0.0.1 and is closed when the
// test ends.
type fake struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}

	mu    sync.Mutex
	calls []fakeCall
	// answer, when set, answers op instead of the defaults.
	answer map[string]func(w http.ResponseWriter, body []byte)
}

type fakeCall struct {
	op   string
	body []byte
}

func newFake(t testing.TB) *fake {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	f := &fake{ln: ln, done: make(chan struct{}), answer: map[string]func(http.ResponseWriter, []byte){}}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 2 * time.Minute} // longer than any test deadline: the fake never closes a connection first
	go func() {
		defer close(f.done)
		_ = f.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = f.srv.Close()
		<-f.done
	})
	return f
}

func (f *fake) URL() string { return "http://" + f.ln.Addr().String() }

// setAnswer makes the fake answer op with fn.
func (f *fake) setAnswer(op string, fn func(w http.ResponseWriter, body []byte)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer[op] = fn
}

// n returns the number of requests the fake received.
func (f *fake) n() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// got returns the requests of op the fake received.
func (f *fake) got(op string) [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]byte
	for _, c := range f.calls {
		if c.op == op {
			out = append(out, c.body)
		}
	}
	return out
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	var body []byte
	buf := make([]byte, 4096)
	for {
		n, err := r.Body.Read(buf)
		body = append(body, buf[:n]...)
		if err != nil {
			break
		}
	}
	target := r.Header.Get("X-Amz-Target")
	op := target
	for i := len(target) - 1; i >= 0; i-- {
		if target[i] == '.' {
			op = target[i+1:]
			break
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, fakeCall{op: op, body: body})
	fn := f.answer[op]
	f.mu.Unlock()
	if fn != nil {
		fn(w, body)
		return
	}
	var in map[string]json.RawMessage
	_ = json.Unmarshal(body, &in)
	var out any
	ct := "application/x-amz-json-1.0"
	switch op {
	case "PutRecords":
		ct = "application/x-amz-json-1.1"
		var recs []json.RawMessage
		_ = json.Unmarshal(in["Records"], &recs)
		res := make([]map[string]string, len(recs))
		for i := range recs {
			res[i] = map[string]string{"SequenceNumber": fmt.Sprint(1000 + i), "ShardId": "shardId-000000000000"}
		}
		out = map[string]any{"FailedRecordCount": 0, "Records": res, "EncryptionType": "NONE"}
	case "PutRecord", "GetRecords", "ListShards", "GetShardIterator", "DescribeStreamSummary":
		ct = "application/x-amz-json-1.1"
		out = map[string]any{"ShardId": "shardId-000000000000", "SequenceNumber": "1", "Records": []any{}, "Shards": []any{}, "ShardIterator": "it", "NextShardIterator": "it2", "MillisBehindLatest": 0}
	case "SendMessageBatch":
		var entries []struct{ Id, MessageBody string }
		_ = json.Unmarshal(in["Entries"], &entries)
		var ok []map[string]string
		for _, e := range entries {
			sum := md5.Sum([]byte(e.MessageBody))
			ok = append(ok, map[string]string{"Id": e.Id, "MessageId": "m-" + e.Id, "MD5OfMessageBody": hex.EncodeToString(sum[:])})
		}
		out = map[string]any{"Successful": ok}
	case "SendMessage":
		var m struct{ MessageBody string }
		_ = json.Unmarshal(body, &m)
		sum := md5.Sum([]byte(m.MessageBody))
		out = map[string]any{"MessageId": "m-1", "MD5OfMessageBody": hex.EncodeToString(sum[:])}
	default: // DynamoDB writes and reads, SQS others
		out = map[string]any{}
	}
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Amzn-Requestid", "fake")
	_, _ = w.Write(b)
}

// within fails the test unless cond holds within a generous deadline,
// checking often.
func within(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within 30s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
