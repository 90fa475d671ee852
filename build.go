package lambdaadapter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/hooks"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/internal/retry"
)

// validate checks the options once.
func (c *config) validate() error {
	if len(c.errs) > 0 {
		return c.errs[0]
	}
	if c.ecs.store != nil && c.ecs.table != "" {
		return errors.New("set WithLeaseStore or WithLeaseTable, not both")
	}
	switch {
	case c.concurrencySet && c.concurrency < 1:
		return errors.New("concurrency must be at least 1")
	case c.maxAttemptsSet && c.maxAttempts < 1:
		return fmt.Errorf("max attempts must be at least 1, got %d", c.maxAttempts)
	case c.delaySet && c.inProcessDelay <= 0:
		return errors.New("max in-process delay must be positive")
	case c.deadLetterStrm != "" && c.deadLetterQueue != "":
		return errors.New("set WithDeadLetterStream or WithDeadLetterQueue, not both")
	case c.deadLetterDrops && c.deadLetterStrm == "" && c.deadLetterQueue == "":
		return errors.New("WithDeadLetterDrops needs a dead-letter target (WithDeadLetterStream or WithDeadLetterQueue)")
	}
	return nil
}

// writesToKinesis reports whether the options make the adapter write to
// Kinesis whatever the handler does: counted copies, a dead-letter stream,
// delayed copies, replies to a default stream, or (a Service) reading.
func (c *config) writesToKinesis() bool {
	return c.mode == ModeECS || c.maxAttemptsSet || c.deadLetterStrm != "" || c.deadLetterQueue != "" ||
		c.delayQueue != "" || c.replyStream != ""
}

// clients fills in the clients the options need from the AWS
// configuration, and fails naming the option when there is none.
func (c *config) clients() error {
	if c.kinesis == nil {
		switch {
		case c.aws != nil:
			c.kinesis = kinesis.NewFromConfig(*c.aws)
		case c.writesToKinesis():
			return errors.New("no Kinesis client: pass WithAWSConfig(cfg) (cfg from config.LoadDefaultConfig) or WithKinesisClient")
		default:
			// Nothing the options ask for writes to Kinesis; a reply
			// that names a stream fails with this error.
			c.kinesis = noKinesis{}
		}
	}
	if (c.deadLetterQueue != "" || c.delayQueue != "") && c.sqs == nil {
		if c.aws == nil {
			return errors.New("a dead-letter or delay queue needs an SQS client: pass WithAWSConfig(cfg) or WithSQSClient")
		}
		c.sqs = sqs.NewFromConfig(*c.aws)
	}
	return nil
}

// errNoKinesis is the error of a write by an adapter built without a
// Kinesis client.
var errNoKinesis = errors.New("lambdaadapter: no Kinesis client to write with: pass WithAWSConfig or WithKinesisClient")

// noKinesis is the Kinesis client of an adapter whose options write
// nothing to Kinesis: a reply naming a stream gets errNoKinesis.
type noKinesis struct{}

func (noKinesis) PutRecord(context.Context, *kinesis.PutRecordInput, ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	return nil, errNoKinesis
}

func (noKinesis) PutRecords(context.Context, *kinesis.PutRecordsInput, ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	return nil, errNoKinesis
}

// loggerFor returns the adapter's logger: WithLogger's, else NewLogger at
// WithLogLevel's level, else one that discards.
func (c *config) loggerFor() *slog.Logger {
	switch {
	case c.logger != nil:
		return c.logger
	case c.logLevelSet:
		return NewLogger(c.mode, c.logLevel)
	default:
		return slog.New(slog.DiscardHandler)
	}
}

// buildEngine validates the options, builds the clients, the writers and
// the settlement engine both doors run on.
func (c *config) buildEngine(h Handler, bh BatchHandler) (*engine.Engine, *slog.Logger, error) {
	if err := c.validate(); err != nil {
		return nil, nil, fmt.Errorf("lambdaadapter: %w", err)
	}
	if err := c.clients(); err != nil {
		return nil, nil, fmt.Errorf("lambdaadapter: %w", err)
	}
	logger := c.loggerFor()
	popts := []publish.Option{publish.WithLogger(logger)}
	if c.replyKey != "" {
		popts = append(popts, publish.WithPartitionKey(c.replyKey))
	}
	pub, err := publish.NewPublisher(c.kinesis, popts...)
	if err != nil {
		return nil, nil, fmt.Errorf("lambdaadapter: %w", err)
	}
	var queue *publish.Queue
	if c.sqs != nil {
		qopts := []publish.QueueOption{publish.WithQueueLogger(logger)}
		if c.maxMessageBytes != 0 {
			qopts = append(qopts, publish.WithMaxMessageSize(c.maxMessageBytes))
		}
		if queue, err = publish.NewQueue(c.sqs, qopts...); err != nil {
			return nil, nil, fmt.Errorf("lambdaadapter: %w", err)
		}
	}
	e, err := engine.New(engine.Config{
		Handler:      h,
		BatchHandler: bh,
		Policy: retry.Policy{
			MaxAttempts: c.maxAttempts, DeadLetterDrops: c.deadLetterDrops, MaxInProcessDelay: c.inProcessDelay,
		},
		Publisher: pub, Queue: queue,
		DeadLetterStream: c.deadLetterStrm, DeadLetterQueue: c.deadLetterQueue, DelayQueue: c.delayQueue,
		ReplyStream:  c.replyStream,
		Logger:       logger,
		Hooks:        hooks.New(c.hooks...),
		MaxRecordAge: c.maxRecordAge,

		RecycleMessages: c.recycle,
	})
	if err != nil {
		return nil, nil, err
	}
	return e, logger, nil
}
