// Package retry decides what each handler outcome does to its record, given
// the adapter's configuration: settle it, leave it unsettled, write a
// counted copy (now or after a delay), park it in a durable delay queue,
// dead-letter it, or retire it at the cap. The decision is the same in
// Lambda mode and long-running mode; the settlement engine
// (internal/engine) carries it out for both.
//
// The package is pure: no I/O, no goroutines, no clock of its own.
//
//	outcome          no cap, no dead-letter target   WithMaxAttempts(n) and/or a dead-letter target
//	Ack              Settle                           Settle
//	Drop             Settle                           Settle (DeadLetter with DeadLetterDrops)
//	Retry            Leave (unsettled, comes again)   Copy; at attempt n: DeadLetter, or Retire without a target
//	RetryAfter(d)    d short: Copy after d            same, and the cap applies as for Retry
//	                 d long: DelayQueue if configured,
//	                 else as Retry (with a warning)
//	Retry or         Leave, Uncounted                 Leave, Uncounted: no copy, no dead letter,
//	RetryAfter,                                       whatever the cap
//	held elsewhere
//
// A dead-letter target without WithMaxAttempts caps at DefaultMaxAttempts.
//
// "Held elsewhere" is a Retry or RetryAfter whose reason matches
// message.ErrHeldElsewhere (idempotency.ErrInProgress does): the handler was
// not run because a run in progress elsewhere holds the record. Counting it
// would retire or dead-letter a record that nobody attempted (lost if the
// other run then fails), and copying it would hand the handler a second
// delivery while the first run still holds it; so it stays unsettled and
// comes again, as an uncounted Retry does, and its redelivery counts no
// attempt (Decision.Uncounted).
package retry

import (
	"errors"
	"fmt"
	"time"

	"github.com/shardsettle/lambdaadapter/internal/message"
)

// Default settings.
const (
	// DefaultMaxAttempts is the cap used when a dead-letter target is set
	// without an explicit maximum number of attempts.
	DefaultMaxAttempts = 3
	// DefaultMaxInProcessDelay is the longest RetryAfter delay waited out in
	// process before the copy is written; a longer one goes to the delay
	// queue.
	DefaultMaxInProcessDelay = 5 * time.Second
	// MaxQueueDelay is the longest delay one SQS message can carry; longer
	// delays are chained through several messages.
	MaxQueueDelay = 15 * time.Minute
)

// Action is what a runner does with a record after its handler returned.
type Action uint8

const (
	// Settle marks the record handled: the checkpoint may pass it.
	Settle Action = iota + 1
	// Leave keeps the record unsettled: it holds the checkpoint and comes
	// again (Lambda delivers it again with everything after it; the
	// long-running consumer delivers it again in process after a backoff).
	Leave
	// Copy writes a counted copy of the record (x-ruststream-retry-count
	// incremented) to the stream it came from, after Decision.Wait, and
	// settles the record once the copy is written.
	Copy
	// DelayQueue sends the record to the delay queue with Decision.Wait as
	// its delay, and settles it once the message is written; the adapter
	// forwards it to the stream when the delay has passed.
	DelayQueue
	// DeadLetter writes the record to the dead-letter target and settles it
	// once written.
	DeadLetter
	// Retire settles the record without writing it anywhere (the cap was
	// reached and no dead-letter target is set); it is logged.
	Retire
)

// String returns the action's log name.
func (a Action) String() string {
	switch a {
	case Settle:
		return "settle"
	case Leave:
		return "leave"
	case Copy:
		return "copy"
	case DelayQueue:
		return "delay_queue"
	case DeadLetter:
		return "dead_letter"
	case Retire:
		return "retire"
	default:
		return fmt.Sprintf("action(%d)", a)
	}
}

// Writes reports whether the action writes the record somewhere before it
// settles.
func (a Action) Writes() bool { return a == Copy || a == DelayQueue || a == DeadLetter }

// Policy is the retry configuration. The zero Policy leaves every retry
// unsettled, as Lambda's own retries would.
type Policy struct {
	// MaxAttempts caps deliveries of a record, counting the first one; 0
	// means no cap (DefaultMaxAttempts when DeadLetter is set).
	MaxAttempts int
	// DeadLetter reports whether a dead-letter target (stream or queue) is
	// configured.
	DeadLetter bool
	// DeadLetterDrops sends Drop outcomes to the dead-letter target too.
	DeadLetterDrops bool
	// DelayQueue reports whether a delay queue is configured.
	DelayQueue bool
	// MaxInProcessDelay is the longest delay waited out in process; 0 means
	// DefaultMaxInProcessDelay.
	MaxInProcessDelay time.Duration
}

// Counted reports whether retries become counted copies.
func (p Policy) Counted() bool { return p.MaxAttempts > 0 || p.DeadLetter }

// Cap returns the effective maximum number of attempts, 0 for none.
func (p Policy) Cap() int {
	if p.MaxAttempts > 0 {
		return p.MaxAttempts
	}
	if p.DeadLetter {
		return DefaultMaxAttempts
	}
	return 0
}

// Decision is what to do with one record.
type Decision struct {
	Action Action
	// Wait is how long to wait before writing the copy (Copy), or the delay
	// to give the delay queue (DelayQueue).
	Wait time.Duration
	// Note explains a decision worth logging ("cap reached after 3
	// attempts", "delay 10m exceeds ... without WithDelayQueue").
	Note string
	// Uncounted, with Leave, says the handler attempted nothing (the record
	// is held by a run in progress elsewhere): its next delivery counts no
	// attempt.
	Uncounted bool
}

// Decide returns what to do with a record whose handler returned out on
// delivery attempt (1 for the first delivery). remaining is the time left
// before the runner stops waiting (the invocation deadline minus the margin
// in Lambda mode); a negative value means no limit.
func (p Policy) Decide(out message.Outcome, attempt int, remaining time.Duration) Decision {
	switch out.Kind() {
	case message.KindAck:
		return Decision{Action: Settle}
	case message.KindDrop:
		if p.DeadLetterDrops && p.DeadLetter {
			return Decision{Action: DeadLetter, Note: "dropped"}
		}
		return Decision{Action: Settle}
	case message.KindRetryAfter:
		if heldElsewhere(out) {
			return Decision{Action: Leave, Uncounted: true}
		}
		if d, ok := p.capped(attempt); ok {
			return d
		}
		wait := out.Delay()
		maxIn := p.MaxInProcessDelay
		if maxIn <= 0 {
			maxIn = DefaultMaxInProcessDelay
		}
		if wait <= maxIn && (remaining < 0 || wait <= remaining) {
			return Decision{Action: Copy, Wait: wait}
		}
		if p.DelayQueue {
			return Decision{Action: DelayQueue, Wait: wait}
		}
		d := p.retry(attempt)
		d.Note = fmt.Sprintf("retry_after(%s) is longer than can be waited here and no delay queue is set (WithDelayQueue): behaving as Retry", wait)
		return d
	default: // Retry, and the invalid zero Outcome
		if heldElsewhere(out) {
			return Decision{Action: Leave, Uncounted: true}
		}
		return p.retry(attempt)
	}
}

// heldElsewhere reports whether out attempted nothing because a run in
// progress elsewhere holds its record.
func heldElsewhere(out message.Outcome) bool {
	err := out.Err()
	return err != nil && errors.Is(err, message.ErrHeldElsewhere)
}

func (p Policy) retry(attempt int) Decision {
	if !p.Counted() {
		return Decision{Action: Leave}
	}
	if d, ok := p.capped(attempt); ok {
		return d
	}
	return Decision{Action: Copy}
}

// capped returns the cap decision when attempt reached the cap.
func (p Policy) capped(attempt int) (Decision, bool) {
	c := p.Cap()
	if c == 0 || attempt < c {
		return Decision{}, false
	}
	note := fmt.Sprintf("cap reached after %d attempts", attempt)
	if p.DeadLetter {
		return Decision{Action: DeadLetter, Note: note}, true
	}
	return Decision{Action: Retire, Note: note}, true
}
