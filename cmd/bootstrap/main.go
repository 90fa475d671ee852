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
//	{"outcome":"retry","until_attempt":2} → the outcome on the attempts before
//	                       until_attempt only, Ack from then on (a transient
//	                       failure: here a retry on the first delivery only)
//	{"id":"x"}           → only logged, to tell records apart
//
// Each record is logged at debug level when its handler starts ("record":
// shard_id, sequence_number, partition_key, attempt, bytes, id, command)
// and when it has its outcome ("record outcome": shard_id, sequence_number,
// attempt, id, outcome: ack, drop, retry, retry_after, panic or outage).
//
// A downstream outage, for fault tests (the fault soak in soak/):
//
//	LAMBDAADAPTER_DEMO_OUTAGE_FILE    a file path; while that file exists, every
//	                                  record's outcome is Retry ("outage" in the
//	                                  record outcome line), whatever its command
//	                                  asks (its sleep and reply still run first)
//
// A CPU cost, for load tests (the scale soak in soak/):
//
//	LAMBDAADAPTER_DEMO_HASH_ROUNDS    a whole number N (default 0); each record's payload
//	                                  is hashed N times with SHA-256 before the handler
//	                                  runs: CPU time in proportion to the record's bytes
//
// Configuration (environment variables, read by lambdaadapter.Handle as for
// any program that calls it; docs/configuration.md lists them all):
//
//	LAMBDAADAPTER_CONCURRENCY         lanes handled at once (default 16)
//	LAMBDAADAPTER_DEADLINE_MARGIN     e.g. 500ms (default 500ms)
//	LAMBDAADAPTER_LOG_LEVEL           debug, info, warn (default) or error; in Lambda the
//	                                  lines go through aws-lambda-go's lambdacontext handler
//	                                  (requestId on each; AWS_LAMBDA_LOG_FORMAT=JSON for JSON)
//	LAMBDAADAPTER_MAX_ATTEMPTS        cap on deliveries of a record (WithMaxAttempts)
//	LAMBDAADAPTER_DEAD_LETTER_STREAM  stream name or ARN for capped records
//	LAMBDAADAPTER_DEAD_LETTER_QUEUE   SQS queue URL for capped records
//	LAMBDAADAPTER_DEAD_LETTER_DROPS   "true": Drop outcomes go to the dead-letter target too
//	LAMBDAADAPTER_DELAY_QUEUE         SQS queue URL for long RetryAfter delays
//	LAMBDAADAPTER_MAX_INPROCESS_DELAY longest delay waited in the invocation (default 5s)
//	LAMBDAADAPTER_REPLY_STREAM        default stream of replies
//	LAMBDAADAPTER_REPLY_PARTITION_KEY key of replies that name none
//	LAMBDAADAPTER_MODE                lambda (default) or ecs; the -mode flag wins
//	LAMBDAADAPTER_MAX_RECORD_AGE      records older than this are dead-lettered / dropped
//	LAMBDAADAPTER_METRICS             "emf": CloudWatch Embedded Metric Format lines on
//	                                  stdout (observe/emf); "" or "off": none. Their
//	                                  namespace and service dimension come from
//	                                  POWERTOOLS_METRICS_NAMESPACE and POWERTOOLS_SERVICE_NAME
//	                                  (else the function's name), as in Powertools
//
// The idempotency helper (package idempotency; both modes) wraps the
// handler when its table is set:
//
//	LAMBDAADAPTER_IDEMPOTENCY_TABLE   DynamoDB idempotency table; unset: no helper
//	LAMBDAADAPTER_IDEMPOTENCY_PREFIX  id prefix (default: the function name, else lambdaadapter)
//	LAMBDAADAPTER_IDEMPOTENCY_TTL     how long a completed record is remembered (default 1h)
//	LAMBDAADAPTER_IDEMPOTENCY_IN_PROGRESS_EXPIRY  how long a claim holds (default: until
//	                                  the invocation's deadline; 1m in long-running mode)
//
// The AWS clients take the standard AWS configuration (region, credentials,
// AWS_ENDPOINT_URL_KINESIS / _SQS for local stand-ins).
//
// Long-running mode (bootstrap -mode=ecs, or LAMBDAADAPTER_MODE=ecs) runs the
// same handler as a service that reads the stream itself:
//
//	LAMBDAADAPTER_STREAM              stream name or ARN, or several, comma-separated (required)
//	LAMBDAADAPTER_STREAM_ARN          stream ARN (optional)
//	LAMBDAADAPTER_LEASE_TABLE         DynamoDB lease table; unset: in-memory leases (one instance)
//	LAMBDAADAPTER_OWNER_ID            lease owner id (default: ECS task or host + random)
//	LAMBDAADAPTER_START               latest (default), trim_horizon or an RFC 3339 time
//	LAMBDAADAPTER_LEASE_DURATION      default 10s
//	LAMBDAADAPTER_CHECKPOINT_INTERVAL default 1s
//	LAMBDAADAPTER_METRICS_INTERVAL    metrics flush interval (default 60s)
//	LAMBDAADAPTER_SHUTDOWN_TIMEOUT    default 10s
//	LAMBDAADAPTER_LIST_INTERVAL       default 30s
//	LAMBDAADAPTER_GETRECORDS_LIMIT    default 1000 (at most 10000)
//	LAMBDAADAPTER_RETRY_BACKOFF       first in-process redelivery wait (default 500ms)
//	LAMBDAADAPTER_MAX_RETRY_BACKOFF   longest one (default 30s)
//	LAMBDAADAPTER_EFO_CONSUMER        read with enhanced fan-out as this stream consumer
//	                                  (registered if missing); unset: GetRecords
//
// SIGTERM stops it gracefully: reading stops, records in flight settle, the
// checkpoints are written and the leases released.
//
// bootstrap help (or -h) lists the commands; bootstrap help leases and
// bootstrap help idempotency show a command's flags.
//
// Lease table commands:
//
//	bootstrap leases init -table NAME    create the table (PAY_PER_REQUEST) with its
//	                                      owner index, or add the index to an
//	                                      existing table (run it again after an
//	                                      upgrade; workers keep running)
//	bootstrap leases -table NAME -stream S  print owner, checkpoint, counter,
//	                                      renewal and lag per shard
//
// Idempotency table command:
//
//	bootstrap idempotency init [-table NAME]  create the table (PAY_PER_REQUEST, hash
//	                                      key id, time to live on expiration)
//
// Build it for Lambda with:
//
//	CGO_ENABLED=0 GOOS=linux go build -tags lambda.norpc -o bootstrap ./cmd/bootstrap
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/observe/emf"
)

// envDemoOutageFile names the demonstration handler's outage file (see the
// command documentation).
const envDemoOutageFile = "LAMBDAADAPTER_DEMO_OUTAGE_FILE"

// envDemoHashRounds names the demonstration handler's CPU cost per record
// (see the command documentation).
const envDemoHashRounds = "LAMBDAADAPTER_DEMO_HASH_ROUNDS"

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch {
		case args[0] == "leases":
			return leasesCommand(args[1:], getenv, stdout, stderr)
		case args[0] == "idempotency":
			return idempotencyCommand(args[1:], getenv, stdout, stderr)
		case isHelp(args[0]):
			return helpCommand(args[1:], getenv, stdout, stderr)
		case args[0] == "version":
			return versionCommand(args[1:], debug.ReadBuildInfo, stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("bootstrap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage+"\nFlags of the run:\n"); fs.PrintDefaults() }
	mode := fs.String("mode", getenv("LAMBDAADAPTER_MODE"), "lambda (default) or ecs: a long-running service reading the stream itself")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bootstrap: unknown command %q; the commands are leases, leases init, idempotency init, help and version, or none to run the adapter (-mode=lambda|ecs); bootstrap help explains them\n", fs.Arg(0))
		return 2
	}
	m, err := parseMode(*mode)
	if err != nil {
		fmt.Fprintln(stderr, "bootstrap:", err)
		return 2
	}
	h, opts, err := setup(m, getenv)
	if err != nil {
		fmt.Fprintln(stderr, "bootstrap:", err)
		return 2
	}
	// Handle is the user's own entry: it reads the LAMBDAADAPTER_*
	// environment, loads the AWS configuration, names the instance, and
	// runs a Function under the Lambda runtime or a Service until SIGTERM.
	all := []lambdaadapter.Option{lambdaadapter.WithMode(m)}
	for _, o := range opts {
		all = append(all, o)
	}
	lambdaadapter.Handle(h, all...)
	return 0
}

// parseMode parses -mode: lambda (or empty) or ecs.
func parseMode(s string) (lambdaadapter.Mode, error) {
	switch s {
	case "", "lambda":
		return lambdaadapter.ModeLambda, nil
	case "ecs":
		return lambdaadapter.ModeECS, nil
	}
	return "", fmt.Errorf("unknown mode %q (want lambda or ecs)", s)
}

// setup builds the demonstration handler for mode m and the options the
// bootstrap adds to Handle's (which reads the LAMBDAADAPTER_* settings
// itself): the logger the handler shares, and the metrics hook.
func setup(m lambdaadapter.Mode, getenv func(string) string) (lambdaadapter.Handler, []lambdaadapter.SharedOption, error) {
	level := slog.LevelWarn
	if v := getenv("LAMBDAADAPTER_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return nil, nil, fmt.Errorf("LAMBDAADAPTER_LOG_LEVEL=%q: want debug, info, warn or error", v)
		}
	}
	logger := lambdaadapter.NewLogger(m, level)
	opts := []lambdaadapter.SharedOption{lambdaadapter.WithLogger(logger)}
	switch v := getenv("LAMBDAADAPTER_METRICS"); v {
	case "", "off":
	case "emf":
		// Straight to stdout, never through the logger's level filter.
		opts = append(opts, lambdaadapter.WithHooks(emf.New(os.Stdout, emf.Environment(getenv)...)))
	default:
		return nil, nil, fmt.Errorf("LAMBDAADAPTER_METRICS=%q: want emf or off", v)
	}
	rounds, err := parseHashRounds(getenv(envDemoHashRounds))
	if err != nil {
		return nil, nil, err
	}
	h, err := withIdempotency(withHashRounds(demoHandler(logger, getenv(envDemoOutageFile)), rounds), getenv, logger)
	if err != nil {
		return nil, nil, err
	}
	return h, opts, nil
}
