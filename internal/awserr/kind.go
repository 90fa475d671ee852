// Package awserr classifies the errors of AWS SDK v2 calls into a small,
// closed set of kinds, and carries the one error type that publish, lease
// and idempotency wrap their failures in.
//
// Classify looks at the SDK's typed exceptions (kinesis/types,
// dynamodb/types, sqs/types) with errors.As, at the error code of a
// smithy.APIError, at the HTTP status of a *smithyhttp.ResponseError and at
// the transport errors the SDK returns (RequestSendError,
// DeserializationError, net.Error, io.ErrUnexpectedEOF, context errors);
// never at a message. ClassifyCode does the same for the bare error code of
// a failed batch entry (PutRecords, SendMessageBatch).
//
//	switch awserr.Classify(err) {
//	case awserr.Throttled: // back off and retry
//	case awserr.NotFound:  // the stream, queue or table does not exist
//	}
//
// Error is an operation's failure as a package reports it: its message
// begins with the package's name, the operation and the resource, and it
// matches (errors.Is) the package's sentinel for its kind (Sentinels), the
// cause and one more error of the package's choosing.
//
// The package has no state; everything in it is safe for concurrent use.
package awserr

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"

	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	qtypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Kind is what a failed AWS call means for its caller. The set is closed:
// every error is exactly one kind, Other when none of the others fits.
type Kind uint8

const (
	// Other is an error no caller branches on: an answer of the service
	// that none of the kinds below describes (a 4xx without a known code),
	// or an error that is not an AWS one.
	Other Kind = iota
	// Throttled is a request the service refused for its rate: the SDK's
	// throttling exceptions (ProvisionedThroughputExceededException,
	// LimitExceededException, KMSThrottlingException, RequestThrottled,
	// ThrottlingException...) or an HTTP 429. Nothing was applied; retry
	// with backoff.
	Throttled
	// NotFound is a request on a stream, queue or table that does not
	// exist (ResourceNotFoundException, QueueDoesNotExist).
	NotFound
	// ConditionFailed is a conditional write whose condition did not hold
	// (ConditionalCheckFailedException). Nothing was written.
	ConditionFailed
	// Invalid is a request the service refused as malformed
	// (ValidationException, InvalidArgumentException,
	// InvalidMessageContents), for example a key of another schema.
	Invalid
	// TooLarge is a request the service refused for its size
	// (BatchRequestTooLong, ItemCollectionSizeLimitExceededException).
	TooLarge
	// AccessDenied is a request the caller may not make, or whose KMS key
	// it may not use (AccessDeniedException, KMSAccessDeniedException,
	// KMSDisabledException, KMSNotFoundException...).
	AccessDenied
	// InUse is a resource in a state that refuses the request: a table or
	// stream that already exists, or is being created, updated or deleted
	// (ResourceInUseException).
	InUse
	// Unsupported is an operation the service does not know
	// (UnknownOperationException), as from a local stand-in.
	Unsupported
	// ServerError is a fault the service answered with: a 5xx, or a code
	// of an internal failure (InternalFailure, ServiceUnavailable...). The
	// request was not applied; retry with backoff.
	ServerError
	// NoAnswer is a request whose answer never came or could not be read:
	// the connection was reset or cut, the attempt timed out, the body
	// ended early, or a success answer could not be decoded. The service
	// may have applied it.
	NoAnswer
	// NotSent is a request that never left: the connection could not be
	// opened (the dial failed). Nothing was applied; retry with backoff.
	NotSent
	// Canceled is a call cut short by its context (context.Canceled)
	// outside any attempt's transport error.
	Canceled

	kinds // the number of kinds
)

var kindNames = [kinds]string{
	Other:           "other",
	Throttled:       "throttled",
	NotFound:        "not found",
	ConditionFailed: "condition failed",
	Invalid:         "invalid",
	TooLarge:        "too large",
	AccessDenied:    "access denied",
	InUse:           "in use",
	Unsupported:     "unsupported",
	ServerError:     "server error",
	NoAnswer:        "no answer",
	NotSent:         "not sent",
	Canceled:        "canceled",
}

// String returns the kind's name, e.g. "throttled" or "not found".
func (k Kind) String() string {
	if k >= kinds {
		return "kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

// codeKinds are the error codes, of a call or of a batch entry, with the
// kind they mean. Invalid and AccessDenied list exactly the entry codes a
// batch write does not retry.
var codeKinds = map[string]Kind{
	"ResourceNotFoundException":               NotFound,
	"QueueDoesNotExist":                       NotFound,
	"AWS.SimpleQueueService.NonExistentQueue": NotFound,

	"ProvisionedThroughputExceededException": Throttled,
	"LimitExceededException":                 Throttled,
	"KMSThrottlingException":                 Throttled,
	"KmsThrottled":                           Throttled,
	"RequestThrottled":                       Throttled,
	"RequestThrottledException":              Throttled,
	"Throttling":                             Throttled,
	"ThrottlingException":                    Throttled,
	"ThrottledException":                     Throttled,
	"TooManyRequestsException":               Throttled,
	"RequestLimitExceeded":                   Throttled,
	"SlowDown":                               Throttled,
	"PriorRequestNotComplete":                Throttled,

	"InternalFailure":          ServerError,
	"InternalFailureException": ServerError,
	"InternalError":            ServerError,
	"InternalServerError":      ServerError,
	"ServiceUnavailable":       ServerError,
	"RequestTimeout":           ServerError,
	"RequestTimeoutException":  ServerError,

	"ValidationException":      Invalid,
	"InvalidArgumentException": Invalid,

	"AccessDeniedException":    AccessDenied,
	"KMSAccessDeniedException": AccessDenied,
	"KMSDisabledException":     AccessDenied,
	"KMSInvalidStateException": AccessDenied,
	"KMSNotFoundException":     AccessDenied,
	"KMSOptInRequired":         AccessDenied,

	"ConditionalCheckFailedException": ConditionFailed,
	"ResourceInUseException":          InUse,
	"UnknownOperationException":       Unsupported,
}

// ClassifyCode returns the kind of an error code alone, as a failed entry
// of a batch request carries it ("ProvisionedThroughputExceededException",
// "InternalFailure"): Other for a code it does not know or an empty one.
func ClassifyCode(code string) Kind {
	return codeKinds[code] // Other when absent
}

// Classify returns the kind of err, the error of an AWS SDK call (or of one
// attempt of it, as a retryer sees it). It decides, in order:
//
//  1. by the SDK's typed exception, when err wraps one it knows;
//  2. by the code of a smithy.APIError when that code means not found,
//     throttled or a server fault, or the error says the fault is the
//     server's;
//  3. by the HTTP status of the answer (*smithyhttp.ResponseError): 429 is
//     Throttled, a 5xx ServerError, a success that could not be read
//     NoAnswer; no status at all means no answer came: NotSent when the
//     dial failed, else NoAnswer; any other status is an answer that
//     refused the request: the code's kind, else Other;
//  4. by the code of a smithy.APIError without a status: its kind, else
//     Other;
//  5. by the transport error: a failed dial is NotSent; a failed send, an
//     unreadable answer (smithy.DeserializationError), a net.Error,
//     io.ErrUnexpectedEOF, io.EOF or context.DeadlineExceeded is NoAnswer;
//     context.Canceled is Canceled; anything else Other.
//
// Classify(nil) is Other.
func Classify(err error) Kind {
	if err == nil {
		return Other
	}
	if k, ok := typed(err); ok {
		return k
	}
	var api smithy.APIError
	code := Other
	if errors.As(err, &api) {
		code = ClassifyCode(api.ErrorCode())
		switch {
		case code == NotFound, code == Throttled, code == ServerError:
			return code
		case api.ErrorFault() == smithy.FaultServer:
			return ServerError
		}
	}
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) && resp.Response != nil {
		switch status := resp.HTTPStatusCode(); {
		case status == 0:
			// No answer came: the transport error says why.
			switch k := transport(err); k {
			case NotSent, NoAnswer:
				return k
			}
			return NoAnswer
		case status == 429:
			return Throttled
		case status >= 500:
			return ServerError
		case status < 300:
			// A success the client could not read: the request may or may
			// not have been applied.
			return NoAnswer
		}
		return code
	}
	if api != nil {
		return code
	}
	return transport(err)
}

// transport returns the kind of an error that carries no answer of the
// service.
func transport(err error) Kind {
	var dial *net.OpError
	if errors.As(err, &dial) && dial.Op == "dial" {
		return NotSent
	}
	var (
		send   *smithyhttp.RequestSendError
		deser  *smithy.DeserializationError
		netErr net.Error
	)
	switch {
	case errors.As(err, &send), errors.As(err, &deser), errors.As(err, &netErr),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, context.DeadlineExceeded):
		return NoAnswer
	case errors.Is(err, context.Canceled):
		return Canceled
	}
	return Other
}

// typed returns the kind of the SDK's typed exception err wraps, if it
// wraps one this package knows.
func typed(err error) (Kind, bool) {
	for _, t := range typedKinds {
		if t.is(err) {
			return t.kind, true
		}
	}
	return Other, false
}

// typedKinds are the SDK's typed exceptions with their kinds.
var typedKinds = []struct {
	kind Kind
	is   func(error) bool
}{
	{NotFound, as[*ktypes.ResourceNotFoundException]},
	{NotFound, as[*dtypes.ResourceNotFoundException]},
	{NotFound, as[*qtypes.QueueDoesNotExist]},

	{Throttled, as[*ktypes.ProvisionedThroughputExceededException]},
	{Throttled, as[*ktypes.LimitExceededException]},
	{Throttled, as[*ktypes.KMSThrottlingException]},
	{Throttled, as[*dtypes.ProvisionedThroughputExceededException]},
	{Throttled, as[*dtypes.RequestLimitExceeded]},
	{Throttled, as[*dtypes.ThrottlingException]},
	{Throttled, as[*dtypes.LimitExceededException]},
	{Throttled, as[*qtypes.RequestThrottled]},
	{Throttled, as[*qtypes.KmsThrottled]},

	{ConditionFailed, as[*dtypes.ConditionalCheckFailedException]},

	{Invalid, as[*ktypes.ValidationException]},
	{Invalid, as[*ktypes.InvalidArgumentException]},
	{Invalid, as[*qtypes.InvalidMessageContents]},
	{Invalid, as[*qtypes.InvalidAttributeName]},
	{Invalid, as[*qtypes.InvalidAttributeValue]},

	{TooLarge, as[*qtypes.BatchRequestTooLong]},
	{TooLarge, as[*dtypes.ItemCollectionSizeLimitExceededException]},

	{AccessDenied, as[*ktypes.AccessDeniedException]},
	{AccessDenied, as[*ktypes.KMSAccessDeniedException]},
	{AccessDenied, as[*ktypes.KMSDisabledException]},
	{AccessDenied, as[*ktypes.KMSInvalidStateException]},
	{AccessDenied, as[*ktypes.KMSNotFoundException]},
	{AccessDenied, as[*ktypes.KMSOptInRequired]},
	{AccessDenied, as[*qtypes.KmsAccessDenied]},
	{AccessDenied, as[*qtypes.KmsDisabled]},
	{AccessDenied, as[*qtypes.KmsInvalidState]},
	{AccessDenied, as[*qtypes.KmsNotFound]},
	{AccessDenied, as[*qtypes.KmsOptInRequired]},

	{InUse, as[*dtypes.ResourceInUseException]},
	{InUse, as[*ktypes.ResourceInUseException]},

	{ServerError, as[*ktypes.InternalFailureException]},
	{ServerError, as[*dtypes.InternalServerError]},
}

// as reports whether err wraps an error of type T.
func as[T error](err error) bool {
	_, ok := errors.AsType[T](err)
	return ok
}
