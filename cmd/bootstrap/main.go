// Command bootstrap is the deployable Lambda binary of lambdaadapter with a
// built-in demonstration handler.
//
// Real deployments build their own main around lambdaadapter.Handle with
// their own handler; this one exists so the adapter can be deployed, demoed
// and tested end to end without writing code. Its handler reads each payload
// as JSON and obeys an optional "outcome" field:
//
//	{"outcome":"ack"}    (or no such field, or a non-JSON payload) → Ack
//	{"outcome":"drop"}   → Drop
//	{"outcome":"retry"}  → Retry
//	{"outcome":"panic"}  → the handler panics (recovered: a retry)
//	{"outcome":"retry_after","delay_ms":3000} → RetryAfter(3s)
//	{"sleep_ms":200}     → sleeps first (cut short by the deadline)
//	{"reply":"text","reply_key":"k"} → publishes a reply first (Message.Reply)
//
// Configuration (environment variables; this is the only place that reads
// them):
//
//	LAMBDAADAPTER_CONCURRENCY         lanes handled at once (default 16)
//	LAMBDAADAPTER_DEADLINE_MARGIN     e.g. 500ms (default 500ms)
//	LAMBDAADAPTER_LOG_LEVEL           debug, info, warn (default) or error
//	LAMBDAADAPTER_MAX_ATTEMPTS        cap on deliveries of a record (WithMaxAttempts)
//	LAMBDAADAPTER_DEAD_LETTER_STREAM  stream name or ARN for capped records
//	LAMBDAADAPTER_DEAD_LETTER_QUEUE   SQS queue URL for capped records
//	LAMBDAADAPTER_DEAD_LETTER_DROPS   "true": Drop outcomes go to the dead-letter target too
//	LAMBDAADAPTER_DELAY_QUEUE         SQS queue URL for long RetryAfter delays
//	LAMBDAADAPTER_MAX_INPROCESS_DELAY longest delay waited in the invocation (default 5s)
//	LAMBDAADAPTER_REPLY_STREAM        default stream of replies
//
// The AWS clients take the standard AWS configuration (region, credentials,
// AWS_ENDPOINT_URL_KINESIS / _SQS for local stand-ins).
//
// Build it for Lambda with:
//
//	CGO_ENABLED=0 GOOS=linux go build -tags lambda.norpc -o bootstrap ./cmd/bootstrap
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/shardsettle/lambdaadapter"
)

func main() {
	opts, logger, err := options(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bootstrap:", err)
		os.Exit(2)
	}
	lambdaadapter.Handle(demoHandler(logger), opts...)
}

// options reads the configuration from getenv.
func options(getenv func(string) string) ([]lambdaadapter.Option, *slog.Logger, error) {
	level := slog.LevelWarn
	if v := getenv("LAMBDAADAPTER_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return nil, nil, fmt.Errorf("LAMBDAADAPTER_LOG_LEVEL: %w", err)
		}
	}
	logger := slog.New(requestIDHandler{slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: level})})
	opts := []lambdaadapter.Option{lambdaadapter.WithLogger(logger)}
	if v := getenv("LAMBDAADAPTER_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, nil, fmt.Errorf("LAMBDAADAPTER_CONCURRENCY=%q: want a whole number ≥ 1", v)
		}
		opts = append(opts, lambdaadapter.WithConcurrency(n))
	}
	if v := getenv("LAMBDAADAPTER_MAX_ATTEMPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, nil, fmt.Errorf("LAMBDAADAPTER_MAX_ATTEMPTS=%q: want a whole number ≥ 1", v)
		}
		opts = append(opts, lambdaadapter.WithMaxAttempts(n))
	}
	if v := getenv("LAMBDAADAPTER_MAX_INPROCESS_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, nil, fmt.Errorf("LAMBDAADAPTER_MAX_INPROCESS_DELAY=%q: want a positive duration such as 5s", v)
		}
		opts = append(opts, lambdaadapter.WithMaxInProcessDelay(d))
	}
	for env, opt := range map[string]func(string) lambdaadapter.Option{
		"LAMBDAADAPTER_DEAD_LETTER_STREAM": lambdaadapter.WithDeadLetterStream,
		"LAMBDAADAPTER_DEAD_LETTER_QUEUE":  lambdaadapter.WithDeadLetterQueue,
		"LAMBDAADAPTER_DELAY_QUEUE":        lambdaadapter.WithDelayQueue,
		"LAMBDAADAPTER_REPLY_STREAM":       lambdaadapter.WithReplyStream,
	} {
		if v := getenv(env); v != "" {
			opts = append(opts, opt(v))
		}
	}
	switch v := getenv("LAMBDAADAPTER_DEAD_LETTER_DROPS"); v {
	case "", "false":
	case "true":
		opts = append(opts, lambdaadapter.WithDeadLetterDrops())
	default:
		return nil, nil, fmt.Errorf("LAMBDAADAPTER_DEAD_LETTER_DROPS=%q: want true or false", v)
	}
	if v := getenv("LAMBDAADAPTER_DEADLINE_MARGIN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, nil, fmt.Errorf("LAMBDAADAPTER_DEADLINE_MARGIN=%q: want a positive duration such as 500ms", v)
		}
		opts = append(opts, lambdaadapter.WithDeadlineMargin(d))
	}
	return opts, logger, nil
}

// requestIDHandler adds the Lambda request id of the invocation to every
// record logged with its context.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		r.AddAttrs(slog.String("request_id", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
