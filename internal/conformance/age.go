package conformance

import (
	"strings"
	"testing"
	"time"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
)

// ageCases are the rows of the semantics table about WithMaxRecordAge: a
// record older than the limit is not handled.
func ageCases() []Case {
	old := []Record{{Key: "k", Payload: "old-0", Headers: []string{"trace", "t-old"}}, {Key: "j", Payload: "old-1"}}
	fresh := []Record{{Key: "k", Payload: "fresh-0"}}
	return []Case{
		{
			Name: "MaxRecordAgeDeadLettered", Row: "WithMaxRecordAge: an older record is dead-lettered, not handled",
			Records: old, Wait: 2 * time.Hour, Later: fresh,
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxRecordAge(time.Hour), lambdaadapter.WithDeadLetterStream(DeadLetterStream)},
			Script:  ack,
			Check: func(t *testing.T, r *Result) {
				handledOnce(t, r, 1)
				handlings(t, r, "fresh-0", 1)
				noCopies(t, r)
				dls := r.StreamRecords(DeadLetterStream)
				if len(dls) != 2 {
					t.Fatalf("%d dead letters, want the two old records: %+v", len(dls), dls)
				}
				for _, dl := range dls {
					if !strings.HasPrefix(dl.Headers.Get("x-dead-letter-reason"), "max record age") {
						t.Errorf("dead letter of %s: reason %q, want max record age", dl.Payload, dl.Headers.Get("x-dead-letter-reason"))
					}
				}
				// Records of different keys: their dead letters may be
				// written in either order.
				found := false
				for _, dl := range dls {
					if dl.Payload == "old-0" {
						found = true
						if dl.Headers.Get("trace") != "t-old" {
							t.Errorf("dead letter of old-0 with headers %v, want its trace=t-old kept", dl.Headers)
						}
					}
				}
				if !found {
					t.Errorf("dead letters %+v, want one of old-0", dls)
				}
			},
		},
		{
			Name: "MaxRecordAgeDropped", Row: "WithMaxRecordAge without a dead-letter target: an older record is dropped",
			Records: old, Wait: 2 * time.Hour, Later: fresh,
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxRecordAge(time.Hour)},
			Script:  ack,
			Check: func(t *testing.T, r *Result) {
				handledOnce(t, r, 1)
				handlings(t, r, "fresh-0", 1)
				noCopies(t, r)
				if n := len(r.StreamRecords(DeadLetterStream)); n != 0 {
					t.Errorf("%d dead letters without a target", n)
				}
			},
		},
		{
			Name: "MaxRecordAgeYoungHandled", Row: "WithMaxRecordAge: a record younger than the limit is handled",
			Records: old, Wait: 30 * time.Minute, Later: fresh,
			Options: []lambdaadapter.SharedOption{lambdaadapter.WithMaxRecordAge(time.Hour), lambdaadapter.WithDeadLetterStream(DeadLetterStream)},
			Script:  ack,
			Check: func(t *testing.T, r *Result) {
				handledOnce(t, r, 3)
				if n := len(r.StreamRecords(DeadLetterStream)); n != 0 {
					t.Errorf("%d dead letters, want none", n)
				}
			},
		},
	}
}
