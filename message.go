package lambdaadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/consumer"
	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/lease"
)

// Message is one delivered Kinesis record, decoded; the handler gets a
// pointer to it. Its fields:
//
//	Payload         []byte    the record's data with any RSK1 envelope removed
//	Headers         Headers   the RSK1 user headers, in order, then the delivery
//	                          headers partition-key, kinesis-sequence-number and
//	                          kinesis-shard-id, always set from the record itself,
//	                          and kinesis-sub-sequence-number on a KPL user record
//	PartitionKey    string    the record's Kinesis partition key (a KPL user
//	                          record's own key)
//	ExplicitHashKey string    a KPL user record's explicit hash key, if it has one
//	SequenceNumber  string    the record's sequence number (decimal digits; a KPL
//	                          user record has its aggregate's)
//	Aggregated      bool      a user record of a KPL aggregated record
//	SubSequenceNumber int     its index in the aggregate (0 for a plain record)
//	ShardID         string    the shard it was read from ("shardId-000000000000")
//	StreamARN       string    the stream's ARN (the stream's, also for an enhanced
//	                          fan-out consumer event source; in long-running mode
//	                          the stream's name when its ARN could not be learnt)
//	EventSourceARN  string    the event source as Lambda reported it (a stream or
//	                          enhanced fan-out consumer ARN); "" in long-running mode
//	ArrivalTime     time.Time when Kinesis accepted the record, to the millisecond
//	Attempt         int       1 on a first delivery; on a counted copy its
//	                          x-ruststream-retry-count + 1; in long-running mode
//	                          one more for every in-process redelivery
//
// and its methods Header(name) (a header's value, "" when absent) and
// Reply(ctx, Reply) (publish a record in answer; see Reply).
//
// A Message is the handler's to keep: it, its Payload and its Headers stay
// valid and unchanged after the handler returned, in both modes and in
// BatchHandlers, as aws-lambda-go's events do (collect them in a test, keep
// a payload for a later bulk write). A record handled again in process gets
// a new Message, so a kept one keeps its Attempt. The adapter allocates an
// invocation's (or a GetRecords answer's) messages, headers and payloads in
// a few blocks, not one allocation per record.
type Message = message.Message

// Headers is the ordered header list of a Message: Get(name), Lookup(name),
// Set, Del, All and Clone, names compared without regard to ASCII case. See
// envelope.Headers.
type Headers = envelope.Headers

// Outcome is what a handler decided about one record: Ack, Drop, Retry or
// RetryAfter. Outcome.Kind, Err and Delay read it back. The zero Outcome is
// invalid: the adapter treats it as Retry and logs it as a handler bug. See
// the package documentation for what each does in each mode.
type Outcome = message.Outcome

// Handler handles one record at a time. HandleRecord is called from many
// goroutines at once for records with different partition keys, and one
// after another, in stream order, for records with the same key. ctx is
// cancelled when the adapter stops waiting for the record (the invocation's
// deadline minus the margin, or a long-running shutdown past its timeout);
// a handler should return promptly then, and what it returns after that
// changes nothing.
type Handler = message.Handler

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc = message.HandlerFunc

// Reply is a record a handler publishes with Message.Reply: Stream (name or
// ARN; "" means WithReplyStream), PartitionKey ("" means its partition-key
// header, then WithReplyPartitionKey, then a generated key that spreads
// replies over the shards), Headers and Payload. The record being handled
// settles only if every reply written while handling it succeeded; Reply
// must be called before HandleRecord returns.
type Reply = message.Reply

// Errors users match with errors.Is.
var (
	// ErrPanic is wrapped by the error of the Retry a recovered handler
	// panic stands for (both modes).
	ErrPanic = engine.ErrPanic
	// ErrZeroOutcome is the error of the Retry the zero Outcome stands for.
	ErrZeroOutcome = engine.ErrZeroOutcome
	// ErrBatchShort is the error of the Retry that stands for an element a
	// BatchHandler returned no Outcome for.
	ErrBatchShort = engine.ErrBatchShort
	// ErrNoReplier is returned by Message.Reply on a message no adapter
	// handed over (one built by hand in a test).
	ErrNoReplier = message.ErrNoReplier
	// ErrReplyAfterReturn is returned by Message.Reply after the handler
	// returned.
	ErrReplyAfterReturn = message.ErrReplyAfterReturn
	// ErrNoReplyStream is returned by Message.Reply when neither the reply
	// nor the adapter names a stream (WithReplyStream).
	ErrNoReplyStream = message.ErrNoReplyStream
	// ErrStreamNotFound is matched by the error Service.Run returns when the
	// stream does not exist (long-running mode), and by the error of a write
	// to a stream that does not exist (a Reply, a copy, a dead letter).
	ErrStreamNotFound = consumer.ErrStreamNotFound
	// ErrTableNotFound is matched by the error Service.Run returns when the
	// lease table does not exist (long-running mode); the message names the
	// command that creates it.
	ErrTableNotFound = lease.ErrTableNotFound
	// ErrNotLeaseTable is matched by the error Service.Run returns when the
	// lease table exists but has another key schema (long-running mode).
	ErrNotLeaseTable = lease.ErrNotLeaseTable
)

// Ack reports the record handled: the checkpoint may pass it.
func Ack() Outcome { return message.Ack() }

// Drop reports the record handled by giving up on it (a poison record), with
// err as the logged reason: the checkpoint passes it exactly as for Ack.
func Drop(err error) Outcome { return message.Drop(err) }

// Retry reports that the record must come again, with err as the logged
// reason. Without WithMaxAttempts or a dead-letter target the record stays
// unsettled: in Lambda mode it and every later record of its shard are
// reported back to Lambda, which delivers them again starting from it; in
// long-running mode it is delivered again in process after a backoff,
// while later records of its partition key wait for it. With either, it
// becomes a counted copy written to its stream (the original settles once
// the copy is written) until the cap sends it to the dead-letter target.
func Retry(err error) Outcome { return message.Retry(err) }

// RetryAfter reports that the record must come again after d, with err as
// the logged reason: a counted copy is written to its stream after d. A d up
// to WithMaxInProcessDelay (default 5s) — that ends before the invocation's
// deadline minus the margin, in Lambda mode — is waited out in process; a
// longer one goes through the delay queue (WithDelayQueue), or without one
// behaves as Retry and logs a warning. The cap applies as for Retry.
func RetryAfter(d time.Duration, err error) Outcome { return message.RetryAfter(d, err) }

// JSON returns a Handler that decodes each payload as JSON into a T and
// calls fn. A payload that does not decode is a poison record: it is dropped
// (Drop) with the decode error as the reason, and fn is not called. It panics
// if fn is nil.
func JSON[T any](fn func(ctx context.Context, v T, m *Message) Outcome) Handler {
	if fn == nil {
		panic("lambdaadapter: nil JSON handler function")
	}
	return HandlerFunc(func(ctx context.Context, m *Message) Outcome {
		var v T
		if err := json.Unmarshal(m.Payload, &v); err != nil {
			return Drop(fmt.Errorf("lambdaadapter: payload is not a JSON %T: %w", v, err))
		}
		return fn(ctx, v, m)
	})
}
