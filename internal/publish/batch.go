package publish

import (
	"context"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/awserr"
)

// attempts is what a batch write keeps about one of its entries across the
// requests that carry it.
type attempts struct {
	last       error // the entry's last failure
	lastKind   awserr.Kind
	unanswered bool // a request that carried it got no answer (noAnswer)
}

// entryOutcome is what one request's response says about one entry: nil
// err when it was written, else its failure, its kind and what that means
// for a retry.
type entryOutcome struct {
	err *EntryError
	k   awserr.Kind
	c   class
}

// batchRequests is the part of a batch write that differs between
// PutRecords (Publisher.PutBatch) and SendMessageBatch (Queue.SendBatch):
// how entries go out in one request and how results are recorded. Entries
// are named by index (j) in the write's own list.
type batchRequests interface {
	// request sends the pending entries in one request with the call
	// options of n. It returns the call's error, or the outcome of each
	// pending entry, in order; a response that does not say what became
	// of every entry is a badResponse error.
	request(ctx context.Context, pending []int, n *note) ([]entryOutcome, error)
	// written records entry j written: the k-th of the last request.
	written(j, k int)
	// attempts returns entry j's attempts.
	attempts(j int) *attempts
	// fail records entry j failed for good with err.
	fail(j int, err error)
	// missing returns the error of entries whose stream or queue does not
	// exist, cause the service's answer, and whether the whole write's
	// target is missing (a call's error, not an entry's: later requests to
	// it fail without a call).
	missing(cause error, call bool) error
	// logRetry logs the next attempt, after d, of n entries.
	logRetry(ctx context.Context, attempt int, d time.Duration, n int, err error)
}

// sendBatch writes pending, one request at a time, retrying with backoff
// the entries that failed for a reason worth retrying (throttling, a 5xx or
// a transport failure of the call; a retryable entry code) until each is
// settled or ctx ends. It is the one retry loop of PutBatch and SendBatch.
func sendBatch(ctx context.Context, r batchRequests, op target, bo *backoff, pending []int) {
	giveUp := func(pending []int, why error) {
		for _, j := range pending {
			a := r.attempts(j)
			r.fail(j, gaveUp(op, a.last, a.lastKind, why))
		}
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		if err := ctx.Err(); err != nil {
			giveUp(pending, err)
			return
		}
		n := getNote()
		outs, err := r.request(ctx, pending, n)
		if _, bad := err.(badResponse); n.done(err) || bad {
			for _, j := range pending {
				r.attempts(j).unanswered = true
			}
		}
		var lastErr error
		if err != nil {
			switch k, c := classifyCall(ctx, err); c {
			case classNotFound:
				err := r.missing(err, true)
				for _, j := range pending {
					r.fail(j, err)
				}
				return
			case classPermanent:
				err := op.refused(k, err)
				for _, j := range pending {
					r.fail(j, err)
				}
				return
			case classCanceled:
				for _, j := range pending {
					if a := r.attempts(j); a.last == nil {
						// The call itself was cut short: report its error.
						a.last, a.lastKind = err, awserr.Canceled
					}
				}
				giveUp(pending, ctx.Err())
				return
			default:
				for _, j := range pending {
					a := r.attempts(j)
					a.last, a.lastKind = err, k
				}
				lastErr = err
			}
		} else {
			still := pending[:0]
			for k, j := range pending {
				o := outs[k]
				switch {
				case o.err == nil:
					r.written(j, k)
				case o.c == classNotFound:
					r.fail(j, r.missing(o.err, false))
				case o.c == classPermanent:
					r.fail(j, op.refused(o.k, o.err))
				default:
					a := r.attempts(j)
					a.last, a.lastKind = o.err, o.k
					lastErr = o.err
					still = append(still, j)
				}
			}
			pending = still
		}
		if len(pending) == 0 {
			return
		}
		d, werr := bo.wait(ctx, attempt)
		if werr != nil {
			giveUp(pending, werr)
			return
		}
		r.logRetry(ctx, attempt+1, d, len(pending), lastErr)
	}
}
