package conformance

import (
	"fmt"
	"slices"
	"testing"
	"time"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/idempotency"
	"github.com/shardsettle/lambdaadapter/internal/publish"
)

// heldCases are the rows of the semantics table about a record whose
// idempotency key is claimed by a run in progress elsewhere (the
// idempotency wrapper's Retry matching idempotency.ErrInProgress), and the
// key a counted copy keeps.
func heldCases() []Case {
	held := lambdaadapter.Retry(fmt.Errorf("%w: orders#key (until later)", idempotency.ErrInProgress))
	// heldCheck: p was refused three times, then handled once; every
	// handling is attempt 1 of the original (no copy, no count); nothing
	// was written anywhere; the later record of its key came after it.
	heldCheck := func(p, later string) func(t *testing.T, r *Result) {
		return func(t *testing.T, r *Result) {
			hs := handlings(t, r, p, 4)
			attemptsAndCounts(t, hs, []int{1, 1, 1, 1}, []string{"", "", "", ""})
			noCopies(t, r)
			if n := len(r.StreamRecords(DeadLetterStream)); n != 0 {
				t.Errorf("%d dead letters, want none: the record was never attempted", n)
			}
			if n := len(r.World.SQS.Sent()); n != 0 {
				t.Errorf("%d SQS messages, want none", n)
			}
			if hl := handlings(t, r, later, 1); hl[0].At.Before(hs[3].At) {
				t.Errorf("%s handled before %s settled (per-key order)", later, p)
			}
		}
	}
	return []Case{
		{
			Name: "HeldElsewhereCap1", Row: "Retry matching idempotency.ErrInProgress (held elsewhere), counted: unsettled, no attempt counted (cap 1)",
			Records: oneKey("h1", 2),
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxAttempts(1)},
			Script:  failFirst(3, held, "h1-0"),
			Check:   heldCheck("h1-0", "h1-1"),
		},
		{
			Name: "HeldElsewhereCap3DeadLetter", Row: "Retry matching idempotency.ErrInProgress (held elsewhere), counted: unsettled, no copy, no dead letter (cap 3, target)",
			Records: oneKey("h3", 2),
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithDeadLetterStream(DeadLetterStream), lambdaadapter.WithDelayQueue(DelayQueue)},
			Script: func(h Handling, m *lambdaadapter.Message) lambdaadapter.Outcome {
				if h.Payload == "h3-0" && h.Call < 3 {
					if h.Call == 1 {
						return lambdaadapter.RetryAfter(10*time.Minute, held.Err()) // a long delay: not the delay queue either
					}
					return held
				}
				return lambdaadapter.Ack()
			},
			Check: heldCheck("h3-0", "h3-1"),
		},
		{
			Name: "CopiesKeepTheKey", Row: "Retry(err), counted: copies carry the original's coordinates (x-lambdaadapter-origin); idempotency's default key is the original's",
			Records: oneKey("ck", 1),
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithDelayQueue(DelayQueue)},
			Script: func(h Handling, m *lambdaadapter.Message) lambdaadapter.Outcome {
				switch h.Call {
				case 0:
					return lambdaadapter.Retry(errHandler)
				case 1:
					return lambdaadapter.RetryAfter(10*time.Minute, errHandler) // through the delay queue
				}
				return lambdaadapter.Ack()
			},
			Check: func(t *testing.T, r *Result) {
				hs := handlings(t, r, "ck-0", 3)
				attemptsAndCounts(t, hs, []int{1, 2, 3}, []string{"", "1", "2"})
				var orig string
				for _, rec := range r.World.Kinesis.Records(Stream) {
					if string(rec.Payload) == "ck-0" && rec.Headers.Get(publish.OriginHeader) == "" {
						orig = rec.ShardID + "#" + rec.SequenceNumber + "#0"
					}
				}
				cs := copies(t, r, "ck-0", "1", "2")
				for _, c := range cs {
					if got := c.Headers.Get(publish.OriginHeader); got != orig {
						t.Errorf("copy %s of ck-0: %s %q, want the original's %q", c.RetryCount, publish.OriginHeader, got, orig)
					}
				}
				keys := []string{hs[0].DefaultKey, hs[1].DefaultKey, hs[2].DefaultKey}
				if keys[0] == "" || slices.ContainsFunc(keys, func(k string) bool { return k != keys[0] }) {
					t.Errorf("default keys of the original and its copies: %q, want one key", keys)
				}
			},
		},
	}
}
