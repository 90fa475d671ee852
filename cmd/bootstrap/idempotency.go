package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/idempotency"
)

// The variables of the idempotency helper (package idempotency). They are
// the command's, not lambdaadapter.Handle's: the helper wraps the
// handler.
const (
	envIdempotencyTable            = "LAMBDAADAPTER_IDEMPOTENCY_TABLE"
	envIdempotencyPrefix           = "LAMBDAADAPTER_IDEMPOTENCY_PREFIX"
	envIdempotencyTTL              = "LAMBDAADAPTER_IDEMPOTENCY_TTL"
	envIdempotencyInProgressExpiry = "LAMBDAADAPTER_IDEMPOTENCY_IN_PROGRESS_EXPIRY"
)

// idempotencyCommand implements `bootstrap idempotency init`.
func idempotencyCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	const synopsis = "bootstrap idempotency init [-table T]   create the idempotency table (PAY_PER_REQUEST,\n                                        hash key id, time to live on expiration)"
	if len(args) == 0 || args[0] != "init" {
		fmt.Fprintf(stderr, "Usage:\n%s\n", indent(synopsis))
		if len(args) > 0 && isHelp(args[0]) {
			return 0
		}
		return 2
	}
	fs := newFlagSet("bootstrap idempotency init", synopsis, stderr)
	table := fs.String("table", getenv(envIdempotencyTable), "DynamoDB idempotency table (default: "+envIdempotencyTable+")")
	if code, done := parseFlags(fs, args[1:]); done {
		return code
	}
	if *table == "" {
		fmt.Fprintln(stderr, "bootstrap idempotency init: -table (or "+envIdempotencyTable+") is required")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "bootstrap idempotency init:", err)
		return 1
	}
	err = idempotency.CreateTable(ctx, dynamodb.NewFromConfig(awsCfg), *table)
	switch {
	case errors.Is(err, idempotency.ErrTTLUnsupported):
		fmt.Fprintln(stderr, "bootstrap idempotency init: warning:", err)
		fmt.Fprintf(stdout, "idempotency table %s is ready (PAY_PER_REQUEST, hash key id; time to live NOT enabled: the service does not support it)\n", *table)
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "bootstrap idempotency init:", err)
		return 1
	}
	fmt.Fprintf(stdout, "idempotency table %s is ready (PAY_PER_REQUEST, hash key id, time to live on expiration)\n", *table)
	return 0
}

// withIdempotency wraps h in the idempotency helper when
// LAMBDAADAPTER_IDEMPOTENCY_TABLE is set, and returns h as it is when not.
func withIdempotency(h lambdaadapter.Handler, getenv func(string) string, logger *slog.Logger) (lambdaadapter.Handler, error) {
	table := getenv(envIdempotencyTable)
	if table == "" {
		for _, name := range []string{envIdempotencyPrefix, envIdempotencyTTL, envIdempotencyInProgressExpiry} {
			if getenv(name) != "" {
				return nil, fmt.Errorf("%s is set without %s", name, envIdempotencyTable)
			}
		}
		return h, nil
	}
	opts := []idempotency.Option{idempotency.WithLogger(logger)}
	if v := getenv(envIdempotencyPrefix); v != "" {
		opts = append(opts, idempotency.WithKeyPrefix(v))
	}
	for _, d := range []struct {
		name string
		opt  func(time.Duration) idempotency.Option
	}{
		{envIdempotencyTTL, idempotency.WithTTL},
		{envIdempotencyInProgressExpiry, idempotency.WithInProgressExpiry},
	} {
		v := getenv(d.name)
		if v == "" {
			continue
		}
		dur, err := time.ParseDuration(v)
		if err != nil || dur <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive duration such as 90s or 1h", d.name, v)
		}
		opts = append(opts, d.opt(dur))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envIdempotencyTable, err)
	}
	wrapped, err := idempotency.New(h, dynamodb.NewFromConfig(awsCfg), table, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envIdempotencyTable, err)
	}
	return wrapped, nil
}
