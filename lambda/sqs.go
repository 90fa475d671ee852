package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardsettle/lambdaadapter/batchresponse"
	"github.com/shardsettle/lambdaadapter/publish"
	"github.com/shardsettle/lambdaadapter/retry"
)

// isSQSEvent reports whether payload looks like an SQS event, for an
// invocation the Kinesis decoder refused.
func isSQSEvent(payload []byte) bool {
	return bytes.Contains(payload, []byte(`"aws:sqs"`))
}

// InvokeSQS handles an invocation from the delay queue: each message is a
// delayed copy written by this adapter. A message that is due is written to
// its stream; one that is not yet due (a delay over 15 minutes) goes back to
// the delay queue for the rest of its delay. The answer is an SQS partial
// batch response naming the messages that could not be forwarded; SQS
// delivers them again, so a delayed record is never lost. A message that is
// not a delay message of this adapter is reported as failed and logged: let
// the queue's redrive policy move it aside.
func (r *Runner) InvokeSQS(ctx context.Context, payload []byte) ([]byte, error) {
	var ev events.SQSEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("lambda: invalid SQS event: %w", err)
	}
	flushCtx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		flushCtx, cancel = context.WithDeadline(ctx, dl.Add(-r.margin/5))
		defer cancel()
	}
	var failed []string
	var recs []publish.Record
	var recIDs []string
	now := time.Now()
	for _, m := range ev.Records {
		d, ours, err := publish.ParseDelayed([]byte(m.Body))
		if !ours || err != nil {
			if err == nil {
				err = errors.New("not a lambdaadapter delay message")
			}
			r.log.LogAttrs(ctx, slog.LevelError, "lambda: cannot forward SQS message", slog.String("message_id", m.MessageId), errAttr(err))
			failed = append(failed, m.MessageId)
			continue
		}
		if left, due := d.Left(now); !due {
			if err := r.chain(flushCtx, m.Body, left); err != nil {
				r.log.LogAttrs(ctx, slog.LevelError, "lambda: cannot chain delay message", slog.String("message_id", m.MessageId), errAttr(err))
				failed = append(failed, m.MessageId)
			}
			continue
		}
		recs = append(recs, d.Record())
		recIDs = append(recIDs, m.MessageId)
	}
	if len(recs) > 0 {
		if r.cfg.Publisher == nil {
			r.log.LogAttrs(ctx, slog.LevelError, "lambda: no Kinesis client to forward delayed records")
			failed = append(failed, recIDs...)
		} else {
			for i, res := range r.cfg.Publisher.PutBatch(flushCtx, recs) {
				if res.Err != nil {
					r.log.LogAttrs(ctx, slog.LevelError, "lambda: forwarding a delayed record failed; SQS delivers it again",
						slog.String("message_id", recIDs[i]), errAttr(res.Err))
					failed = append(failed, recIDs[i])
				}
			}
		}
	}
	return batchresponse.AppendJSON(nil, failed), nil
}

// chain sends body back to the delay queue for the rest of its delay.
func (r *Runner) chain(ctx context.Context, body string, left time.Duration) error {
	if r.cfg.Queue == nil || r.cfg.DelayQueue == "" {
		return errors.New("lambda: no delay queue configured (WithDelayQueue) to chain a delay longer than 15 minutes")
	}
	_, err := r.cfg.Queue.Send(ctx, r.cfg.DelayQueue, publish.QueueMessage{Body: body, Delay: min(left, retry.MaxQueueDelay)})
	return err
}
