package lambdaadapter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"

	"github.com/shardsettle/lambdaadapter/internal/lambda"
)

// Function runs a Handler in Lambda mode: it is an aws-lambda-go
// lambda.Handler (Invoke) to pass to lambda.Start, and HandleEvent takes a
// decoded event (tests, or a handler of your own that calls it). It is safe
// for concurrent use and holds no per-invocation state between calls.
type Function struct {
	runner *lambda.Runner
}

var _ awslambda.Handler = (*Function)(nil)

// NewFunction returns a Function for h, validating the options once. It
// panics if h is nil (a programmer error) and returns an error for
// contradictory or out-of-range options. It builds no AWS configuration of
// its own: give WithAWSConfig or the clients (WithKinesisClient,
// WithSQSClient) when the options write to AWS (WithMaxAttempts, a
// dead-letter or delay queue or stream, WithReplyStream); without them a
// Function that only acks, drops and retries needs none.
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	...
//	f, err := lambdaadapter.NewFunction(h, lambdaadapter.WithAWSConfig(cfg), lambdaadapter.WithMaxAttempts(5))
//	...
//	lambda.Start(f)
func NewFunction(h Handler, opts ...FunctionOption) (*Function, error) {
	if h == nil {
		panic("lambdaadapter: nil handler")
	}
	return newFunction(h, options(opts))
}

// newFunction builds a Function from options of any kind (Handle passes
// what it filtered for Lambda mode).
func newFunction(h Handler, opts []Option) (*Function, error) {
	c := config{mode: ModeLambda}
	c.apply(opts)
	e, _, err := c.buildEngine(h, nil)
	if err != nil {
		return nil, err
	}
	r, err := lambda.NewRunner(lambda.Config{Engine: e, Concurrency: c.concurrency, DeadlineMargin: c.margin})
	if err != nil {
		return nil, fmt.Errorf("lambdaadapter: %w", err)
	}
	return &Function{runner: r}, nil
}

// WithDeadlineMargin sets how long before the invocation deadline the
// Function stops starting records, cancels the context of running handlers
// and writes what must be written (copies, dead letters) before answering
// (default 500ms). d must be positive.
func WithDeadlineMargin(d time.Duration) FunctionOption {
	return functionOpt(func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, errors.New("deadline margin must be positive"))
		}
		c.margin = d
	})
}

// HandleEvent handles one decoded Kinesis event and returns the partial
// batch response: no item when every record settled, otherwise the sequence
// number of the first unsettled record (one per shard in a multi-shard test
// event). It returns an error only when the event itself cannot be trusted
// (a sequence number that is not a number or does not grow within its shard);
// Lambda then retries the whole batch.
//
// HandleEvent returns when every record settled or was given up on, or at
// ctx's deadline minus the deadline margin, whichever comes first.
func (f *Function) HandleEvent(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	return f.runner.HandleEvent(ctx, ev)
}

// Invoke handles one raw invocation payload and returns the JSON partial
// batch response. It implements aws-lambda-go's lambda.Handler, decoding the
// event without reflection. A malformed payload is answered with an error
// that says what and where (Lambda then retries the whole batch).
func (f *Function) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f.runner.Invoke(ctx, payload)
}
