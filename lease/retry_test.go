package lease

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// TestWithinSpacesRetriesByTheDeadline: a call with a deadline gets the
// client's retryer with its delays capped at a quarter of the time left and
// at least callMaxAttempts attempts; a call without one keeps the
// retryer as it is.
func TestWithinSpacesRetriesByTheDeadline(t *testing.T) {
	if got := within(context.Background()); got != nil {
		t.Errorf("within(no deadline) = %d options, want none", len(got))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	o := dynamodb.Options{Retryer: retry.NewStandard()}
	for _, f := range within(ctx) {
		f(&o)
	}
	r, ok := o.Retryer.(boundedRetryer)
	if !ok {
		t.Fatalf("retryer %T, want boundedRetryer", o.Retryer)
	}
	if r.MaxAttempts() < callMaxAttempts {
		t.Errorf("MaxAttempts %d, want at least %d", r.MaxAttempts(), callMaxAttempts)
	}
	throttled := &retryableThrottle{}
	if !r.IsErrorRetryable(throttled) {
		t.Error("a throttling error is not retryable: the client's retryer no longer decides")
	}
	for attempt := 1; attempt <= callMaxAttempts; attempt++ {
		for range 100 {
			d, err := r.RetryDelay(attempt, throttled)
			if err != nil || d <= 0 || d > 250*time.Millisecond {
				t.Fatalf("RetryDelay(%d) = %v, %v; want in (0, 250ms]", attempt, d, err)
			}
		}
	}
}

// retryableThrottle is an error the standard retryer retries as throttling.
type retryableThrottle struct{}

func (retryableThrottle) Error() string        { return "ThrottlingException: Rate exceeded" }
func (retryableThrottle) ErrorCode() string    { return "ThrottlingException" }
func (retryableThrottle) ErrorMessage() string { return "Rate exceeded" }
func (retryableThrottle) ErrorFault() int      { return 0 }

// TestThrottledCallSucceedsWithinItsDeadline: through a real SDK client, a
// lease read answered ThrottlingException three times and then answered
// succeeds within a 1 s deadline (the consumer's call deadline with a 3 s
// lease). With the SDK's standard retryer alone it failed: three attempts,
// and a backoff of up to 1 s and then 2 s before its retries. (Worst case now: 62 + 125 + 250 ms of backoff.)
func TestThrottledCallSucceedsWithinItsDeadline(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if calls.Add(1) <= 3 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate exceeded"}`)
			return
		}
		fmt.Fprint(w, `{"Item":{"leaseKey":{"S":"orders:shardId-0"},"stream":{"S":"orders"},"leaseOwner":{"S":"w1"},"leaseCounter":{"N":"7"}}}`)
	}))
	defer srv.Close()
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  aws.AnonymousCredentials{},
	})
	d := NewDynamoDB(client, "leases")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	l, err := d.Get(ctx, Key{Stream: "orders", ShardID: "shardId-0"})
	if err != nil {
		t.Fatalf("Get after three throttling answers: %v (%d calls in %v), want the row within the deadline", err, calls.Load(), time.Since(start))
	}
	if l.Owner != "w1" || l.Counter != 7 {
		t.Errorf("lease %+v", l)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the deadline passed")
	}
}
