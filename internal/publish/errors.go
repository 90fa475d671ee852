package publish

import (
	"context"
	"errors"

	"github.com/shardsettle/lambdaadapter/internal/awserr"
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

// The sentinels each kind of a write's failure matches: a missing stream
// or queue, and throttling until time ran out.
var (
	streamErrs = awserr.Sentinels{awserr.NotFound: ErrStreamNotFound, awserr.Throttled: ErrThrottled}
	queueErrs  = awserr.Sentinels{awserr.NotFound: ErrQueueNotFound, awserr.Throttled: ErrThrottled}
)

// target is what an operation writes to, for error messages; the message
// is built only when printed, so that the success path allocates nothing
// for it.
type target struct {
	verb, name string
	errs       *awserr.Sentinels
}

func streamOp(stream string) target { return target{"put to stream", stream, &streamErrs} }

func queueOp(url string) target { return target{"send to queue", url, &queueErrs} }

// fail returns the error of the operation: kind k, what went wrong (may be
// empty: the text of the sentinel k matches, if any), the cause (may be
// nil) and one more error it matches (may be nil).
func (t target) fail(k awserr.Kind, what string, cause, also error) error {
	return &awserr.Error{Pkg: "publish", Op: t.verb, Resource: t.name, Kind: k, What: what, Cause: cause, Sentinels: t.errs, Also: also}
}

// refused returns the error of a call or entry the service refused for
// good: it matches only cause, whatever its kind (a ValidationException is
// not ErrInvalidRecord, which is the publisher's own check).
func (t target) refused(k awserr.Kind, cause error) error {
	return &awserr.Error{Pkg: "publish", Op: t.verb, Resource: t.name, Kind: k, Cause: cause}
}

// class is what a failed call or entry means for a retry.
type class uint8

const (
	classPermanent class = iota // not retried
	classThrottled              // retried with backoff; ErrThrottled when time runs out
	classRetryable              // 5xx, transport: retried with backoff
	classNotFound               // stream or queue missing: not retried
	classCanceled               // the caller's context ended
)

// badResponse is a response to a successful call that does not say what
// became of the write (no sequence number, entries missing). The write is
// taken as not done, and retried.
type badResponse string

func (e badResponse) Error() string { return string(e) }

// classifyCall returns the kind of the error of a whole call and what it
// means for a retry. ctx is the caller's context: once it has ended, every
// error is classCanceled.
func classifyCall(ctx context.Context, err error) (awserr.Kind, class) {
	if ctx.Err() != nil {
		return awserr.Canceled, classCanceled
	}
	var bad badResponse
	if errors.As(err, &bad) {
		return awserr.NoAnswer, classRetryable
	}
	switch k := awserr.Classify(err); k {
	case awserr.NotFound:
		return k, classNotFound
	case awserr.Throttled:
		return k, classThrottled
	case awserr.ServerError, awserr.NoAnswer, awserr.NotSent:
		// A per-attempt timeout inside the client is NoAnswer: the
		// caller's context is still alive.
		return k, classRetryable
	default:
		return k, classPermanent
	}
}

// classifyEntry returns the kind of the error code of one failed batch
// entry and what it means for a retry: a code of the sender's fault, an
// invalid entry or a denied one is not retried; a code it does not know is.
func classifyEntry(code string, senderFault bool) (awserr.Kind, class) {
	switch k := awserr.ClassifyCode(code); {
	case k == awserr.NotFound:
		return k, classNotFound
	case k == awserr.Throttled:
		return k, classThrottled
	case senderFault, k == awserr.Invalid, k == awserr.AccessDenied:
		return k, classPermanent
	default:
		return k, classRetryable
	}
}

// noAnswer reports whether err, the error of one attempt of a call, leaves
// open whether the service applied the call: no AWS answer came (the
// connection was reset or cut, the attempt or the caller's context ran out,
// the answer could not be read, or a success answer did not say what became
// of the write). An AWS error answer (throttling, a 4xx or a 5xx) is taken
// as the call not applied: AWS documents those as failures; so is a
// connection that could not be opened.
func noAnswer(err error) bool {
	var bad badResponse
	if errors.As(err, &bad) {
		return true
	}
	switch awserr.Classify(err) {
	case awserr.NoAnswer, awserr.Canceled:
		return true
	}
	return false
}
