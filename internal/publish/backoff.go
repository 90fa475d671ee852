package publish

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/awserr"
)

// Default backoff of a Publisher and a Queue between two attempts.
const (
	// DefaultBackoffBase is the ceiling of the first backoff.
	DefaultBackoffBase = 50 * time.Millisecond
	// DefaultBackoffMax is the largest ceiling the backoff grows to.
	DefaultBackoffMax = 2 * time.Second
)

// backoff computes "full jitter" exponential backoff: before retry n
// (0-based) it waits a random duration in [0, min(max, base·2ⁿ)].
type backoff struct {
	base, max time.Duration
	// jitter returns a random duration in [0, ceiling]. Tests replace it.
	jitter func(ceiling time.Duration) time.Duration
}

func newBackoff() backoff {
	return backoff{base: DefaultBackoffBase, max: DefaultBackoffMax, jitter: fullJitter}
}

func fullJitter(ceiling time.Duration) time.Duration {
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling + 1)
}

func (b backoff) validate() error {
	if b.base <= 0 {
		return fmt.Errorf("publish: backoff base %s is not positive", b.base)
	}
	if b.max < b.base {
		return fmt.Errorf("publish: backoff max %s is below its base %s", b.max, b.base)
	}
	return nil
}

// ceiling returns min(max, base·2ⁿ) without overflowing.
func (b backoff) ceiling(n int) time.Duration {
	c := b.base
	for range n {
		if c >= b.max/2 {
			return b.max
		}
		c *= 2
	}
	return min(c, b.max)
}

// outOfTime is the reason wait gives when the backoff would end at or after
// the context's deadline. It matches context.DeadlineExceeded.
type outOfTime struct{}

func (outOfTime) Error() string { return "no time left before the deadline" }
func (outOfTime) Unwrap() error { return context.DeadlineExceeded }

var errOutOfTime error = outOfTime{}

// wait sleeps before retry n, or returns early: ctx.Err() when ctx ends
// during the sleep, errOutOfTime (without sleeping) when the sleep would reach
// ctx's deadline, so that the caller keeps the remaining time for itself.
func (b backoff) wait(ctx context.Context, n int) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	d := b.jitter(b.ceiling(n))
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Add(d).Before(deadline) {
		return d, errOutOfTime
	}
	if d <= 0 {
		return d, nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return d, ctx.Err()
	case <-t.C:
		return d, nil
	}
}

// gaveUp is the error of an item that was not written because time ran out:
// why is errOutOfTime or the context's error, last the item's last failure
// (nil when it was never attempted) and lastKind that failure's kind. It
// matches ErrThrottled when the last failure was throttling.
func gaveUp(op target, last error, lastKind awserr.Kind, why error) error {
	switch {
	case last == nil:
		return op.fail(awserr.Canceled, "not sent", why, nil)
	case lastKind == awserr.Throttled:
		return op.fail(lastKind, "gave up while throttled: "+why.Error(), last, why)
	}
	return op.fail(lastKind, "gave up: "+why.Error(), last, why)
}
