// Package observe is how lambdaadapter reports what it does, for metrics and
// traces: a hook is any value that implements one or more of the interfaces
// below, in the style of franz-go's hooks. The adapter checks once, when it
// is built, which interfaces each hook implements, and calls only those: an
// adapter without hooks pays nothing, and a hook pays only for the events
// it asks for.
//
// Every method is called synchronously, from the goroutine where the event
// happens (a lane, the writer, a shard reader), possibly from many at once:
// it must be safe for concurrent use and must not block. Events are values;
// a hook may keep them.
//
// Exporters live in their own packages: observe/emf writes CloudWatch
// Embedded Metric Format lines to stdout.
package observe

import (
	"context"
	"time"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/message"
)

// Hook is a value implementing one or more of RecordHook, WriteHook,
// InvocationHook, ReadHook, LeaseHook, CheckpointHook, InFlightHook,
// TraceHook and Flusher.
type Hook any

// Mode names the mode an event comes from: "lambda" or "ecs".
type Mode string

// The modes.
const (
	ModeLambda Mode = "lambda"
	ModeECS    Mode = "ecs"
)

// Action is what became of a record once its handler returned.
type Action string

// The actions.
const (
	// ActionSettled: Ack, or Drop (settled; see Dropped).
	ActionSettled Action = "settled"
	// ActionCopy: a counted copy (or, after RetryAfter, a delayed copy) is
	// being written; the record settles once it is (see WriteHook).
	ActionCopy Action = "copy"
	// ActionDelay: a durable delay message is being written.
	ActionDelay Action = "delay"
	// ActionDeadLetter: a dead letter is being written.
	ActionDeadLetter Action = "dead_letter"
	// ActionRetired: the record reached the attempt cap without a
	// dead-letter target and settled, logged.
	ActionRetired Action = "retired"
	// ActionUnsettled: the record stays unsettled (reported in Lambda mode;
	// delivered again in process in long-running mode).
	ActionUnsettled Action = "unsettled"
)

// Record is a record whose handler returned (or that was concluded without
// one: a malformed KPL aggregate, a record past the maximum record age).
type Record struct {
	Mode   Mode
	Stream string // the stream's ARN (its name when the ARN is unknown)
	// ShardID, SequenceNumber and, for a user record of a KPL aggregate,
	// SubSequenceNumber locate the record.
	ShardID           string
	SequenceNumber    string
	SubSequenceNumber int
	Aggregated        bool
	PartitionKey      string
	// Outcome is the handler's outcome kind: "ack", "drop", "retry",
	// "retry_after"; "drop" for a poison record or one past the maximum
	// record age.
	Outcome string
	// Action is what the adapter does with it.
	Action Action
	// Reason is set when the adapter decided without the handler:
	// "malformed aggregate" or "max record age".
	Reason  string
	Attempt int
	// Handled is how long the handler ran (0 when it did not run). For a
	// batch handler, the batch's duration.
	Handled time.Duration
	// Age is how old the record was when its handler returned: now minus
	// its arrival time (0 when the arrival time is unknown).
	Age time.Duration
	Err error
}

// RecordHook receives every Record.
type RecordHook interface {
	OnRecord(Record)
}

// WriteKind is what a write carried.
type WriteKind string

// The write kinds.
const (
	WriteCopy       WriteKind = "copy"
	WriteDelay      WriteKind = "delay"
	WriteDeadLetter WriteKind = "dead_letter"
	WriteReply      WriteKind = "reply"
)

// Write is one record's copy, delay message, dead letter or reply, written
// or failed.
type Write struct {
	Mode           Mode
	Kind           WriteKind
	Stream         string // the stream of the record it was written for (its ARN, else its name)
	ShardID        string // of the record it was written for
	SequenceNumber string
	Err            error // nil: written
}

// WriteHook receives every Write.
type WriteHook interface {
	OnWrite(Write)
}

// Invocation is one Lambda invocation (or one Runner.Run), once its
// response is built.
type Invocation struct {
	Records  int           // records delivered (user records of KPL aggregates counted one by one)
	Failures int           // item identifiers reported
	Duration time.Duration // from the start of the run to the response
	// OldestAge is the age of the oldest record of the invocation at its
	// end: now minus its arrival time. Unlike Lambda's IteratorAge it
	// includes the time the handlers took and records that are stuck
	// (reported again and again).
	OldestAge time.Duration
	// Cut is true when the deadline margin was reached with records still
	// running.
	Cut bool
	// Stream is the stream's ARN of the first record ("" for an empty run).
	Stream string
}

// InvocationHook receives every Invocation.
type InvocationHook interface {
	OnInvocation(Invocation)
}

// Read is one GetRecords answer of a long-running shard reader.
type Read struct {
	Stream             string
	ShardID            string
	Records            int
	MillisBehindLatest int64
}

// ReadHook receives every Read.
type ReadHook interface {
	OnRead(Read)
}

// LeaseEventKind is what happened to a lease.
type LeaseEventKind string

// The lease event kinds.
const (
	LeaseTaken    LeaseEventKind = "taken"    // a free lease taken
	LeaseStolen   LeaseEventKind = "stolen"   // an expired lease taken from a worker that stopped renewing it
	LeaseReceived LeaseEventKind = "received" // handed over by its owner
	LeaseLost     LeaseEventKind = "lost"     // a fenced write found another owner
	LeaseHandedOn LeaseEventKind = "handed_on"
	LeaseReleased LeaseEventKind = "released" // at shutdown
)

// Lease is a change of the leases a long-running worker holds.
type Lease struct {
	Stream  string
	ShardID string
	Kind    LeaseEventKind
	Held    int // leases held after the change
}

// LeaseHook receives every Lease event.
type LeaseHook interface {
	OnLease(Lease)
}

// Checkpoint is one checkpoint write of a long-running worker.
type Checkpoint struct {
	Stream     string
	ShardID    string
	Checkpoint string
	// SubSequence is the number of settled user records of the KPL
	// aggregate at Checkpoint, when only some settled (else 0).
	SubSequence int
	Err         error
}

// CheckpointHook receives every Checkpoint.
type CheckpointHook interface {
	OnCheckpoint(Checkpoint)
}

// InFlight is a long-running worker's view of its unsettled records, taken
// before each Flush.
type InFlight struct {
	Stream string
	// Records is the number of records read and not yet settled.
	Records int
	// OldestAge is now minus the arrival time of the oldest of them (0 when
	// there are none): how far the worker is behind in time, including
	// records that are stuck.
	OldestAge time.Duration
	// LeasesHeld is the number of leases the worker holds.
	LeasesHeld int
}

// InFlightHook receives an InFlight snapshot before each Flush in
// long-running mode.
type InFlightHook interface {
	OnInFlight(InFlight)
}

// Flusher is a hook that buffers (an exporter). Lambda mode calls Flush once
// per invocation, after the handlers and before the response, inside the
// deadline margin (ctx ends at the deadline minus a fifth of the margin: an
// invocation that times out loses what was not flushed); long-running mode
// calls it every flush interval and once at shutdown, before Run returns.
type Flusher interface {
	Flush(ctx context.Context)
}

// Message is lambdaadapter.Message, the same type under the name the hooks
// use (this package cannot import the root package, which imports it): a
// delivered record, decoded.
type Message = message.Message

// TraceHook puts the handling of records in traces (observe/otel does it
// with OpenTelemetry). StartInvocation is called when a Lambda invocation
// starts, with its messages in order: the context it returns is the parent
// of the records' contexts, and end is called once the response is built.
// StartRecord is called before the handler runs for m, with the context the
// handler would get: the handler gets the context it returns instead, and
// end is called once with what became of the record (the Record a
// RecordHook gets). Inject adds the trace context of ctx (a handler's) to
// the headers of a reply written from it. Copies and dead letters keep the
// record's own headers, so a producer's traceparent travels on with them.
// A batch handler's records are not traced one by one.
type TraceHook interface {
	StartInvocation(ctx context.Context, msgs []*Message) (context.Context, func(Invocation))
	StartRecord(ctx context.Context, m *Message) (context.Context, func(Record))
	Inject(ctx context.Context, h *envelope.Headers)
}
