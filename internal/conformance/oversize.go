package conformance

import (
	"strings"
	"testing"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/internal/publish"
)

// oversizeCases are the rows of the semantics table about a record whose
// counted copy can never be written: within a few bytes of the Kinesis
// record limit, the copy's headers push it over (review fault 5g). It ends
// at once, as at the cap, in both modes; it is handled once.
func oversizeCases() []Case {
	key := "key-big"
	big := "big-0" + strings.Repeat("x", publish.MaxRecordSize-len(key)-len("big-0")-1)
	retry := func(Handling, *lambdaadapter.Message) lambdaadapter.Outcome { return lambdaadapter.Retry(errHandler) }
	return []Case{
		{
			Name: "OversizeCopyDeadLetterStream", Row: "Retry(err), counted, its copy too large to write: dead-lettered as it arrived (dead-letter stream)",
			Records: []Record{{Key: key, Raw: []byte(big)}},
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxAttempts(3), lambdaadapter.WithDeadLetterStream(DeadLetterStream)},
			Script:  retry,
			Check: func(t *testing.T, r *Result) {
				handlings(t, r, big, 1)
				noCopies(t, r)
				dl := r.StreamRecords(DeadLetterStream)
				if len(dl) != 1 || dl[0].Payload != big || dl[0].Key != key || len(dl[0].Headers) != 0 {
					t.Errorf("%d dead letters, want the record as it arrived", len(dl))
				}
			},
		},
		{
			Name: "OversizeCopyNoTarget", Row: "Retry(err), counted, its copy too large to write: retired (no dead-letter target)",
			Records: []Record{{Key: key, Raw: []byte(big)}, {Key: key, Payload: "after-0"}},
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxAttempts(3)},
			Script:  retry,
			Check: func(t *testing.T, r *Result) {
				handlings(t, r, big, 1)
				for _, c := range r.Copies() {
					if c.Payload == big {
						t.Errorf("a copy of the oversize record was written")
					}
				}
				handlings(t, r, "after-0", 3) // the next record of its key is not held up
			},
		},
	}
}
