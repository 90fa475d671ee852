// Package engine is the one settlement engine of lambdaadapter. Both modes
// hand it the records they deliver — the Lambda runner (package lambda) one
// invocation at a time, the long-running consumer (package consumer) as its
// readers read them — and the engine does the rest, once, in one place:
//
//   - it runs the handler in lanes: records of one partition key one after
//     another, in stream order; different keys in parallel, each lane pulling
//     the next key that is ready as it frees up, so one slow key never stalls
//     the others (in Lambda mode the records of an invocation first run one
//     after another on one goroutine, in order, while the handlers are fast,
//     and go to the lanes as soon as they are not: see inline.go);
//   - it turns a handler panic or the zero Outcome into a retry, a failed
//     reply into an unsettled record, and an outcome returned after the
//     runner stopped waiting (the Lambda deadline, a long-running shutdown)
//     into nothing at all;
//   - it decides what the outcome means with the retry policy (package retry)
//     and writes what must be written — counted copies, durable delay
//     messages, dead letters — before the record settles;
//   - it settles the record on its shard's watermark (package settle), or,
//     when it stays unsettled, does what the mode does with an unsettled
//     record: Lambda mode reports it (the Lambda event source delivers it again
//     with everything after it, so the engine starts no later record of its
//     shard and writes nothing for one); long-running mode delivers it again
//     in process after a backoff, with Message.Attempt counted up (not for a
//     record held by a run elsewhere, retry.Decision.Uncounted), while the
//     later records of its key wait for it.
//
// Writes in Lambda mode go out in shard order, in batches: a record's copy,
// delay message or dead letter is written once every earlier record of its
// shard (every earlier part, inside a KPL aggregate) has settled or has its
// own write under way; the writer sends what is ready in rounds of up to 500
// (publish.PutBatch, SendBatch), one round at a time. A write that fails for
// good leaves its record unsettled, and no write after it is released; the
// writes after it that went out in the same round are remembered (written),
// so that when Lambda delivers those records again to this engine they
// settle without their handler: one record never has two copy chains unless
// the redelivery goes to another execution environment. In long-running
// mode an unsettled record is delivered again in process, so writes are
// batched freely (PutRecords of up to 500 records, several calls at once),
// and a write that fails is made again after a backoff (it counts no
// attempt), unless its shard is being handed over, lost or stopped.
//
// The engine starts goroutines only inside a Session, which owns them:
// Session.Wait (Lambda) and Session.Stop (long-running) return after every
// lane, timer and writer of the session has ended — except a handler call
// that ignores its cancelled context, which the engine cannot stop; what it
// returns then changes nothing.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/hooks"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/internal/retry"
)

// Errors the engine retries records with. Users match them with errors.Is
// on Outcome.Err in logs and tests; the module root exports them.
var (
	// ErrPanic is wrapped by the error a recovered handler panic is retried
	// with.
	ErrPanic = errors.New("lambdaadapter: handler panicked")
	// ErrZeroOutcome is the error of the retry that stands for a handler
	// that returned the zero Outcome (a handler bug).
	ErrZeroOutcome = errors.New("lambdaadapter: handler returned the zero Outcome")
	// ErrBatchShort is the error of the retry that stands for an element a
	// BatchHandler returned no Outcome for.
	ErrBatchShort = errors.New("lambdaadapter: batch handler returned no outcome for this record")
)

// Log attribute keys. They are stable, the same in both modes: dashboards and
// alarms may rely on them.
const (
	AttrShardID        = "shard_id"
	AttrSequenceNumber = "sequence_number"
	AttrPartitionKey   = "partition_key"
	AttrOutcome        = "outcome"
	AttrAttempt        = "attempt"
	AttrError          = "error"
	AttrStack          = "stack"
	AttrPanic          = "panic"
	AttrRetryIn        = "retry_in"
	AttrMode           = "mode"
	// AttrUnanswered (true) marks the line of a write an attempt of which
	// got no answer: the service may hold it once more than the line says.
	AttrUnanswered = "unanswered"
)

// Config configures an Engine. Handler (or, in long-running mode only,
// BatchHandler) is required; everything else may be zero.
type Config struct {
	// Handler handles one record at a time.
	Handler message.Handler
	// BatchHandler handles batches of records (long-running mode only).
	BatchHandler message.BatchHandler

	// Policy decides what outcomes do. Its DeadLetter and DelayQueue fields
	// are derived from the targets below by New.
	Policy retry.Policy
	// Publisher writes copies, replies and dead letters to Kinesis. Without
	// one, a decision to copy leaves the record unsettled (logged).
	Publisher *publish.Publisher
	// Queue writes dead letters and delay messages to SQS.
	Queue *publish.Queue
	// DeadLetterStream is the stream (name or ARN) capped records go to;
	// DeadLetterQueue the SQS queue URL. At most one may be set.
	DeadLetterStream string
	DeadLetterQueue  string
	// DelayQueue is the SQS queue URL that carries long RetryAfter delays.
	DelayQueue string
	// ReplyStream is the default stream of Message.Reply.
	ReplyStream string
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
	// Hooks receive what becomes of records and writes (package observe).
	Hooks hooks.Set
	// MaxRecordAge, when positive: a record older than this by its arrival
	// time is not handled but dead-lettered (reason "max record age"), or,
	// without a dead-letter target, settled with a warning.
	MaxRecordAge time.Duration
	// RecycleMessages lets the runners reuse the storage of a Message, its
	// Payload and its Headers once the engine finished with it (Lambda
	// mode: for a later invocation; long-running mode: for a later
	// GetRecords answer). Off, every Message stays valid and unchanged
	// after its handler returned, for as long as the handler keeps it.
	RecycleMessages bool
}

// Validate reports an error for settings that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Handler == nil && c.BatchHandler == nil:
		return errors.New("no handler")
	case c.Handler != nil && c.BatchHandler != nil:
		return errors.New("set a handler or a batch handler, not both")
	case c.DeadLetterStream != "" && c.DeadLetterQueue != "":
		return errors.New("set a dead-letter stream or a dead-letter queue, not both")
	case c.DeadLetterStream != "" && c.Publisher == nil:
		return errors.New("a dead-letter stream needs a Kinesis publisher")
	case (c.DeadLetterQueue != "" || c.DelayQueue != "") && c.Queue == nil:
		return errors.New("a dead-letter or delay queue needs an SQS client")
	case c.DelayQueue != "" && c.Publisher == nil:
		return errors.New("a delay queue needs a Kinesis publisher to forward delayed records")
	case c.Policy.MaxAttempts < 0:
		return fmt.Errorf("max attempts %d is negative", c.Policy.MaxAttempts)
	case c.MaxRecordAge < 0:
		return fmt.Errorf("max record age %s is negative", c.MaxRecordAge)
	case c.Policy.MaxInProcessDelay < 0:
		return fmt.Errorf("max in-process delay %s is negative", c.Policy.MaxInProcessDelay)
	}
	return nil
}

// Engine holds what every session needs: the handler, the retry policy and
// its targets. It is immutable and safe for concurrent use; the work happens
// in Sessions.
type Engine struct {
	cfg Config
	log *slog.Logger
	// written: the records (Lambda mode) whose write was made beyond their
	// shard's first unsettled record, recognised when they come again.
	written written
}

// New validates cfg and returns an Engine.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("lambdaadapter: %w", err)
	}
	cfg.Policy.DeadLetter = cfg.DeadLetterStream != "" || cfg.DeadLetterQueue != ""
	cfg.Policy.DelayQueue = cfg.DelayQueue != ""
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{cfg: cfg, log: log}, nil
}

// Config returns the engine's configuration, with the Policy's derived
// fields set.
func (e *Engine) Config() Config { return e.cfg }

// Logger returns the engine's logger (never nil).
func (e *Engine) Logger() *slog.Logger { return e.log }

// Batch reports whether the engine runs a BatchHandler.
func (e *Engine) Batch() bool { return e.cfg.BatchHandler != nil }

// logRecord logs msg about the record of m with the engine's attribute keys;
// err defaults to the outcome's error.
func (e *Engine) logRecord(ctx context.Context, level slog.Level, mode Mode, msg string, m *message.Message, out message.Outcome, err error, extra ...slog.Attr) {
	if !e.log.Enabled(ctx, level) {
		return
	}
	if err == nil {
		err = out.Err()
	}
	attrs := make([]slog.Attr, 0, 8+len(extra))
	attrs = append(attrs, slog.String(AttrMode, string(mode)),
		slog.String(AttrShardID, m.ShardID), slog.String(AttrSequenceNumber, m.SequenceNumber),
		slog.String(AttrPartitionKey, m.PartitionKey), slog.Int(AttrAttempt, m.Attempt),
		slog.String(AttrOutcome, out.String()))
	if err != nil {
		attrs = append(attrs, slog.String(AttrError, err.Error()))
	}
	attrs = append(attrs, extra...)
	e.log.LogAttrs(ctx, level, msg, attrs...)
}
