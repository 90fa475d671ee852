package lambdaadapter

import (
	"errors"

	"github.com/shardsettle/lambdaadapter/internal/message"
)

// ErrWrongMode is wrapped by the error New returns for an option that
// belongs to the other mode (WithLeaseTable in Lambda mode,
// WithDeadlineMargin in long-running mode); the message names the options.
var ErrWrongMode = errors.New("lambdaadapter: option of the other mode")

// wrongModeError names the options of the other mode; it matches
// ErrWrongMode.
type wrongModeError string

func (e wrongModeError) Error() string        { return string(e) }
func (e wrongModeError) Is(target error) bool { return target == ErrWrongMode }

// OutcomeKind is what an Outcome asks for (Outcome.Kind).
type OutcomeKind = message.Kind

// The kinds of Outcome.
const (
	// KindInvalid is the zero Outcome{}: a handler bug, treated as Retry.
	KindInvalid = message.KindInvalid
	// KindAck is Ack().
	KindAck = message.KindAck
	// KindDrop is Drop(err).
	KindDrop = message.KindDrop
	// KindRetry is Retry(err).
	KindRetry = message.KindRetry
	// KindRetryAfter is RetryAfter(d, err).
	KindRetryAfter = message.KindRetryAfter
)
