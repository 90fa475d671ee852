package otel

import (
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/shardsettle/lambdaadapter/observe"
)

// DefaultSystem is the messaging.system value of every span and metric
// unless WithSystem says otherwise. Kinesis has no registered value; the
// semantic conventions name a cloud service by its provider and product
// ("aws.dynamodb", and for messaging "aws.sns"), and "aws.kinesis" is the
// namespace of the registered aws.kinesis.stream_name attribute. The older
// underscore form of "aws_sqs" is kept by the conventions for
// compatibility only.
const DefaultSystem = "aws.kinesis"

// ScopeName is the instrumentation scope of the Tracer and the Meter: this
// package's import path.
const ScopeName = "github.com/shardsettle/lambdaadapter/observe/otel"

// Attribute keys this package sets that the semantic conventions do not
// register. The registered ones (messaging.*, aws.kinesis.stream_name,
// error.type, faas.*) come from go.opentelemetry.io/otel/semconv.
const (
	// AttrPartitionKey is a record's Kinesis partition key (span
	// attribute). It follows the conventions' pattern for system-specific
	// attributes ({system}.{property}) but is not registered.
	AttrPartitionKey = attribute.Key("aws.kinesis.partition_key")
	// AttrSubSequenceNumber is the index of a user record in its KPL
	// aggregate (span attribute; set on aggregated records only).
	AttrSubSequenceNumber = attribute.Key("lambdaadapter.sub_sequence_number")
	// AttrAttempt is the record's attempt: 1 on a first delivery (span
	// attribute).
	AttrAttempt = attribute.Key("lambdaadapter.attempt")
	// AttrOutcome is the handler's outcome kind: "ack", "drop", "retry",
	// "retry_after" (span and metric attribute).
	AttrOutcome = attribute.Key("lambdaadapter.outcome")
	// AttrAction is what the adapter did with the record (observe.Action:
	// "settled", "copy", "delay", "dead_letter", "retired", "unsettled";
	// span and metric attribute).
	AttrAction = attribute.Key("lambdaadapter.action")
	// AttrReason is set when the adapter concluded a record without its
	// handler: "malformed aggregate" or "max record age" (span attribute).
	AttrReason = attribute.Key("lambdaadapter.reason")
	// AttrBatchItemFailures is the number of item identifiers an
	// invocation reported (invocation span attribute).
	AttrBatchItemFailures = attribute.Key("lambdaadapter.batch_item_failures")
	// AttrCut is true on an invocation span when the deadline margin was
	// reached with records still running.
	AttrCut = attribute.Key("lambdaadapter.cut")
	// AttrLinkSource marks the invocation span's link to the Lambda
	// invocation's X-Ray trace: "aws.xray".
	AttrLinkSource = attribute.Key("lambdaadapter.link.source")
	// AttrWriteKind is the kind of a write: "copy", "delay", "dead_letter",
	// "reply" (metric attribute).
	AttrWriteKind = attribute.Key("lambdaadapter.write.kind")
	// AttrLeaseChange is what happened to a lease: "taken", "stolen",
	// "received", "lost", "handed_on", "released" (metric attribute).
	AttrLeaseChange = attribute.Key("lambdaadapter.lease.change")
)

// Values of the operation attributes.
const (
	operationProcess = "process"
	linkSourceXRay   = "aws.xray"
)

// streamName is the name of a stream given by name or ARN
// (arn:aws:kinesis:REGION:ACCOUNT:stream/NAME, or an enhanced fan-out
// consumer's …:stream/NAME/consumer/C:TS).
func streamName(s string) string {
	if !strings.HasPrefix(s, "arn:") {
		return s
	}
	i := strings.Index(s, ":stream/")
	if i < 0 {
		return s
	}
	s = s[i+len(":stream/"):]
	if j := strings.IndexByte(s, '/'); j >= 0 {
		s = s[:j]
	}
	return s
}

// failed reports whether a record's action is a failure: the record was
// not processed and stays unsettled, or gave up (dead letter, retired).
func failed(a observe.Action) bool {
	switch a {
	case observe.ActionUnsettled, observe.ActionDeadLetter, observe.ActionRetired:
		return true
	}
	return false
}

// errorType is the error.type of a failed write or checkpoint:
// observe.ErrorType (the AWS error code, else the name of the adapter's
// error it matches: "throttled", "lease_lost", "timeout"), else "_OTHER".
// Its values are few, so metrics stay cheap.
func errorType(err error) string {
	if t := observe.ErrorType(err); t != "" {
		return t
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// seconds is d in seconds; negative durations count as 0.
func seconds(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return d.Seconds()
}
