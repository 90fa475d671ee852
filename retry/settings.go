package retry

import (
	"errors"
	"fmt"

	"github.com/shardsettle/lambdaadapter/publish"
)

// Settings are what retries need in either mode (lambda.Config and
// consumer.Config embed them): the Policy and the targets that copies, dead
// letters and delay messages are written to.
type Settings struct {
	// Policy decides what retries do. Its DeadLetter and DelayQueue fields
	// are derived from the targets below (Complete).
	Policy Policy
	// Publisher writes copies, replies and dead letters to Kinesis. Without
	// one, a decision to copy leaves the record unsettled (logged).
	Publisher *publish.Publisher
	// Queue writes dead letters and delay messages to SQS.
	Queue *publish.Queue
	// DeadLetterStream is the stream (name or ARN) that capped records go
	// to; DeadLetterQueue the SQS queue URL. At most one may be set.
	DeadLetterStream string
	DeadLetterQueue  string
	// DelayQueue is the SQS queue URL that carries long RetryAfter delays.
	DelayQueue string
}

// Validate reports an error for settings that cannot work.
func (s Settings) Validate() error {
	switch {
	case s.DeadLetterStream != "" && s.DeadLetterQueue != "":
		return errors.New("set a dead-letter stream or a dead-letter queue, not both")
	case s.DeadLetterStream != "" && s.Publisher == nil:
		return errors.New("a dead-letter stream needs a Kinesis publisher")
	case (s.DeadLetterQueue != "" || s.DelayQueue != "") && s.Queue == nil:
		return errors.New("a dead-letter or delay queue needs an SQS client")
	case s.DelayQueue != "" && s.Publisher == nil:
		return errors.New("a delay queue needs a Kinesis publisher to forward delayed records")
	case s.Policy.MaxAttempts < 0:
		return fmt.Errorf("max attempts %d is negative", s.Policy.MaxAttempts)
	case s.Policy.MaxInProcessDelay < 0:
		return fmt.Errorf("max in-process delay %s is negative", s.Policy.MaxInProcessDelay)
	}
	return nil
}

// Complete derives the Policy's DeadLetter and DelayQueue from the targets.
func (s *Settings) Complete() {
	s.Policy.DeadLetter = s.DeadLetterStream != "" || s.DeadLetterQueue != ""
	s.Policy.DelayQueue = s.DelayQueue != ""
}
