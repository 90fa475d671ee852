package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardsettle/lambdaadapter/internal/batchresponse"
	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/publish"
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
	bodies := make([]string, len(ev.Records))
	for i, m := range ev.Records {
		bodies[i] = m.Body
	}
	var failed []string
	cfg := r.e.Config()
	for i, err := range publish.ForwardDelayed(flushCtx, cfg.Publisher, cfg.Queue, cfg.DelayQueue, bodies, time.Now()) {
		if err != nil {
			r.log.LogAttrs(ctx, slog.LevelError, "lambda: cannot forward SQS message; SQS delivers it again",
				slog.String("message_id", ev.Records[i].MessageId), slog.String(engine.AttrError, err.Error()))
			failed = append(failed, ev.Records[i].MessageId)
		}
	}
	return batchresponse.AppendJSON(nil, failed), nil
}
