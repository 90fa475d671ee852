package lambdaadapter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/shardsettle/lambdaadapter/internal/consumer"
)

// environment returns the options the LAMBDAADAPTER_* environment variables
// set, read with getenv (os.Getenv when nil). Handle applies them before its
// own options, so options given in code win. Settings that belong to one mode
// are wrapped in OnlyIn: one environment serves both modes. A bad value is an
// error naming the variable.
//
//	variable                            option                       mode
//	LAMBDAADAPTER_MODE                  WithMode: lambda or ecs      both
//	LAMBDAADAPTER_LOG_LEVEL             WithLogLevel                 both
//	LAMBDAADAPTER_CONCURRENCY           WithConcurrency              both
//	LAMBDAADAPTER_MAX_ATTEMPTS          WithMaxAttempts              both
//	LAMBDAADAPTER_MAX_INPROCESS_DELAY   WithMaxInProcessDelay        both
//	LAMBDAADAPTER_DEAD_LETTER_STREAM    WithDeadLetterStream         both
//	LAMBDAADAPTER_DEAD_LETTER_QUEUE     WithDeadLetterQueue          both
//	LAMBDAADAPTER_DEAD_LETTER_DROPS     WithDeadLetterDrops (true)   both
//	LAMBDAADAPTER_DELAY_QUEUE           WithDelayQueue               both
//	LAMBDAADAPTER_REPLY_STREAM          WithReplyStream              both
//	LAMBDAADAPTER_REPLY_PARTITION_KEY   WithReplyPartitionKey        both
//	LAMBDAADAPTER_MAX_RECORD_AGE        WithMaxRecordAge             both
//	LAMBDAADAPTER_DEADLINE_MARGIN       WithDeadlineMargin           lambda
//	LAMBDAADAPTER_STREAM                WithStream (required)        ecs
//	                                    (several, comma-separated: WithStreams)
//	LAMBDAADAPTER_STREAM_ARN            WithStreamARN                ecs
//	LAMBDAADAPTER_LEASE_TABLE           WithLeaseTable               ecs
//	LAMBDAADAPTER_OWNER_ID              WithOwnerID                  ecs
//	LAMBDAADAPTER_START                 WithStartPosition: latest,   ecs
//	                                    trim_horizon or RFC 3339 time
//	LAMBDAADAPTER_LEASE_DURATION        WithLeaseDuration            ecs
//	LAMBDAADAPTER_CHECKPOINT_INTERVAL   WithCheckpointInterval       ecs
//	LAMBDAADAPTER_METRICS_INTERVAL      WithMetricsInterval          ecs
//	LAMBDAADAPTER_SHUTDOWN_TIMEOUT      WithShutdownTimeout          ecs
//	LAMBDAADAPTER_LIST_INTERVAL         WithListInterval             ecs
//	LAMBDAADAPTER_GETRECORDS_LIMIT      WithGetRecordsLimit          ecs
//	LAMBDAADAPTER_RETRY_BACKOFF         WithRetryBackoff: base       ecs
//	LAMBDAADAPTER_MAX_RETRY_BACKOFF     WithRetryBackoff: max        ecs
//	LAMBDAADAPTER_EFO_CONSUMER          WithEnhancedFanOut           ecs
//	LAMBDAADAPTER_BALANCE               WithBalanceByCount (count);  ecs
//	                                    load, the default
//
// Durations are Go durations (500ms, 10s, 2m).
func environment(getenv func(string) string) ([]Option, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var (
		opts, lambdaOnly, ecsOnly []Option
		errs                      []error
	)
	bad := func(name, v, want string) {
		errs = append(errs, fmt.Errorf("lambdaadapter: %s=%q: want %s", name, v, want))
	}
	str := func(name string, opt func(string) Option, to *[]Option) {
		if v := getenv(name); v != "" {
			*to = append(*to, opt(v))
		}
	}
	// durOf parses a positive duration; ok is false when unset or bad (a
	// bad one is reported).
	durOf := func(name string) (d time.Duration, ok bool) {
		v := getenv(name)
		if v == "" {
			return 0, false
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			bad(name, v, "a positive duration such as 500ms or 10s")
			return 0, false
		}
		return d, true
	}
	dur := func(name string, to *[]Option, opt func(time.Duration) Option) {
		if d, ok := durOf(name); ok {
			*to = append(*to, opt(d))
		}
	}
	num := func(name string, lo, hi int, to *[]Option, opt func(int) Option) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < lo || n > hi {
				bad(name, v, fmt.Sprintf("a whole number from %d to %d", lo, hi))
				return
			}
			*to = append(*to, opt(n))
		}
	}

	if v := getenv("LAMBDAADAPTER_MODE"); v != "" {
		m, err := parseMode(v)
		if err != nil {
			bad("LAMBDAADAPTER_MODE", v, "lambda or ecs")
		} else {
			opts = append(opts, WithMode(m))
		}
	}
	if v := getenv("LAMBDAADAPTER_LOG_LEVEL"); v != "" {
		var l slog.Level
		if err := l.UnmarshalText([]byte(v)); err != nil {
			bad("LAMBDAADAPTER_LOG_LEVEL", v, "debug, info, warn or error")
		} else {
			opts = append(opts, WithLogLevel(l))
		}
	}
	num("LAMBDAADAPTER_CONCURRENCY", 1, 1<<20, &opts, opt(WithConcurrency))
	num("LAMBDAADAPTER_MAX_ATTEMPTS", 1, 1<<30, &opts, opt(WithMaxAttempts))
	dur("LAMBDAADAPTER_MAX_INPROCESS_DELAY", &opts, opt(WithMaxInProcessDelay))
	dur("LAMBDAADAPTER_MAX_RECORD_AGE", &opts, opt(WithMaxRecordAge))
	str("LAMBDAADAPTER_DEAD_LETTER_STREAM", opt(WithDeadLetterStream), &opts)
	str("LAMBDAADAPTER_DEAD_LETTER_QUEUE", opt(WithDeadLetterQueue), &opts)
	str("LAMBDAADAPTER_DELAY_QUEUE", opt(WithDelayQueue), &opts)
	str("LAMBDAADAPTER_REPLY_STREAM", opt(WithReplyStream), &opts)
	str("LAMBDAADAPTER_REPLY_PARTITION_KEY", opt(WithReplyPartitionKey), &opts)
	switch v := getenv("LAMBDAADAPTER_DEAD_LETTER_DROPS"); v {
	case "", "false":
	case "true":
		opts = append(opts, WithDeadLetterDrops())
	default:
		bad("LAMBDAADAPTER_DEAD_LETTER_DROPS", v, "true or false")
	}

	dur("LAMBDAADAPTER_DEADLINE_MARGIN", &lambdaOnly, opt(WithDeadlineMargin))

	if v := getenv("LAMBDAADAPTER_STREAM"); v != "" {
		// One stream, or several separated by commas (WithStreams).
		first, rest, _ := strings.Cut(v, ",")
		// The first is WithStream's (its ARN may come from
		// LAMBDAADAPTER_STREAM_ARN), given by name or ARN like the rest.
		if strings.TrimSpace(first) == "" {
			// WithStream("") would be no stream, not a bad one: an empty
			// name is an error as in the rest of the list.
			ecsOnly = append(ecsOnly, WithStreams(""))
		} else {
			ecsOnly = append(ecsOnly, WithStream(strings.TrimSpace(first)))
		}
		if rest != "" {
			var more []string
			for s := range strings.SplitSeq(rest, ",") {
				more = append(more, strings.TrimSpace(s))
			}
			ecsOnly = append(ecsOnly, WithStreams(more...))
		}
	}
	str("LAMBDAADAPTER_STREAM_ARN", opt(WithStreamARN), &ecsOnly)
	str("LAMBDAADAPTER_LEASE_TABLE", opt(WithLeaseTable), &ecsOnly)
	str("LAMBDAADAPTER_OWNER_ID", opt(WithOwnerID), &ecsOnly)
	switch v := getenv("LAMBDAADAPTER_START"); {
	case v == "":
	case strings.EqualFold(v, "latest"):
		ecsOnly = append(ecsOnly, WithStartPosition(Latest()))
	case strings.EqualFold(v, "trim_horizon"):
		ecsOnly = append(ecsOnly, WithStartPosition(TrimHorizon()))
	default:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			bad("LAMBDAADAPTER_START", v, "latest, trim_horizon or an RFC 3339 time")
		} else {
			ecsOnly = append(ecsOnly, WithStartPosition(AtTimestamp(t)))
		}
	}
	dur("LAMBDAADAPTER_LEASE_DURATION", &ecsOnly, opt(WithLeaseDuration))
	dur("LAMBDAADAPTER_CHECKPOINT_INTERVAL", &ecsOnly, opt(WithCheckpointInterval))
	dur("LAMBDAADAPTER_METRICS_INTERVAL", &ecsOnly, opt(WithMetricsInterval))
	dur("LAMBDAADAPTER_SHUTDOWN_TIMEOUT", &ecsOnly, opt(WithShutdownTimeout))
	dur("LAMBDAADAPTER_LIST_INTERVAL", &ecsOnly, opt(WithListInterval))
	num("LAMBDAADAPTER_GETRECORDS_LIMIT", 1, 10000, &ecsOnly, opt(WithGetRecordsLimit))
	str("LAMBDAADAPTER_EFO_CONSUMER", opt(WithEnhancedFanOut), &ecsOnly)
	switch v := getenv("LAMBDAADAPTER_BALANCE"); v {
	case "", "load":
	case "count":
		ecsOnly = append(ecsOnly, WithBalanceByCount())
	default:
		bad("LAMBDAADAPTER_BALANCE", v, "load or count")
	}
	base, baseSet := durOf("LAMBDAADAPTER_RETRY_BACKOFF")
	maxBackoff, maxSet := durOf("LAMBDAADAPTER_MAX_RETRY_BACKOFF")
	if baseSet || maxSet {
		if !baseSet {
			base = consumer.DefaultRetryBackoff
		}
		if !maxSet {
			maxBackoff = consumer.DefaultMaxRetryBackoff
		}
		ecsOnly = append(ecsOnly, WithRetryBackoff(base, maxBackoff))
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(lambdaOnly) > 0 {
		opts = append(opts, OnlyIn(ModeLambda, lambdaOnly...))
	}
	if len(ecsOnly) > 0 {
		opts = append(opts, OnlyIn(ModeECS, ecsOnly...))
	}
	return opts, nil
}

// NewLogger returns the logger WithLogLevel sets up, at level l for mode m:
// in Lambda mode aws-lambda-go's lambdacontext handler (the requestId of
// the invocation on every line; format and level also follow
// AWS_LAMBDA_LOG_FORMAT and AWS_LAMBDA_LOG_LEVEL), in long-running mode
// JSON lines on stdout. Handlers may log through it too.
func NewLogger(m Mode, l slog.Level) *slog.Logger {
	if m == ModeLambda {
		return slog.New(levelHandler{min: l, Handler: lambdacontext.NewLogHandler()})
	}
	return slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: l}))
}

// levelHandler drops records below min before its handler sees them.
type levelHandler struct {
	min slog.Level
	slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelHandler{h.min, h.Handler.WithAttrs(attrs)}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{h.min, h.Handler.WithGroup(name)}
}

// modeFlag finds -mode (or --mode) in a program's arguments without
// claiming its flag set: "-mode=ecs" or "-mode ecs", before any "--".
func modeFlag(args []string) (string, bool) {
	for i, a := range args {
		if a == "--" {
			break
		}
		switch {
		case a == "-mode" || a == "--mode":
			if i+1 < len(args) {
				return args[i+1], true
			}
		case strings.HasPrefix(a, "-mode=") || strings.HasPrefix(a, "--mode="):
			return a[strings.IndexByte(a, '=')+1:], true
		}
	}
	return "", false
}

// opt turns an option constructor of one argument into one that returns an
// Option, for the environment's table.
func opt[T any, O Option](f func(T) O) func(T) Option {
	return func(v T) Option { return f(v) }
}
