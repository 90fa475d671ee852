package lambdaadapter

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path"
	"syscall"

	awslambda "github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
)

// Mode is how Handle runs a handler: ModeLambda (a Function) or ModeECS (a
// Service). It is the mode hooks see in their events (observe.Mode).
type Mode = observe.Mode

// The two modes.
const (
	// ModeLambda (the default): Lambda invokes the function with batches
	// from its event source mapping.
	ModeLambda = observe.ModeLambda
	// ModeECS: a long-running service (ECS, or any host) reads the stream
	// itself, sharing shards with other instances through leases.
	ModeECS = observe.ModeECS
)

// parseMode parses "lambda" or "ecs" ("" is lambda).
func parseMode(s string) (Mode, error) {
	switch s {
	case "", "lambda":
		return ModeLambda, nil
	case "ecs":
		return ModeECS, nil
	}
	return "", fmt.Errorf("lambdaadapter: unknown mode %q (want lambda or ecs)", s)
}

// modeOpt is WithMode's option: Handle reads it before the others.
type modeOpt Mode

func (modeOpt) apply(*config) {}

// WithMode makes Handle run in mode m, whatever LAMBDAADAPTER_MODE and
// -mode say. NewFunction and NewService do not take it: each is one mode.
func WithMode(m Mode) Option { return modeOpt(m) }

// onlyIn is OnlyIn's option.
type onlyIn struct {
	mode Mode
	opts []Option
}

func (onlyIn) apply(*config) {}

// OnlyIn makes Handle apply opts only when it runs in mode m: one program
// then carries, for example, a concurrency for each mode. Options of one
// mode (WithDeadlineMargin, WithStream, ...) need no OnlyIn: Handle applies
// them in their mode only.
func OnlyIn(m Mode, opts ...Option) Option { return onlyIn{m, opts} }

// forMode returns the options that apply in mode m, in order: shared
// options, options of mode m, and those of OnlyIn(m, ...), flattened.
func forMode(m Mode, opts []Option) []Option {
	var out []Option
	for _, o := range opts {
		switch x := o.(type) {
		case nil, modeOpt:
		case onlyIn:
			if x.mode == m {
				out = append(out, forMode(m, x.opts)...)
			}
		default:
			_, function := o.(FunctionOption)
			_, service := o.(ServiceOption)
			if (m == ModeLambda && function) || (m == ModeECS && service) {
				out = append(out, o)
			}
		}
	}
	return out
}

// modeOf returns the mode the options pick: the last WithMode among them
// (one inside OnlyIn is ignored), else ModeLambda.
func modeOf(opts []Option) Mode {
	m := ModeLambda
	for _, o := range opts {
		if x, ok := o.(modeOpt); ok {
			m = Mode(x)
		}
	}
	return m
}

// Handle runs h and blocks: the whole main of a consumer program. It picks
// the mode at start and builds the door for it: in Lambda mode (the
// default) a Function, and it starts the Lambda runtime loop and never
// returns; in long-running mode a Service, which reads the stream until
// SIGTERM or SIGINT, stops gracefully and returns.
//
// The mode and settings come from, in increasing precedence: the
// LAMBDAADAPTER_* environment (docs/configuration.md), a -mode=ecs (or
// -mode ecs) argument on the command line (read without claiming the
// program's flag set), and opts. Options of the mode not picked are
// ignored (an environment or an option list can serve both modes); wrap
// shared options that should apply in one mode only in OnlyIn. Handle
// loads the default AWS configuration (config.LoadDefaultConfig) unless
// WithAWSConfig is given, and in long-running mode names the instance
// after the host, or the ECS task, unless WithOwnerID is given. Without
// WithLogger or WithLogLevel it logs warnings and errors with NewLogger (in
// Lambda through aws-lambda-go's lambdacontext handler: text, or JSON with
// AWS_LAMBDA_LOG_FORMAT=JSON; in long-running mode JSON lines on stdout).
// A configuration or start-up error (a bad variable, an invalid option, a
// missing stream or lease table) is printed as one line on stderr and the
// program exits with status 1. Programs that want to handle those errors
// themselves use NewFunction or NewService.
func Handle(h Handler, opts ...Option) {
	if h == nil {
		panic("lambdaadapter: nil handler")
	}
	if err := handle(h, os.Args[1:], os.Getenv, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// handle is Handle without the process: it returns the error Handle
// prints.
func handle(h Handler, args []string, getenv func(string) string, opts []Option) error {
	f, s, err := fromProcess(h, args, getenv, opts)
	if err != nil {
		return err
	}
	if s != nil {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		return s.Run(ctx)
	}
	awslambda.Start(f)
	return nil
}

// fromProcess builds the Function or the Service Handle runs: the
// environment, then the -mode argument, then opts, over the process's
// defaults (the AWS configuration, the owner id, the log level).
func fromProcess(h Handler, args []string, getenv func(string) string, opts []Option) (*Function, *Service, error) {
	all, err := environment(getenv)
	if err != nil {
		return nil, nil, err
	}
	if v, ok := modeFlag(args); ok {
		m, err := parseMode(v)
		if err != nil {
			return nil, nil, fmt.Errorf("lambdaadapter: -mode=%s: want lambda or ecs", v)
		}
		all = append(all, WithMode(m))
	}
	all = append(all, opts...)
	mode := modeOf(all)
	all = forMode(mode, all)
	defaults := []Option{WithLogLevel(slog.LevelWarn)}
	var c config
	c.apply(all)
	if c.aws == nil {
		awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
		if err != nil {
			return nil, nil, fmt.Errorf("lambdaadapter: load the default AWS configuration: %w", err)
		}
		defaults = append(defaults, WithAWSConfig(awsCfg))
	}
	if mode == ModeECS {
		host, _ := os.Hostname()
		task := ""
		if uri := getenv("ECS_CONTAINER_METADATA_URI_V4"); uri != "" {
			task = path.Base(uri) // on ECS: the task's container id
		}
		defaults = append(defaults, WithOwnerID(lease.NewOwnerID(host, task)))
		s, err := newService(h, nil, append(defaults, all...))
		return nil, s, err
	}
	f, err := newFunction(h, append(defaults, all...))
	return f, nil, err
}
