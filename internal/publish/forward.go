package publish

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotDelayed is matched by the error ForwardDelayed returns for a body
// that is not a delay message of this adapter.
var ErrNotDelayed = errors.New("publish: not a lambdaadapter delay message")

// ForwardDelayed handles messages received from a delay queue, given by
// their bodies: each one due at now (Delayed.Left) is written to its stream
// (all with one PutBatch through p), and each one not yet due is sent round
// delayQueue again through q for the rest of its wait. It returns one error
// per body: nil when the body was forwarded or sent round again (its message
// may be deleted), else why not (its message must come again: a write that
// failed, no Publisher or Queue, a body that is not a delay message, which
// matches ErrNotDelayed and is best left to the queue's redrive policy).
// Both modes' delay forwarders call it.
func ForwardDelayed(ctx context.Context, p *Publisher, q *Queue, delayQueue string, bodies []string, now time.Time) []error {
	errs := make([]error, len(bodies))
	var recs []Record
	var due []int // the bodies of recs
	for i, body := range bodies {
		d, ours, err := ParseDelayed([]byte(body))
		switch {
		case err != nil:
			errs[i] = err
			continue
		case !ours:
			errs[i] = ErrNotDelayed
			continue
		}
		if left, ok := d.Left(now); !ok {
			if q == nil || delayQueue == "" {
				errs[i] = errors.New("no delay queue (WithDelayQueue) to send a delay longer than 15 minutes round again")
				continue
			}
			if _, err := q.Send(ctx, delayQueue, QueueMessage{Body: body, Delay: left}); err != nil {
				errs[i] = fmt.Errorf("sending a delay message round again: %w", err)
			}
			continue
		}
		recs = append(recs, d.Record())
		due = append(due, i)
	}
	if len(recs) == 0 {
		return errs
	}
	if p == nil {
		for _, i := range due {
			errs[i] = errors.New("no Kinesis publisher to forward delayed records")
		}
		return errs
	}
	for j, res := range p.PutBatch(ctx, recs) {
		if res.Err != nil {
			errs[due[j]] = fmt.Errorf("forwarding a delayed record: %w", res.Err)
		}
	}
	return errs
}
