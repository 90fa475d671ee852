// Package message holds the vocabulary shared by every runner of
// lambdaadapter: the delivered record (Message), what a handler decides about
// it (Outcome) and the handler itself (Handler, HandlerFunc).
//
// Users import the module root, which re-exports these names; the types live
// here so that the Lambda-mode runner (package lambda) and the long-running
// consumer (package consumer) can share them without an import cycle.
package message

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/shardsettle/lambdaadapter/envelope"
)

// Message is one delivered Kinesis record, decoded.
//
// A Message is handed to exactly one HandleRecord call (or one BatchHandler
// call) and is the handler's to keep: the Message, its Payload and its
// Headers stay valid and unchanged after the handler returned, for as long
// as it keeps them, in both modes. A record handled again in process gets
// a new Message. The adapter reads them after the handler returned (to
// write a copy or a dead letter) but never changes them. Only with the
// engine's RecycleMessages (an opt-in) does the runner reuse their storage
// once it finished with the record.
type Message struct {
	// Payload is the record's data with any RSK1 envelope removed.
	Payload []byte
	// Headers are the RSK1 user headers of the record, in order, followed by
	// the delivery headers partition-key, kinesis-sequence-number and
	// kinesis-shard-id, which are always set from the record itself, and,
	// for a user record of a KPL aggregate, kinesis-sub-sequence-number.
	Headers envelope.Headers
	// PartitionKey is the record's Kinesis partition key; for a user record
	// of a KPL aggregate, the user record's own key (from the aggregate's
	// key table).
	PartitionKey string
	// ExplicitHashKey is the explicit hash key of a user record of a KPL
	// aggregate that has one; "" otherwise (Kinesis does not deliver the
	// explicit hash key of an ordinary record).
	ExplicitHashKey string
	// SequenceNumber is the record's Kinesis sequence number (decimal
	// digits); for a user record of a KPL aggregate, the aggregate's.
	SequenceNumber string
	// Aggregated is true for a user record of a KPL aggregated record: the
	// Kinesis record it came in holds several, which settle one by one (the
	// Kinesis record counts as settled once all of them have).
	Aggregated bool
	// SubSequenceNumber is the index of a user record in its KPL aggregate,
	// from 0; 0 for an ordinary record.
	SubSequenceNumber int
	// ShardID is the shard the record was read from ("shardId-000000000000").
	ShardID string
	// StreamARN is the ARN of the stream the record was read from. For an
	// enhanced fan-out consumer event source it is the stream's ARN, not the
	// consumer's.
	StreamARN string
	// EventSourceARN is the event source as Lambda reported it (a stream ARN
	// or an enhanced fan-out consumer ARN). Empty in long-running mode.
	EventSourceARN string
	// ArrivalTime is the approximate time Kinesis accepted the record,
	// to the millisecond.
	ArrivalTime time.Time
	// Attempt is 1 on a first delivery and, on a counted copy written by a
	// retry, the copy's x-ruststream-retry-count header plus one.
	Attempt int

	replier Replier
}

// Reply is a record a handler publishes in answer to the one it handles.
type Reply struct {
	// Stream is the stream name or ARN to write to; "" means the adapter's
	// reply stream (WithReplyStream).
	Stream string
	// PartitionKey is the reply's key. When empty, the key is the reply's
	// partition-key header, then the adapter's reply partition key
	// (WithReplyPartitionKey), then a generated key that spreads replies
	// over the shards.
	PartitionKey string
	// Headers are the reply's user headers. The RSK1 envelope is written
	// only when there is one besides partition-key.
	Headers envelope.Headers
	// Payload is the reply's data.
	Payload []byte
}

// Replier publishes replies on behalf of a runner. Runners bind one to each
// message they hand to a handler; handlers call Message.Reply instead.
type Replier interface {
	Reply(ctx context.Context, m *Message, r Reply) error
}

// Bind makes r the replier of m. It is for runners; handlers do not call
// it.
func Bind(m *Message, r Replier) { m.replier = r }

// ErrNoReplier is returned by Message.Reply on a message whose runner
// offers no replies (for example one built by hand in a test).
var ErrNoReplier = errors.New("lambdaadapter: replies are not available for this message")

// ErrReplyAfterReturn is returned by Message.Reply after the handler
// returned: a reply belongs to the handling it answers.
var ErrReplyAfterReturn = errors.New("lambdaadapter: reply after the handler returned")

// ErrNoReplyStream is returned by Message.Reply when neither the reply nor
// the adapter names a stream.
var ErrNoReplyStream = errors.New("lambdaadapter: reply names no stream and no reply stream is set (WithReplyStream)")

// Reply writes r (one Kinesis PutRecord) and returns once it is written or
// has failed. The record being handled settles only if every reply written
// while handling it succeeded: after a failed reply it stays unsettled and
// comes again, whatever the handler returns. Reply must be called before
// HandleRecord returns, from any goroutine; a call after that fails.
func (m *Message) Reply(ctx context.Context, r Reply) error {
	if m.replier == nil {
		return ErrNoReplier
	}
	return m.replier.Reply(ctx, m, r)
}

// Header returns the value of the header name, or "" when it is absent.
func (m *Message) Header(name string) string { return m.Headers.Get(name) }

// RetryCount returns the record's x-ruststream-retry-count header as a
// number: 0 when it is absent, negative or not a decimal number, and
// math.MaxInt when it is larger than that (the count saturates, so a hostile
// or corrupt header can never wrap round to a small or negative count and
// slip past a cap on attempts).
func RetryCount(h envelope.Headers) int {
	v, ok := h.Lookup(envelope.RetryCountHeader)
	if !ok {
		return 0
	}
	return parseCount(v)
}

// parseCount parses a decimal count with an optional sign, saturating at
// math.MaxInt; a negative count or anything else is 0.
func parseCount(v string) int {
	neg := false
	switch {
	case v == "":
		return 0
	case v[0] == '+':
		v = v[1:]
	case v[0] == '-':
		neg, v = true, v[1:]
	}
	if v == "" {
		return 0
	}
	n := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0
		}
		if n > (math.MaxInt-int(c-'0'))/10 {
			n = math.MaxInt // keep scanning: a later non-digit still makes it invalid
			for j := i + 1; j < len(v); j++ {
				if v[j] < '0' || v[j] > '9' {
					return 0
				}
			}
			break
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		return 0
	}
	return n
}

// AttemptOf returns the delivery attempt of a record with headers h: its
// retry count plus one, saturating at math.MaxInt.
func AttemptOf(h envelope.Headers) int {
	n := RetryCount(h)
	if n == math.MaxInt {
		return n
	}
	return n + 1
}

// StreamARNFromSource returns the stream ARN of a Lambda event source ARN.
// A stream ARN ("arn:aws:kinesis:REGION:ACCOUNT:stream/NAME") is returned as
// is; an enhanced fan-out consumer ARN
// ("arn:aws:kinesis:REGION:ACCOUNT:stream/NAME/consumer/CONSUMER:TS") yields
// the ARN of its stream.
func StreamARNFromSource(arn string) string {
	if i := strings.Index(arn, "/consumer/"); i >= 0 {
		return arn[:i]
	}
	return arn
}

// ErrHeldElsewhere is matched (with errors.Is) by the reason of a Retry or
// RetryAfter that attempted nothing: the handler was not run because a run
// in progress elsewhere holds the record (package idempotency's
// ErrInProgress matches it). Such a record stays unsettled whatever the cap
// or dead-letter target: no attempt is counted and no copy, delay message
// or dead letter is written (see package retry). It is not part of the
// public vocabulary; users return it only through idempotency.ErrInProgress.
var ErrHeldElsewhere = errors.New("lambdaadapter: record held by a run in progress elsewhere")

// Kind is the closed set of outcomes a handler can return.
type Kind uint8

const (
	// KindInvalid is the zero Outcome. Runners treat it as KindRetry (the
	// record stays unsettled) and log that the handler returned no outcome.
	KindInvalid Kind = iota
	// KindAck means the record was handled.
	KindAck
	// KindDrop means the record was handled by giving up on it: the
	// checkpoint passes it (a poison record), and the reason is logged.
	KindDrop
	// KindRetry means the record was not handled and must come again.
	KindRetry
	// KindRetryAfter means the record was not handled and must come again
	// after a delay.
	KindRetryAfter
)

// String returns the outcome's log name: "ack", "drop", "retry",
// "retry_after" or "invalid".
func (k Kind) String() string {
	switch k {
	case KindAck:
		return "ack"
	case KindDrop:
		return "drop"
	case KindRetry:
		return "retry"
	case KindRetryAfter:
		return "retry_after"
	default:
		return "invalid"
	}
}

// Outcome is what a handler decided about one record. Build it with Ack,
// Drop, Retry or RetryAfter; the zero Outcome is invalid and is treated as a
// retry. Outcome is a small immutable value, safe to copy and share.
type Outcome struct {
	kind  Kind
	err   error
	delay time.Duration
}

// Ack reports the record handled. The watermark may pass it.
func Ack() Outcome { return Outcome{kind: KindAck} }

// Drop reports the record handled by giving up on it, with err as the reason
// (logged; nil is allowed). The watermark passes it exactly as for Ack: use it
// for poison records that would otherwise block the shard forever.
func Drop(err error) Outcome { return Outcome{kind: KindDrop, err: err} }

// Retry reports that the record must come again, with err as the reason
// (logged; nil is allowed). See the package documentation of the module root
// for what happens in each mode and configuration.
func Retry(err error) Outcome { return Outcome{kind: KindRetry, err: err} }

// RetryAfter reports that the record must come again after d, with err as
// the reason (logged; nil is allowed). A negative d is taken as zero.
func RetryAfter(d time.Duration, err error) Outcome {
	if d < 0 {
		d = 0
	}
	return Outcome{kind: KindRetryAfter, err: err, delay: d}
}

// Kind returns the outcome's kind.
func (o Outcome) Kind() Kind { return o.kind }

// Err returns the reason given to Drop, Retry or RetryAfter, or nil.
func (o Outcome) Err() error { return o.err }

// Delay returns the delay given to RetryAfter, or zero.
func (o Outcome) Delay() time.Duration { return o.delay }

// Settles reports whether the outcome, on its own, lets the watermark pass
// the record (Ack and Drop).
func (o Outcome) Settles() bool { return o.kind == KindAck || o.kind == KindDrop }

// String formats the outcome for logs, e.g. "retry_after(2s): timeout".
func (o Outcome) String() string {
	s := o.kind.String()
	if o.kind == KindRetryAfter {
		s = fmt.Sprintf("%s(%s)", s, o.delay)
	}
	if o.err != nil {
		s += ": " + o.err.Error()
	}
	return s
}

// Handler handles one record at a time. HandleRecord may be called from many
// goroutines at once, for records with different partition keys; records with
// the same partition key are handed over one after another, in stream order.
// ctx is cancelled when the invocation (or, in long-running mode, the
// consumer) stops waiting for the record; a handler should return promptly
// then, and whatever it returns after that changes nothing.
type Handler interface {
	HandleRecord(ctx context.Context, m *Message) Outcome
}

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc func(ctx context.Context, m *Message) Outcome

// HandleRecord calls f(ctx, m).
func (f HandlerFunc) HandleRecord(ctx context.Context, m *Message) Outcome { return f(ctx, m) }

// BatchHandler handles several records at once (long-running mode only). It
// returns one Outcome per message, in order; every element settles on its
// own, exactly as the Outcome of a Handler would. A shorter result leaves
// the missing elements to Retry. Batches are handed over one at a time;
// records of one partition key appear in stream order. ctx is cancelled when
// the consumer stops waiting (a shutdown past its timeout); an outcome
// returned after that changes nothing.
type BatchHandler interface {
	HandleBatch(ctx context.Context, ms []*Message) []Outcome
}

// BatchHandlerFunc adapts a function to BatchHandler.
type BatchHandlerFunc func(ctx context.Context, ms []*Message) []Outcome

// HandleBatch calls f(ctx, ms).
func (f BatchHandlerFunc) HandleBatch(ctx context.Context, ms []*Message) []Outcome {
	return f(ctx, ms)
}
