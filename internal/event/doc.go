// Package event decodes the JSON payload of an AWS Lambda Kinesis invocation
// without reflection.
//
// DecodeKinesis is a drop-in replacement for json.Unmarshal into
// events.KinesisEvent from github.com/aws/aws-lambda-go: it accepts the
// same inputs and produces the same values (keys matched case-insensitively,
// unknown and tumbling-window fields ignored, escapes and invalid UTF-8
// handled the same way), and additionally refuses what the adapter cannot
// settle: a payload without a Records array, a record that is not a Kinesis
// record, or a record whose sequence number is missing or not a decimal
// number. Errors are *SyntaxError for malformed JSON, *RecordError for a bad
// record, and errors wrapping ErrNotKinesis for a payload of the wrong kind.
//
// It makes one pass over the payload and a constant number of allocations
// per call: the strings of all records share one buffer holding only the
// bytes they need, and all record data is base64-decoded into one arena. It
// is several times faster than encoding/json (see the benchmarks). A record
// laid out like the one before it (as Lambda writes them) is read by that
// record's template: the bytes between its varying values compared at once,
// and only those values scanned (template.go); any other record is parsed
// field by field, which alone decides results and errors.
//
// Usage:
//
//	ev, err := event.DecodeKinesis(payload)
//	if err != nil {
//		return err // *event.SyntaxError, *event.RecordError or event.ErrNotKinesis
//	}
//	for _, r := range ev.Records {
//		handle(r.ShardID, r.SequenceNumber, r.PartitionKey, r.Data)
//	}
//
// The package is pure: no goroutines, no I/O, no state shared between calls.
package event
