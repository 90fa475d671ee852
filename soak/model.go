package soak

import (
	"encoding/json"
	"math/big"
	"strings"
	"time"
)

// Kind is a kind of fault the schedule injects (or a phase of the run that
// is not a fault but excuses lease changes: start-up and the final stop).
type Kind string

// The fault kinds, in the order the report lists them.
const (
	KindKill             Kind = "kill -9"
	KindSIGTERM          Kind = "SIGTERM"
	KindPause            Kind = "SIGSTOP/SIGCONT"
	KindCutDynamoDB      Kind = "cut off from DynamoDB"
	KindCutKinesis       Kind = "cut off from Kinesis"
	KindErrorsKinesis    Kind = "Kinesis errors"
	KindErrorsDynamoDB   Kind = "DynamoDB errors"
	KindErrorsSQS        Kind = "SQS errors"
	KindSlow             Kind = "slow handlers"
	KindSplit            Kind = "split"
	KindMerge            Kind = "merge"
	KindOutage           Kind = "downstream outage"
	KindStartup          Kind = "start-up"
	KindFinalStop        Kind = "final stop"
	KindNone             Kind = "no fault"
	kindHarnessForReport Kind = "harness"
)

// Kinds lists every kind in report order.
var Kinds = []Kind{KindKill, KindSIGTERM, KindPause, KindCutDynamoDB, KindCutKinesis, KindErrorsKinesis,
	KindErrorsDynamoDB, KindErrorsSQS, KindSlow, KindSplit, KindMerge, KindOutage, KindStartup, KindFinalStop, KindNone}

// Mode is the adapter mode a process or stream belongs to.
type Mode string

// The two modes.
const (
	ModeECS    Mode = "long-running"
	ModeLambda Mode = "Lambda"
)

// Window is a stretch of time in which a fault was active, as the harness
// applied it (not as the schedule planned it: a signal's window starts when
// it was sent). Point faults (kill -9, split, merge) have End == Start.
type Window struct {
	Kind Kind
	// Worker is the worker process the fault hit ("" for every process,
	// e.g. AWS errors on every route or the downstream outage).
	Worker string
	// Shard is the shard a split or merge changed (the parent, or the
	// first parent of a merge); "" otherwise.
	Shard      string
	Start, End time.Time
	// Detail says what exactly was done, for the report.
	Detail string
}

// Line is one JSON log line of a process: the demonstration handler's
// "record" (at handler start) and "record outcome" lines and the
// consumer's lease lines, with the fields the checker reads. In Lambda mode
// the lambdacontext handler writes "timestamp" and "message" for slog's
// "time" and "msg"; ParseLine reads both.
type Line struct {
	Time       time.Time
	Msg        string
	ShardID    string
	Seq        string
	Key        string
	Attempt    int
	ID         string
	Outcome    string
	From       string
	To         string
	Checkpoint string
	// Err is the error of a failed write ("lambdaadapter: writing the
	// copy failed; ...").
	Err string `json:",omitempty"`
	// Unanswered marks the line of a write an attempt of which got no
	// answer (the line's "unanswered" attribute): the write may have been
	// applied once more than the line says.
	Unanswered bool `json:",omitempty"`
}

// Messages the checker reads.
const (
	MsgRecord        = "record"
	MsgRecordOutcome = "record outcome"
	MsgLeaseTaken    = "consumer: lease taken"
	MsgHandedOver    = "consumer: lease handed over"
	MsgHandingOver   = "consumer: handing a lease over"
	MsgReleased      = "consumer: lease released"
	msgDroppedPrefix = "consumer: shard dropped"
	// MsgFenced is the drop of a shard whose lease was not renewed in
	// time (self-fencing); MsgRenewFailed and MsgCheckpointFailed are the
	// lease writes of a shard that failed.
	MsgFenced           = "consumer: shard dropped: lease not renewed in time (fenced); another worker may take it"
	MsgRenewFailed      = "consumer: renewing a lease failed; will retry"
	MsgCheckpointFailed = "consumer: checkpoint write failed; will retry"
	// MsgStillInFlight is a stopping shard's records still in flight after
	// the shutdown timeout: its checkpoint stays before the first of them.
	MsgStillInFlight = "consumer: records still in flight after the shutdown timeout; their handlers' contexts are cancelled"
	// MsgWritePrefix begins the line of a write (a copy, delay message or
	// dead letter) that failed: "lambdaadapter: writing the copy failed;
	// the write is made again", "lambdaadapter: writing the copy failed at
	// first without an answer, then succeeded; ..." and the like.
	MsgWritePrefix = "lambdaadapter: writing the "
)

// isWriteFailed reports whether msg is the line of a failed write.
func isWriteFailed(msg string) bool {
	return strings.HasPrefix(msg, MsgWritePrefix) && strings.Contains(msg, " failed")
}

// AmbiguousWriteError reports whether err, the error of a failed write,
// leaves open whether the service applied the write: the call ran out of
// its deadline, or its connection was reset or cut, before an answer came.
// An AWS error answer (throttling, a 5xx the fault layer sent, a partial
// failure's entry) is not ambiguous.
func AmbiguousWriteError(err string) bool {
	for _, s := range []string{"deadline exceeded", "StatusCode: 0", "connection reset", "EOF", "broken pipe", "canceled"} {
		if strings.Contains(err, s) {
			return true
		}
	}
	return false
}

// ParseLine parses one JSON log line; ok is false for a line that is not
// a JSON object with a time and a message.
func ParseLine(b []byte) (l Line, ok bool) {
	var raw struct {
		Time       time.Time `json:"time"`
		Timestamp  time.Time `json:"timestamp"`
		Msg        string    `json:"msg"`
		Message    string    `json:"message"`
		ShardID    string    `json:"shard_id"`
		Seq        string    `json:"sequence_number"`
		Key        string    `json:"partition_key"`
		Attempt    int       `json:"attempt"`
		ID         string    `json:"id"`
		Outcome    string    `json:"outcome"`
		From       string    `json:"from"`
		To         string    `json:"to"`
		Checkpoint string    `json:"checkpoint"`
		Err        string    `json:"error"`
		Unanswered bool      `json:"unanswered"`
	}
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &raw) != nil {
		return Line{}, false
	}
	l = Line{Time: raw.Time, Msg: raw.Msg, ShardID: raw.ShardID, Seq: raw.Seq, Key: raw.Key, Attempt: raw.Attempt,
		ID: raw.ID, Outcome: raw.Outcome, From: raw.From, To: raw.To, Checkpoint: raw.Checkpoint}
	if isWriteFailed(l.Msg) {
		l.Err, l.Unanswered = raw.Err, raw.Unanswered
	}
	if l.Time.IsZero() {
		l.Time = raw.Timestamp
	}
	if l.Msg == "" {
		l.Msg = raw.Message
	}
	return l, !l.Time.IsZero() && l.Msg != ""
}

// Relevant reports whether the checker reads lines with this message; the
// harness keeps only those in memory.
func Relevant(msg string) bool {
	switch msg {
	case MsgRecord, MsgRecordOutcome, MsgLeaseTaken, MsgHandedOver, MsgHandingOver, MsgReleased, MsgRenewFailed, MsgCheckpointFailed, MsgStillInFlight:
		return true
	}
	return strings.HasPrefix(msg, msgDroppedPrefix) || isWriteFailed(msg)
}

// Process is one process whose handler logs the checker reads: a
// bootstrap -mode=ecs worker, or the bootstrap under the Runtime Interface
// Emulator (Lambda mode, one process for the whole run).
type Process struct {
	// Name is the worker's owner id (unique per process: a replacement gets
	// a new name), or "lambda".
	Name  string
	Mode  Mode
	Lines []Line
	// Exit is how the process ended; nil for the Lambda function.
	Exit *Exit
}

// How a process was told to stop.
const (
	StopKill      = "kill -9"
	StopSIGTERM   = "SIGTERM"
	StopFinal     = "final SIGTERM"
	StopNone      = "" // not told: any exit is unexpected
	stopHarnessKO = "killed by the harness (did not exit in time)"
)

// Exit is how a worker process ended.
type Exit struct {
	// Stop is how the harness told it to stop (StopKill, StopSIGTERM,
	// StopFinal), or StopNone when it exited on its own.
	Stop string
	// Signalled is when the harness sent the signal (zero with StopNone).
	Signalled time.Time
	// Exited is when the process was reaped; zero when it did not exit
	// within Bound and the harness had to kill it (a hang).
	Exited time.Time
	// Bound is how long after Signalled it had to exit.
	Bound time.Duration
	// Code is the exit code (-1 when killed by a signal), Signal the
	// signal that ended it ("" when it exited).
	Code   int
	Signal string
	// Stderr is the end of what it wrote to stderr (a Run error is there).
	Stderr string
}

// Produced is one record a producer wrote (PutRecords succeeded for it).
type Produced struct {
	Mode   Mode
	ID     string
	Key    string
	KeySeq int
	Shard  string
	Seq    string
	Time   time.Time
	// Sleep is the handler sleep it asks for (slow handlers).
	Sleep time.Duration
	// Delayed: it asks for a RetryAfter longer than the in-process limit
	// on its first attempt (a durable delay through the delay queue).
	Delayed bool
}

// StreamRecord is one record read back from a source stream at the end:
// an original, or a counted copy (RetryCount > 0).
type StreamRecord struct {
	Mode       Mode
	Shard      string
	Seq        string
	ID         string
	RetryCount int
}

// DeadLetter is one dead letter read back from a dead-letter target.
type DeadLetter struct {
	Mode     Mode
	ID       string
	Attempts int
	Reason   string
}

// Invocation is one Lambda invocation the event source made (Lambda mode),
// for telling the documented redeliveries apart: a batch whose response
// named a record, or that failed, comes again from that record.
type Invocation struct {
	Start, End time.Time
	Shard      string
	// FirstSeq and LastSeq are the batch's first and last records.
	FirstSeq, LastSeq string
	// Reported is the record the response named ("" when none: the batch
	// was checkpointed whole).
	Reported string
	// Err is the invocation's error (the whole batch comes again).
	Err string
}

// Limits are the settings and bounds the checker holds the run to.
type Limits struct {
	// LeaseDuration, CheckpointInterval and ShutdownTimeout are the
	// workers' settings.
	LeaseDuration      time.Duration
	CheckpointInterval time.Duration
	ShutdownTimeout    time.Duration
	// MaxAttempts is the workers' and the function's cap.
	MaxAttempts int
	// MaxHandler is the longest a handler runs (the longest sleep asked).
	MaxHandler time.Duration
	// FlapsPerMinute is how many lease changes a shard may see in a minute
	// outside fault windows (2).
	FlapsPerMinute int
	// DurableDelay is the RetryAfter of the records that take a durable
	// delay; DelayVisibility is the long-running forwarder's visibility
	// timeout on the delay queue (60 s): a message a stopped worker had
	// received comes again after it.
	DurableDelay, DelayVisibility time.Duration
}

// redeliveryBound is how long before a kill -9, a pause or a cut from
// DynamoDB a record may have started and still come again: it may not be
// checkpointed yet ("about one checkpoint interval"). A record settles once
// its handler returned (MaxHandler) and is checkpointed at the next write,
// at most CheckpointInterval later, which itself takes a moment (a lease
// call has a deadline of a third of the lease duration, at least 1 s).
func (l Limits) redeliveryBound() time.Duration {
	call := max(l.LeaseDuration/3, time.Second)
	return l.MaxHandler + 2*l.CheckpointInterval + call
}

// seqLess compares two decimal sequence numbers.
func seqLess(a, b string) bool {
	if len(a) != len(b) {
		x, _ := new(big.Int).SetString(a, 10)
		y, _ := new(big.Int).SetString(b, 10)
		if x != nil && y != nil {
			return x.Cmp(y) < 0
		}
	}
	return a < b
}
