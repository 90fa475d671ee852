package publish

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shardsettle/lambdaadapter/envelope"
)

// Names of the diagnostic headers of a dead-letter record (DeadLetterRecord).
const (
	DeadLetterReasonHeader         = "x-dead-letter-reason"
	DeadLetterSourceStreamHeader   = "x-dead-letter-source-stream"
	DeadLetterShardIDHeader        = "x-dead-letter-shard-id"
	DeadLetterSequenceNumberHeader = "x-dead-letter-sequence-number"
	// DeadLetterSubSequenceNumberHeader is set only for a user record of a
	// KPL aggregate: its index in the aggregate.
	DeadLetterSubSequenceNumberHeader = "x-dead-letter-sub-sequence-number"
	DeadLetterAttemptsHeader          = "x-dead-letter-attempts"
	DeadLetterFirstArrivalHeader      = "x-dead-letter-first-arrival"
)

// DelayKind is the "kind" of a durable delay message body (Delayed.Body).
const DelayKind = "lambdaadapter.delay/v1"

// delayKindPrefix starts the kind of every version of the delay body.
const delayKindPrefix = "lambdaadapter.delay/"

// DeadLetterBodyVersion is the "version" of the dead-letter body
// DeadLetterBody writes and ParseDeadLetterBody reads.
const DeadLetterBodyVersion = 1

// TimeFormat is the format of every time in the formats of this package:
// RFC 3339 in UTC with milliseconds, e.g. "2024-05-01T12:00:00.123Z".
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// ErrInvalidBody is matched by the error of ParseDeadLetterBody and
// ParseDelayed for a body they cannot read.
var ErrInvalidBody = errors.New("publish: invalid body")

// DeadLetter describes a record given up on, for a dead-letter destination:
// a Kinesis stream (DeadLetterRecord) or an SQS queue (DeadLetterBody).
type DeadLetter struct {
	// Reason says why the record was given up on, e.g. the handler's
	// error.
	Reason string
	// SourceStreamARN, ShardID, SequenceNumber and PartitionKey locate the
	// original record.
	SourceStreamARN string
	ShardID         string
	SequenceNumber  string
	PartitionKey    string
	// SubSequenceNumber is, for a user record of a KPL aggregate, its index
	// in the aggregate (decimal); "" for an ordinary record.
	SubSequenceNumber string
	// Attempts is how many times the record was handled.
	Attempts int
	// FirstArrival is when the original record arrived in its stream.
	FirstArrival time.Time
	// DeadLetteredAt is when the record was given up on. DeadLetterBody
	// writes the current time when it is zero.
	DeadLetteredAt time.Time
	// Headers are the original record's user headers. The delivery headers
	// (partition-key, kinesis-sequence-number, kinesis-shard-id) are
	// dropped if present.
	Headers envelope.Headers
	// Payload is the original record's payload.
	Payload []byte
}

// isDeliveryHeader reports whether name is one of the headers a receiver
// sets from the record itself, which a copy must not carry.
func isDeliveryHeader(name string) bool { return envelope.IsDeliveryHeader(name) }

// userHeaders returns a copy of h without the delivery headers, with room
// for extra more.
func userHeaders(h envelope.Headers, extra int) envelope.Headers {
	out := make(envelope.Headers, 0, len(h)+extra)
	for _, x := range h {
		if !isDeliveryHeader(x.Name) {
			out = append(out, x)
		}
	}
	return out
}

// oneLine replaces carriage returns and newlines with spaces, so that the
// envelope accepts the value.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeFormat)
}

// originalKey returns the partition key of the original record: key, or
// else the partition-key header.
func originalKey(key string, h envelope.Headers) string {
	if key != "" {
		return key
	}
	return h.Get(envelope.PartitionKeyHeader)
}

// DeadLetterRecord returns the record that dead-letters d to a Kinesis
// stream (a name or an ARN). Its payload is d.Payload (shared, not copied),
// its partition key the original record's, and its headers d's user headers
// in order, followed by the diagnostic headers:
//
//	x-dead-letter-reason           d.Reason, newlines replaced by spaces
//	x-dead-letter-source-stream    d.SourceStreamARN
//	x-dead-letter-shard-id         d.ShardID
//	x-dead-letter-sequence-number  d.SequenceNumber
//	x-dead-letter-attempts         d.Attempts in decimal
//	x-dead-letter-first-arrival    d.FirstArrival in TimeFormat
//
// The reason is always written; every other diagnostic header is left out
// when its value is empty, zero or negative. A user header with one of these
// names takes the new value in place. The delivery headers are dropped. The
// record is written with the RSK1 envelope, since it always has a header.
// DeadLetterRecord is pure and safe for concurrent use.
func DeadLetterRecord(stream string, d DeadLetter) Record {
	h := userHeaders(d.Headers, 6)
	set := func(name, value string) {
		if value != "" {
			h.Set(name, oneLine(value))
		}
	}
	h.Set(DeadLetterReasonHeader, oneLine(d.Reason))
	set(DeadLetterSourceStreamHeader, d.SourceStreamARN)
	set(DeadLetterShardIDHeader, d.ShardID)
	set(DeadLetterSequenceNumberHeader, d.SequenceNumber)
	set(DeadLetterSubSequenceNumberHeader, d.SubSequenceNumber)
	if d.Attempts > 0 {
		set(DeadLetterAttemptsHeader, strconv.Itoa(d.Attempts))
	}
	set(DeadLetterFirstArrivalHeader, formatTime(d.FirstArrival))
	return Record{
		Stream:       stream,
		PartitionKey: originalKey(d.PartitionKey, d.Headers),
		Headers:      h,
		Payload:      d.Payload,
	}
}

// jsonHeader is one header in a JSON body.
type jsonHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func jsonHeaders(h envelope.Headers) []jsonHeader {
	out := make([]jsonHeader, 0, len(h))
	for _, x := range h {
		if !isDeliveryHeader(x.Name) {
			out = append(out, jsonHeader{Name: x.Name, Value: x.Value})
		}
	}
	return out
}

func fromJSONHeaders(hs []jsonHeader) envelope.Headers {
	if len(hs) == 0 {
		return nil
	}
	h := make(envelope.Headers, 0, len(hs))
	for _, x := range hs {
		h.Set(x.Name, x.Value)
	}
	return h
}

// deadLetterJSON is the dead-letter body; field order is the contract.
type deadLetterJSON struct {
	Version         int          `json:"version"`
	Reason          string       `json:"reason"`
	SourceStreamARN string       `json:"source_stream_arn"`
	ShardID         string       `json:"shard_id"`
	SequenceNumber  string       `json:"sequence_number"`
	SubSequence     string       `json:"sub_sequence_number,omitempty"`
	PartitionKey    string       `json:"partition_key"`
	Attempts        int          `json:"attempts"`
	FirstArrival    string       `json:"first_arrival"`
	DeadLetteredAt  string       `json:"dead_lettered_at"`
	Headers         []jsonHeader `json:"headers"`
	PayloadBase64   string       `json:"payload_base64"`
}

// DeadLetterBody returns the SQS message body that dead-letters d: one JSON
// object with these members, in this order:
//
//	version            1
//	reason             d.Reason
//	source_stream_arn  d.SourceStreamARN
//	shard_id           d.ShardID
//	sequence_number    d.SequenceNumber
//	partition_key      the original record's key
//	attempts           d.Attempts
//	first_arrival      d.FirstArrival in TimeFormat, "" when zero
//	dead_lettered_at   d.DeadLetteredAt (now when zero) in TimeFormat
//	headers            [{"name": ..., "value": ...}] d's user headers
//	payload_base64     d.Payload, standard base64 with padding
//
// Strings are JSON-escaped except for <, > and &; bytes that are not UTF-8
// become U+FFFD, and the characters SQS refuses are escaped, so the body is
// always a valid SQS message body. The body of a payload over about 750 KiB
// exceeds the SQS limit of 1 MiB. DeadLetterBody never fails for a
// DeadLetter value today; its error is reserved for later versions. It is
// safe for concurrent use.
func DeadLetterBody(d DeadLetter) ([]byte, error) {
	at := d.DeadLetteredAt
	if at.IsZero() {
		at = time.Now()
	}
	return marshalBody(deadLetterJSON{
		Version:         DeadLetterBodyVersion,
		Reason:          d.Reason,
		SourceStreamARN: d.SourceStreamARN,
		ShardID:         d.ShardID,
		SequenceNumber:  d.SequenceNumber,
		SubSequence:     d.SubSequenceNumber,
		PartitionKey:    originalKey(d.PartitionKey, d.Headers),
		Attempts:        d.Attempts,
		FirstArrival:    formatTime(d.FirstArrival),
		DeadLetteredAt:  formatTime(at),
		Headers:         jsonHeaders(d.Headers),
		PayloadBase64:   base64.StdEncoding.EncodeToString(d.Payload),
	})
}

// ParseDeadLetterBody reads a body written by DeadLetterBody. Members it does
// not know are ignored; a version other than 1, a time not in RFC 3339 or a
// payload not in base64 is an error matching ErrInvalidBody. Times come back
// in UTC; headers are lower-cased, a repeated name keeping its last value. It
// is safe for concurrent use.
func ParseDeadLetterBody(body []byte) (DeadLetter, error) {
	var j deadLetterJSON
	if err := json.Unmarshal(body, &j); err != nil {
		return DeadLetter{}, invalidBody("dead-letter", err)
	}
	if j.Version != DeadLetterBodyVersion {
		return DeadLetter{}, invalidBody("dead-letter", fmt.Errorf("version %d, want %d", j.Version, DeadLetterBodyVersion))
	}
	d := DeadLetter{
		Reason:            j.Reason,
		SourceStreamARN:   j.SourceStreamARN,
		ShardID:           j.ShardID,
		SequenceNumber:    j.SequenceNumber,
		SubSequenceNumber: j.SubSequence,
		PartitionKey:      j.PartitionKey,
		Attempts:          j.Attempts,
		Headers:           fromJSONHeaders(j.Headers),
	}
	var err error
	if d.FirstArrival, err = parseTime("first_arrival", j.FirstArrival); err != nil {
		return DeadLetter{}, invalidBody("dead-letter", err)
	}
	if d.DeadLetteredAt, err = parseTime("dead_lettered_at", j.DeadLetteredAt); err != nil {
		return DeadLetter{}, invalidBody("dead-letter", err)
	}
	if d.Payload, err = base64.StdEncoding.DecodeString(j.PayloadBase64); err != nil {
		return DeadLetter{}, invalidBody("dead-letter", fmt.Errorf("payload_base64: %w", err))
	}
	return d, nil
}

func invalidBody(kind string, err error) error {
	return &formatError{kind: kind, err: err}
}

// formatError is the error of a body that cannot be read.
type formatError struct {
	kind string
	err  error
}

func (e *formatError) Error() string {
	return "publish: invalid " + e.kind + " body: " + e.err.Error()
}

func (e *formatError) Unwrap() []error { return []error{ErrInvalidBody, e.err} }

func parseTime(member, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", member, err)
	}
	return t.UTC(), nil
}

// marshalBody returns v as compact JSON that SQS accepts as a message body:
// without HTML escaping, with U+FFFE and U+FFFF (valid UTF-8 that SQS
// refuses) escaped. encoding/json already escapes control characters and
// replaces invalid UTF-8.
func marshalBody(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if !bytes.Contains(b, []byte("\uFFFE")) && !bytes.Contains(b, []byte("\uFFFF")) {
		return b, nil
	}
	b = bytes.ReplaceAll(b, []byte("\uFFFE"), []byte(`\ufffe`))
	return bytes.ReplaceAll(b, []byte("\uFFFF"), []byte(`\uffff`)), nil
}

// Delayed is a record to write to a stream later: the body of a durable
// delay message, which an SQS queue holds until NotBefore and the same binary
// then forwards to the stream (Record).
type Delayed struct {
	// StreamARN is the stream to write the record to.
	StreamARN string
	// PartitionKey is the record's partition key.
	PartitionKey string
	// Headers are the record's user headers. The delivery headers
	// (partition-key, kinesis-sequence-number, kinesis-shard-id) are
	// dropped by Body.
	Headers envelope.Headers
	// Payload is the record's payload.
	Payload []byte
	// NotBefore is when the record is due. It is kept to the millisecond.
	NotBefore time.Time
}

// delayedJSON is the delay body; field order is the contract.
type delayedJSON struct {
	Kind          string       `json:"kind"`
	StreamARN     string       `json:"stream_arn"`
	PartitionKey  string       `json:"partition_key"`
	NotBefore     string       `json:"not_before"`
	Headers       []jsonHeader `json:"headers"`
	PayloadBase64 string       `json:"payload_base64"`
}

// Body returns the SQS message body of d: one JSON object with these
// members, in this order:
//
//	kind            "lambdaadapter.delay/v1" (DelayKind)
//	stream_arn      d.StreamARN
//	partition_key   d.PartitionKey
//	not_before      d.NotBefore in TimeFormat, "" when zero
//	headers         [{"name": ..., "value": ...}] d's user headers
//	payload_base64  d.Payload, standard base64 with padding
//
// Strings are escaped as in DeadLetterBody. Body refuses a Delayed without
// StreamARN, with an error matching ErrInvalidRecord. The body of a payload
// over about 750 KiB exceeds the SQS limit of 1 MiB. Body is safe for
// concurrent use.
func (d Delayed) Body() ([]byte, error) {
	if d.StreamARN == "" {
		return nil, fmt.Errorf("%w: delayed record without a stream ARN", ErrInvalidRecord)
	}
	return marshalBody(delayedJSON{
		Kind:          DelayKind,
		StreamARN:     d.StreamARN,
		PartitionKey:  d.PartitionKey,
		NotBefore:     formatTime(d.NotBefore),
		Headers:       jsonHeaders(d.Headers),
		PayloadBase64: base64.StdEncoding.EncodeToString(d.Payload),
	})
}

// DueWithin is how close to NotBefore a delay message counts as due: a
// forwarder writes it to its stream now rather than sending it round the
// delay queue again.
const DueWithin = time.Second

// Left returns how long d still waits at now, and whether it is due (left
// at most DueWithin). A delay message that is not due goes back to the
// delay queue for the rest of its wait (at most MaxDelay per
// round).
func (d Delayed) Left(now time.Time) (left time.Duration, due bool) {
	left = d.NotBefore.Sub(now)
	return left, left <= DueWithin
}

// Record returns the record that forwards d to its stream: Stream is
// StreamARN, and the payload and headers are d's (shared, not copied).
func (d Delayed) Record() Record {
	return Record{
		Stream:       d.StreamARN,
		PartitionKey: d.PartitionKey,
		Headers:      d.Headers,
		Payload:      d.Payload,
	}
}

// ParseDelayed reads a body written by Delayed.Body. It returns false and no
// error for a body that is not a delay message (not JSON, or without a kind
// starting with "lambdaadapter.delay/"), so that a queue may carry other
// messages. For one of ours it returns true, and an error matching
// ErrInvalidBody when the body is malformed: unreadable JSON mentioning our
// kind, a kind of another version, an empty stream_arn, a time not in RFC
// 3339 or a payload not in base64. Times come back in UTC. It is safe for
// concurrent use.
func ParseDelayed(body []byte) (Delayed, bool, error) {
	var j delayedJSON
	if err := json.Unmarshal(body, &j); err != nil {
		if bytes.Contains(body, []byte(delayKindPrefix)) {
			return Delayed{}, true, invalidBody("delay", err)
		}
		return Delayed{}, false, nil
	}
	if !strings.HasPrefix(j.Kind, delayKindPrefix) {
		return Delayed{}, false, nil
	}
	if j.Kind != DelayKind {
		return Delayed{}, true, invalidBody("delay", fmt.Errorf("kind %q, want %q", j.Kind, DelayKind))
	}
	if j.StreamARN == "" {
		return Delayed{}, true, invalidBody("delay", errors.New("stream_arn is empty"))
	}
	d := Delayed{StreamARN: j.StreamARN, PartitionKey: j.PartitionKey, Headers: fromJSONHeaders(j.Headers)}
	var err error
	if d.NotBefore, err = parseTime("not_before", j.NotBefore); err != nil {
		return Delayed{}, true, invalidBody("delay", err)
	}
	if d.Payload, err = base64.StdEncoding.DecodeString(j.PayloadBase64); err != nil {
		return Delayed{}, true, invalidBody("delay", fmt.Errorf("payload_base64: %w", err))
	}
	return d, true, nil
}

// FirstArrivalHeader carries, on counted copies, when the original record
// first arrived (TimeFormat), so a dead letter written after several copies
// still reports it (DeadLetter.FirstArrival).
const FirstArrivalHeader = "x-lambdaadapter-first-arrival"

// OriginHeader carries, on counted copies, the coordinates of the original
// record in its stream: "SHARD_ID#SEQUENCE_NUMBER#SUB_SEQUENCE_NUMBER"
// (the sub-sequence number is the index of a KPL user record in its
// aggregate, 0 for an ordinary record), e.g.
// "shardId-000000000001#49590338271490256608559692538361571095921575989136588898#0".
// It is set on the first copy and carried unchanged on later ones (and on
// a durable delay's copy), so an original and all its copies name one
// record: idempotency.DefaultKey derives its key from it. A dead letter
// does not carry it (its x-dead-letter-* headers name the delivery given
// up on), so a dead letter written back to the stream is a new record.
const OriginHeader = "x-lambdaadapter-origin"
