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
// Long-running mode (bootstrap -mode=ecs, or LAMBDAADAPTER_MODE=ecs) runs the
// same handler as a service that reads the stream itself:
//
//	LAMBDAADAPTER_STREAM              stream name (required)
//	LAMBDAADAPTER_STREAM_ARN          stream ARN (optional)
//	LAMBDAADAPTER_LEASE_TABLE         DynamoDB lease table; unset: in-memory leases (one instance)
//	LAMBDAADAPTER_OWNER_ID            lease owner id (default: ECS task or host + random)
//	LAMBDAADAPTER_START               latest (default), trim_horizon or an RFC 3339 time
//	LAMBDAADAPTER_LEASE_DURATION      default 10s
//	LAMBDAADAPTER_CHECKPOINT_INTERVAL default 1s
//	LAMBDAADAPTER_SHUTDOWN_TIMEOUT    default 10s
//	LAMBDAADAPTER_LIST_INTERVAL       default 30s
//	LAMBDAADAPTER_GETRECORDS_LIMIT    default 1000 (at most 10000)
//
// SIGTERM stops it gracefully: reading stops, records in flight settle, the
// checkpoints are written and the leases released.
//
// Lease table commands:
//
//	bootstrap leases init -table NAME    create the table (PAY_PER_REQUEST)
//	bootstrap leases -table NAME -stream S  print owner, checkpoint, counter,
//	                                      renewal and lag per shard
//
// Build it for Lambda with:
//
//	CGO_ENABLED=0 GOOS=linux go build -tags lambda.norpc -o bootstrap ./cmd/bootstrap
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lease"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "leases" {
		return leasesCommand(args[1:], getenv, stdout, stderr)
	}
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", getenv("LAMBDAADAPTER_MODE"), "lambda (default) or ecs: a long-running service reading the stream itself")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	m, err := lambdaadapter.ParseMode(*mode)
	if err != nil {
		fmt.Fprintln(stderr, "bootstrap:", err)
		return 2
	}
	opts, logger, err := options(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "bootstrap:", err)
		return 2
	}
	if m == lambdaadapter.ModeLambda {
		lambdaadapter.Handle(demoHandler(logger), opts...)
		return 0
	}
	ecsOpts, err := ecsOptions(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "bootstrap:", err)
		return 2
	}
	a, err := lambdaadapter.New(demoHandler(logger), append(opts, ecsOpts...)...)
	if err != nil {
		fmt.Fprintln(stderr, "bootstrap:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger.LogAttrs(ctx, slog.LevelInfo, "bootstrap: long-running mode", slog.String("owner", a.Consumer().Owner()))
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "bootstrap:", err)
		return 1
	}
	return 0
}

// ecsOptions reads the long-running mode's configuration.
func ecsOptions(getenv func(string) string) ([]lambdaadapter.Option, error) {
	opts := []lambdaadapter.Option{lambdaadapter.WithMode(lambdaadapter.ModeECS)}
	stream := getenv("LAMBDAADAPTER_STREAM")
	if stream == "" {
		return nil, errors.New("LAMBDAADAPTER_STREAM: long-running mode needs the stream name")
	}
	opts = append(opts, lambdaadapter.WithStream(stream))
	if v := getenv("LAMBDAADAPTER_STREAM_ARN"); v != "" {
		opts = append(opts, lambdaadapter.WithStreamARN(v))
	}
	if v := getenv("LAMBDAADAPTER_LEASE_TABLE"); v != "" {
		opts = append(opts, lambdaadapter.WithLeaseTable(v))
	}
	owner := getenv("LAMBDAADAPTER_OWNER_ID")
	if owner == "" {
		host, _ := os.Hostname()
		task := ""
		if uri := getenv("ECS_CONTAINER_METADATA_URI_V4"); uri != "" {
			task = path.Base(uri) // the task's container id: unique per task
		}
		owner = lease.NewOwnerID(host, task)
	}
	opts = append(opts, lambdaadapter.WithOwnerID(owner))
	switch v := getenv("LAMBDAADAPTER_START"); {
	case v == "" || v == "latest":
	case v == "trim_horizon":
		opts = append(opts, lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()))
	default:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, fmt.Errorf("LAMBDAADAPTER_START=%q: want latest, trim_horizon or an RFC 3339 time", v)
		}
		opts = append(opts, lambdaadapter.WithStartPosition(lambdaadapter.AtTimestamp(t)))
	}
	for env, opt := range map[string]func(time.Duration) lambdaadapter.Option{
		"LAMBDAADAPTER_LEASE_DURATION":      lambdaadapter.WithLeaseDuration,
		"LAMBDAADAPTER_CHECKPOINT_INTERVAL": lambdaadapter.WithCheckpointInterval,
		"LAMBDAADAPTER_SHUTDOWN_TIMEOUT":    lambdaadapter.WithShutdownTimeout,
		"LAMBDAADAPTER_LIST_INTERVAL":       lambdaadapter.WithListInterval,
	} {
		if v := getenv(env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%s=%q: want a positive duration", env, v)
			}
			opts = append(opts, opt(d))
		}
	}
	if v := getenv("LAMBDAADAPTER_GETRECORDS_LIMIT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return nil, fmt.Errorf("LAMBDAADAPTER_GETRECORDS_LIMIT=%q: want 1..10000", v)
		}
		opts = append(opts, lambdaadapter.WithGetRecordsLimit(n))
	}
	return opts, nil
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
