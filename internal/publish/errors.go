package publish

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"

	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ErrTooLarge is matched (with errors.Is) by the error of a record that
// Kinesis would refuse for its size: data (envelope included) plus partition
// key over the record limit (1 MiB, 1,048,576 bytes, unless WithMaxRecordSize
// says otherwise), or a partition key over 256 Unicode characters. Such a
// record is not sent and not retried.
var ErrTooLarge = errors.New("publish: record too large")

// ErrThrottled is matched by the error of a record that was still throttled
// (ProvisionedThroughputExceededException, LimitExceededException,
// KMSThrottlingException or another throttling code) when its context ended,
// or when the next attempt could not have started before the context's
// deadline. The record was not written. The error also matches the last
// throttling error seen and context.DeadlineExceeded or context.Canceled.
var ErrThrottled = errors.New("publish: throttled")

// ErrStreamNotFound is matched by the error of a record whose stream does not
// exist (ResourceNotFoundException). It is not retried; the message names the
// stream.
var ErrStreamNotFound = errors.New("publish: stream not found")

// ErrInvalidRecord is matched by the error of a record the publisher cannot
// send as it is: an empty Stream, or a header the RSK1 envelope refuses (the
// error then also matches envelope.ErrInvalidHeader). It is not sent and not
// retried.
var ErrInvalidRecord = errors.New("publish: invalid record")

// ErrMessageTooLarge is matched by the error of a queue message whose body
// plus attributes exceed the queue's size limit (see WithMaxMessageSize). It
// is not sent and not retried.
var ErrMessageTooLarge = errors.New("publish: message too large")

// ErrInvalidMessage is matched by the error of a queue message that SQS would
// refuse for its shape: an empty body, more than 10 attributes, an attribute
// with an empty name or value, or an empty queue URL. It is not sent and not
// retried.
var ErrInvalidMessage = errors.New("publish: invalid message")

// ErrQueueNotFound is matched by the error of a message sent to a queue that
// does not exist (QueueDoesNotExist). It is not retried; the message names the
// queue URL.
var ErrQueueNotFound = errors.New("publish: queue not found")

// EntryError is the failure of one entry of a batch request (PutRecords or
// SendMessageBatch) as the service reported it, for a call that otherwise
// succeeded. It is found with errors.As in a Result or QueueResult error.
type EntryError struct {
	// Code is the entry's error code, e.g.
	// "ProvisionedThroughputExceededException" or "InternalFailure". It is
	// empty when the response said nothing about the entry.
	Code string
	// Message is the service's message for the entry.
	Message string
}

// Error returns the code and message, e.g. "InternalFailure: Internal Service
// Failure".
func (e *EntryError) Error() string {
	switch {
	case e.Code == "":
		return e.Message
	case e.Message == "":
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// opError is the one wrapping every publish error carries: the operation
// (`put to stream "x"`), what went wrong, and the errors it matches.
type opError struct {
	op    target  // e.g. put to stream "orders"
	what  string  // e.g. "throttled until the deadline"; may be empty
	cause error   // printed after what; may be nil
	is    []error // sentinels matched besides cause
}

func (e *opError) Error() string {
	var b strings.Builder
	b.WriteString("publish: ")
	b.WriteString(e.op.verb)
	b.WriteByte(' ')
	b.WriteString(strconv.Quote(e.op.name))
	if e.what != "" {
		b.WriteString(": ")
		b.WriteString(e.what)
	}
	if e.cause != nil {
		b.WriteString(": ")
		b.WriteString(e.cause.Error())
	}
	return b.String()
}

func (e *opError) Unwrap() []error {
	errs := make([]error, 0, len(e.is)+1)
	errs = append(errs, e.is...)
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}

// target is what an operation writes to, for error messages; the message
// is built only when printed, so that the success path allocates nothing
// for it.
type target struct{ verb, name string }

func streamOp(stream string) target { return target{"put to stream", stream} }

func queueOp(url string) target { return target{"send to queue", url} }

// class is what a failed call or entry means for a retry.
type class uint8

const (
	classPermanent class = iota // not retried
	classThrottled              // retried with backoff; ErrThrottled when time runs out
	classRetryable              // 5xx, transport: retried with backoff
	classNotFound               // stream or queue missing: not retried
	classCanceled               // the caller's context ended
)

// throttleCodes are the error codes, of a call or of a batch entry, that
// mean "slow down".
var throttleCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"LimitExceededException":                 true,
	"KMSThrottlingException":                 true,
	"KmsThrottled":                           true,
	"RequestThrottled":                       true,
	"RequestThrottledException":              true,
	"Throttling":                             true,
	"ThrottlingException":                    true,
	"ThrottledException":                     true,
	"TooManyRequestsException":               true,
	"RequestLimitExceeded":                   true,
	"SlowDown":                               true,
	"PriorRequestNotComplete":                true,
}

// serverCodes are error codes of a call or entry that mean a transient fault
// on the service's side.
var serverCodes = map[string]bool{
	"InternalFailure":          true,
	"InternalFailureException": true,
	"InternalError":            true,
	"InternalServerError":      true,
	"ServiceUnavailable":       true,
	"RequestTimeout":           true,
	"RequestTimeoutException":  true,
}

// permanentEntryCodes are the per-entry error codes not worth retrying.
var permanentEntryCodes = map[string]bool{
	"AccessDeniedException":     true,
	"InvalidArgumentException":  true,
	"ValidationException":       true,
	"KMSAccessDeniedException":  true,
	"KMSDisabledException":      true,
	"KMSInvalidStateException":  true,
	"KMSNotFoundException":      true,
	"KMSOptInRequired":          true,
	"ResourceNotFoundException": true,
}

// badResponse is a response to a successful call that does not say what
// became of the write (no sequence number, entries missing). The write is
// taken as not done, and retried.
type badResponse string

func (e badResponse) Error() string { return string(e) }

// classifyCall classifies the error of a whole call. ctx is the caller's
// context: once it has ended, every error is classCanceled.
func classifyCall(ctx context.Context, err error) class {
	if ctx.Err() != nil {
		return classCanceled
	}
	var bad badResponse
	if errors.As(err, &bad) {
		return classRetryable
	}
	var (
		kNotFound    *ktypes.ResourceNotFoundException
		qNotFound    *sqstypes.QueueDoesNotExist
		kThroughput  *ktypes.ProvisionedThroughputExceededException
		kLimit       *ktypes.LimitExceededException
		kKMSThrottle *ktypes.KMSThrottlingException
		qThrottled   *sqstypes.RequestThrottled
		qKMSThrottle *sqstypes.KmsThrottled
	)
	switch {
	case errors.As(err, &kNotFound), errors.As(err, &qNotFound):
		return classNotFound
	case errors.As(err, &kThroughput), errors.As(err, &kLimit), errors.As(err, &kKMSThrottle),
		errors.As(err, &qThrottled), errors.As(err, &qKMSThrottle):
		return classThrottled
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		code := api.ErrorCode()
		switch {
		case code == "AWS.SimpleQueueService.NonExistentQueue":
			return classNotFound
		case throttleCodes[code]:
			return classThrottled
		case serverCodes[code], api.ErrorFault() == smithy.FaultServer:
			return classRetryable
		}
	}
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) && resp.Response != nil {
		switch status := resp.HTTPStatusCode(); {
		case status == 429:
			return classThrottled
		case status >= 500:
			return classRetryable
		case status < 300:
			// A success the client could not read: the write may or may
			// not have happened, and a retry at worst duplicates it.
			return classRetryable
		}
		return classPermanent
	}
	if api != nil {
		return classPermanent
	}
	var (
		send   *smithyhttp.RequestSendError
		deser  *smithy.DeserializationError
		netErr net.Error
	)
	switch {
	case errors.As(err, &send), errors.As(err, &deser), errors.As(err, &netErr),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return classRetryable
	case errors.Is(err, context.DeadlineExceeded):
		// A per-attempt timeout inside the client; the caller's context
		// is still alive.
		return classRetryable
	}
	return classPermanent
}

// classifyEntry classifies the error code of one failed batch entry.
func classifyEntry(code string, senderFault bool) class {
	switch {
	case code == "ResourceNotFoundException", code == "QueueDoesNotExist",
		code == "AWS.SimpleQueueService.NonExistentQueue":
		return classNotFound
	case throttleCodes[code]:
		return classThrottled
	case senderFault, permanentEntryCodes[code]:
		return classPermanent
	}
	return classRetryable
}

// noAnswer reports whether err, the error of one attempt of a call, leaves
// open whether the service applied the call: no AWS answer came (the
// connection was reset or cut, the attempt or the caller's context ran out,
// the answer could not be read, or a success answer did not say what became
// of the write). An AWS error answer (throttling, a 4xx or a 5xx) is taken
// as the call not applied: AWS documents those as failures.
func noAnswer(err error) bool {
	var bad badResponse
	if errors.As(err, &bad) {
		return true
	}
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) && resp.Response != nil && resp.HTTPStatusCode() != 0 {
		// An answer came; it was not readable only if it was a success.
		return resp.HTTPStatusCode() < 300
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return false
	}
	var dial *net.OpError
	if errors.As(err, &dial) && dial.Op == "dial" {
		return false // the request never left
	}
	var (
		send   *smithyhttp.RequestSendError
		deser  *smithy.DeserializationError
		netErr net.Error
	)
	return errors.As(err, &send) || errors.As(err, &deser) || errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
