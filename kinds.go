package lambdaadapter

import "github.com/shardsettle/lambdaadapter/internal/message"

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
