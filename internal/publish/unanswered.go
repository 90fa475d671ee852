package publish

import (
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// noting is the client's retryer, noting whether an attempt of the call
// got no answer (see noAnswer). The SDK retries such an attempt itself, so
// a call that succeeds in the end may have been applied more than once;
// the publisher reports it (Result.Unanswered, QueueResult.Unanswered).
type noting struct {
	aws.RetryerV2
	seen *bool
}

func (n noting) IsErrorRetryable(err error) bool {
	if noAnswer(err) {
		*n.seen = true
	}
	return n.RetryerV2.IsErrorRetryable(err)
}

// note is what one call passes its client to learn whether an attempt of
// it got no answer: the call options that put noting around the client's
// retryer (one that is not an aws.RetryerV2, none of the SDK's, is left as
// it is), and the flags they set. Notes are pooled, so that a call
// allocates nothing for them.
type note struct {
	seen      bool // an attempt got no answer
	installed bool // noting saw every attempt
	kinesis   [1]func(*kinesis.Options)
	sqs       [1]func(*sqs.Options)
}

var notes = sync.Pool{New: func() any {
	n := new(note)
	n.kinesis[0] = func(o *kinesis.Options) {
		if r, ok := o.Retryer.(aws.RetryerV2); ok {
			o.Retryer = noting{RetryerV2: r, seen: &n.seen}
			n.installed = true
		}
	}
	n.sqs[0] = func(o *sqs.Options) {
		if r, ok := o.Retryer.(aws.RetryerV2); ok {
			o.Retryer = noting{RetryerV2: r, seen: &n.seen}
			n.installed = true
		}
	}
	return n
}}

func getNote() *note { return notes.Get().(*note) }

// done returns whether an attempt of the call, which returned err, got no
// answer, and gives n back to the pool. When noting saw the attempts, it
// knows; otherwise (a client that is no SDK client, or whose retryer could
// not be wrapped) the call's error tells. Only noting can tell a call cut
// by its context while an attempt was on the wire (no answer) from one cut
// while the SDK waited to retry a refused connection (nothing sent).
func (n *note) done(err error) bool {
	seen := n.seen || (!n.installed && err != nil && noAnswer(err))
	n.seen, n.installed = false, false
	notes.Put(n)
	return seen
}
