package lease

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Retries of a lease-store call within its deadline.
//
// A caller such as the consumer gives every call a deadline (a third of the
// lease duration), and a lease must be renewed well within the lease
// duration. The SDK's standard retryer backs a throttled call off for up to
// a second before its first retry and two before its second: with a 1 s
// deadline (a 3 s lease) one throttling answer made the call fail at its
// deadline, and a table throttling a third of the calls for a few seconds
// left leases unrenewed long enough to fence them. So, for a call with a
// deadline, the store lets the client's retryer decide what is retryable
// and keep its retry quota, but spaces the attempts by the time left: full
// jitter over an exponential step that starts at a sixteenth of the time
// left and is capped at a quarter of it, with up to callMaxAttempts
// attempts, so that several attempts fit before the deadline. A call
// without a deadline keeps the client's retryer as it is.
const (
	callMaxAttempts = 8
	callMinBackoff  = 5 * time.Millisecond
)

// within returns the per-call options of a call made with ctx: none when
// ctx has no deadline.
func within(ctx context.Context) []func(*dynamodb.Options) {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	left := time.Until(dl)
	return []func(*dynamodb.Options){func(o *dynamodb.Options) {
		if r, ok := o.Retryer.(aws.RetryerV2); ok {
			o.Retryer = boundedRetryer{RetryerV2: r, cap: max(left/4, callMinBackoff)}
		}
	}}
}

// boundedRetryer is the client's retryer with the attempts spaced within
// a call's deadline (see within).
type boundedRetryer struct {
	aws.RetryerV2
	cap time.Duration
}

func (r boundedRetryer) MaxAttempts() int { return max(r.RetryerV2.MaxAttempts(), callMaxAttempts) }

// RetryDelay is full jitter over cap/4 · 2^(attempt-1), at most cap.
func (r boundedRetryer) RetryDelay(attempt int, _ error) (time.Duration, error) {
	step := r.cap / 4
	for i := 1; i < attempt && step < r.cap; i++ {
		step *= 2
	}
	step = min(max(step, callMinBackoff), r.cap)
	return rand.N(step) + 1, nil
}
