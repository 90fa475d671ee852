package consumer

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/shardsettle/lambdaadapter/internal/publish"
)

// DelayQueueAPI is the part of *sqs.Client the long-running mode uses to
// forward durable delays: it receives the delay queue's messages and
// deletes those it forwarded.
type DelayQueueAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Settings of the delay-queue forwarder.
const (
	// delayWait is the long poll of one ReceiveMessage call, in seconds.
	delayWait = 20
	// delayVisibility is how long a received message stays invisible, in
	// seconds: a message this worker could not forward (or a worker that
	// died holding it) comes again after it.
	delayVisibility = 60
	// delayBatch is the most messages one ReceiveMessage call returns.
	delayBatch = 10
	// writeTimeout bounds one forward of delay messages (its writes and
	// deletes), and one round of the engine's writes (copies, dead letters,
	// delay messages), retries included.
	writeTimeout = 30 * time.Second
)

// forwardDelays is the delay-queue forwarder of the long-running mode: it
// receives the durable delay messages RetryAfter wrote to Config.DelayQueue
// and, once each is due, writes its record back to its stream as a counted
// copy; a message not yet due (a delay over 15 minutes) goes back to the
// queue for the rest of its wait. A message is deleted only after its record
// (or its next round) was written, so a crash or a failed write loses
// nothing: SQS delivers the message again after its visibility timeout. A
// message that is not a delay message of this adapter is logged and left
// for the queue's redrive policy. It receives until ctx is done; the
// writes and deletes of a forward use writeCtx, which outlives ctx by the
// shutdown timeout.
func (c *Consumer) forwardDelays(ctx, writeCtx context.Context) {
	backoff := time.Second
	queue := c.cfg.Engine.Config().DelayQueue
	for ctx.Err() == nil {
		out, err := c.cfg.DelayReceiver.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queue), MaxNumberOfMessages: delayBatch,
			WaitTimeSeconds: delayWait, VisibilityTimeout: delayVisibility,
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: receiving from the delay queue failed; will retry",
				slog.String("queue", queue), slog.String(attrError, err.Error()))
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		if len(out.Messages) > 0 {
			c.forward(writeCtx, out.Messages)
		}
	}
}

// forward forwards or re-queues msgs (publish.ForwardDelayed) and deletes
// those it handled.
func (c *Consumer) forward(ctx context.Context, msgs []sqstypes.Message) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	bodies := make([]string, len(msgs))
	for i, m := range msgs {
		bodies[i] = aws.ToString(m.Body)
	}
	var done []sqstypes.Message // forwarded or sent round again: delete
	cfg := c.cfg.Engine.Config()
	for i, err := range publish.ForwardDelayed(ctx, cfg.Publisher, cfg.Queue, cfg.DelayQueue, bodies, time.Now()) {
		if err != nil {
			c.log.LogAttrs(ctx, slog.LevelError, "consumer: cannot forward a delay-queue message; it comes again (a foreign one is left for the queue's redrive policy)",
				slog.String("message_id", aws.ToString(msgs[i].MessageId)), slog.String(attrError, err.Error()))
			continue
		}
		done = append(done, msgs[i])
	}
	if len(done) == 0 {
		return
	}
	entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(done))
	for i, m := range done {
		entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
	}
	out, err := c.cfg.DelayReceiver.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(cfg.DelayQueue), Entries: entries})
	switch {
	case err != nil:
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: deleting forwarded delay messages failed; they come again and are forwarded twice",
			slog.Int("messages", len(done)), slog.String(attrError, err.Error()))
	case len(out.Failed) > 0:
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: some forwarded delay messages were not deleted; they come again and are forwarded twice",
			slog.Int("messages", len(out.Failed)), slog.String(attrError, aws.ToString(out.Failed[0].Message)))
	}
}

// forwarder runs the delay-queue forwarder while ctx lives, when the
// engine has a delay queue (in a group of several, the primary alone has
// the receiver and forwards for every stream): receiving stops with ctx; a
// forward under way then gets at most ShutdownTimeout to finish (what it
// did not delete comes again).
func (c *Consumer) forwarder(ctx context.Context) {
	queue := c.cfg.Engine.Config().DelayQueue
	if queue == "" {
		return
	}
	if c.cfg.DelayReceiver == nil {
		if !c.isPrimary() {
			return // the group's primary forwards it for every stream
		}
		c.log.LogAttrs(ctx, slog.LevelWarn, "consumer: this process does not forward the delay queue (no DelayReceiver); subscribe a function running this adapter to it, or its delayed records stay there",
			slog.String("queue", queue))
		return
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopAfter := context.AfterFunc(ctx, func() {
		t := time.NewTimer(c.cfg.ShutdownTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-fctx.Done():
		}
	})
	defer stopAfter()
	c.forwardDelays(ctx, fctx)
}
