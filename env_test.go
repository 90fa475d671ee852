package lambdaadapter

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

var nopHandler = HandlerFunc(func(context.Context, *Message) Outcome { return Ack() })

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnvironmentBothModes(t *testing.T) {
	env := map[string]string{
		"LAMBDAADAPTER_CONCURRENCY": "8", "LAMBDAADAPTER_LOG_LEVEL": "error", "LAMBDAADAPTER_MAX_ATTEMPTS": "4",
		"LAMBDAADAPTER_MAX_INPROCESS_DELAY": "2s", "LAMBDAADAPTER_DEAD_LETTER_STREAM": "dead", "LAMBDAADAPTER_DEAD_LETTER_DROPS": "true",
		"LAMBDAADAPTER_DELAY_QUEUE": "https://sqs.us-east-1.amazonaws.com/1/delays", "LAMBDAADAPTER_REPLY_STREAM": "replies",
		"LAMBDAADAPTER_REPLY_PARTITION_KEY": "k", "LAMBDAADAPTER_DEADLINE_MARGIN": "300ms",
		"LAMBDAADAPTER_STREAM": "orders", "LAMBDAADAPTER_STREAM_ARN": "arn:aws:kinesis:us-east-1:123456789012:stream/orders",
		"LAMBDAADAPTER_OWNER_ID": "w-1", "LAMBDAADAPTER_START": "2026-01-02T03:04:05Z",
		"LAMBDAADAPTER_LEASE_DURATION": "6s", "LAMBDAADAPTER_CHECKPOINT_INTERVAL": "2s", "LAMBDAADAPTER_SHUTDOWN_TIMEOUT": "20s",
		"LAMBDAADAPTER_LIST_INTERVAL": "1m", "LAMBDAADAPTER_GETRECORDS_LIMIT": "500",
		"LAMBDAADAPTER_RETRY_BACKOFF": "1s", "LAMBDAADAPTER_MAX_RETRY_BACKOFF": "1m", "LAMBDAADAPTER_BALANCE": "count",
	}
	clients := []Option{WithKinesisClient(awsfake.NewKinesis()), WithSQSClient(awsfake.NewSQS()), WithLeaseStore(lease.NewMemory())}
	// One environment serves both modes: each mode's settings are ignored
	// by the other, never an error.
	for _, mode := range []string{"lambda", "ecs"} {
		env["LAMBDAADAPTER_MODE"] = mode
		f, s, err := fromProcess(nopHandler, nil, envOf(env), clients)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if (f != nil) != (mode == "lambda") || (s != nil) != (mode == "ecs") {
			t.Errorf("mode %s: function %v, service %v", mode, f != nil, s != nil)
		}
		if mode == "ecs" {
			if got := s.Owner(); got != "w-1" {
				t.Errorf("owner %q, want w-1 from LAMBDAADAPTER_OWNER_ID", got)
			}
		}
	}
}

func TestEnvironmentBadValues(t *testing.T) {
	for name, v := range map[string]string{
		"LAMBDAADAPTER_MODE": "kubernetes", "LAMBDAADAPTER_LOG_LEVEL": "loud", "LAMBDAADAPTER_CONCURRENCY": "0",
		"LAMBDAADAPTER_MAX_ATTEMPTS": "many", "LAMBDAADAPTER_MAX_INPROCESS_DELAY": "5", "LAMBDAADAPTER_DEAD_LETTER_DROPS": "yes",
		"LAMBDAADAPTER_DEADLINE_MARGIN": "-1s", "LAMBDAADAPTER_START": "yesterday", "LAMBDAADAPTER_LEASE_DURATION": "10",
		"LAMBDAADAPTER_CHECKPOINT_INTERVAL": "0s", "LAMBDAADAPTER_SHUTDOWN_TIMEOUT": "x", "LAMBDAADAPTER_LIST_INTERVAL": "1",
		"LAMBDAADAPTER_GETRECORDS_LIMIT": "10001", "LAMBDAADAPTER_RETRY_BACKOFF": "fast", "LAMBDAADAPTER_MAX_RETRY_BACKOFF": "0",
		"LAMBDAADAPTER_BALANCE": "cpu",
	} {
		_, err := environment(envOf(map[string]string{name: v}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: err = %v, want one naming the variable", name, v, err)
		}
	}
}

func TestModeFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
		ok   bool
	}{
		{nil, "", false},
		{[]string{"-mode=ecs"}, "ecs", true},
		{[]string{"--mode=lambda"}, "lambda", true},
		{[]string{"-verbose", "-mode", "ecs"}, "ecs", true},
		{[]string{"-port", "80", "--mode", "ecs"}, "ecs", true},
		{[]string{"--", "-mode=ecs"}, "", false},
		{[]string{"-model=x"}, "", false},
	} {
		got, ok := modeFlag(tt.args)
		if got != tt.want || ok != tt.ok {
			t.Errorf("modeFlag(%q) = %q, %v; want %q, %v", tt.args, got, ok, tt.want, tt.ok)
		}
	}
}

// TestHandlePrecedence: the environment, then the -mode argument, then the
// options given in code.
func TestHandlePrecedence(t *testing.T) {
	clients := []Option{WithKinesisClient(awsfake.NewKinesis()), WithLeaseStore(lease.NewMemory())}
	env := envOf(map[string]string{"LAMBDAADAPTER_MODE": "ecs", "LAMBDAADAPTER_STREAM": "orders"})
	for _, tt := range []struct {
		args []string
		opts []Option
		want Mode
	}{
		{nil, nil, ModeECS},
		{[]string{"-mode=lambda"}, nil, ModeLambda},
		{[]string{"-mode=lambda"}, []Option{WithMode(ModeECS)}, ModeECS},
	} {
		f, s, err := fromProcess(nopHandler, tt.args, env, append(clients, tt.opts...))
		if err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if got := map[bool]Mode{true: ModeLambda, false: ModeECS}[f != nil]; got != tt.want || (s != nil) != (tt.want == ModeECS) {
			t.Errorf("args %q: mode %v, want %v", tt.args, got, tt.want)
		}
	}
	if _, _, err := fromProcess(nopHandler, []string{"-mode=k8s"}, envOf(nil), clients); err == nil || !strings.Contains(err.Error(), "-mode") {
		t.Errorf("-mode=k8s: err = %v", err)
	}
}

// TestHandleConfigErrorExits: a configuration error is one line on stderr
// and exit status 1, not a panic.
func TestHandleConfigErrorExits(t *testing.T) {
	if os.Getenv("LAMBDAADAPTER_TEST_HANDLE") == "1" {
		Handle(nopHandler)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHandleConfigErrorExits$")
	cmd.Env = append(os.Environ(), "LAMBDAADAPTER_TEST_HANDLE=1", "LAMBDAADAPTER_CONCURRENCY=zero")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1; stderr %q", err, stderr.String())
	}
	out := strings.TrimSpace(stderr.String())
	if strings.Count(out, "\n") != 0 || !strings.Contains(out, "LAMBDAADAPTER_CONCURRENCY") || strings.Contains(out, "panic") {
		t.Errorf("stderr %q, want one line naming LAMBDAADAPTER_CONCURRENCY", out)
	}
}

func TestLeaseStoreAndTableConflict(t *testing.T) {
	_, err := NewService(nopHandler, WithStream("s"), WithKinesisClient(awsfake.NewKinesis()),
		WithLeaseStore(lease.NewMemory()), WithLeaseTable("leases"))
	if err == nil || !strings.Contains(err.Error(), "WithLeaseTable") {
		t.Errorf("store and table together: err = %v, want an error naming both", err)
	}
}

func TestOutcomeKinds(t *testing.T) {
	for out, want := range map[OutcomeKind]OutcomeKind{
		Ack().Kind(): KindAck, Drop(nil).Kind(): KindDrop, Retry(nil).Kind(): KindRetry,
		RetryAfter(time.Second, nil).Kind(): KindRetryAfter, (Outcome{}).Kind(): KindInvalid,
	} {
		if out != want {
			t.Errorf("kind %v, want %v", out, want)
		}
	}
}

// TestHandleAppliesOptionsOfItsMode: Handle applies the options of the mode
// it picked and ignores the other mode's (an invalid value there is not
// even looked at); OnlyIn scopes shared options to one mode.
func TestHandleAppliesOptionsOfItsMode(t *testing.T) {
	base := []Option{WithKinesisClient(awsfake.NewKinesis()), WithLeaseStore(lease.NewMemory()), WithStream("orders")}
	for _, tt := range []struct {
		mode Mode
		opt  Option
		ok   bool
	}{
		{ModeECS, WithDeadlineMargin(0), true},
		{ModeLambda, WithDeadlineMargin(0), false},
		{ModeLambda, WithRetryBackoff(0, 0), true},
		{ModeECS, WithRetryBackoff(0, 0), false},
		{ModeECS, OnlyIn(ModeLambda, WithConcurrency(0)), true},
		{ModeLambda, OnlyIn(ModeLambda, WithConcurrency(0)), false},
		{ModeLambda, OnlyIn(ModeECS, WithConcurrency(0), WithMode(ModeECS)), true}, // WithMode inside OnlyIn is ignored
	} {
		_, _, err := fromProcess(nopHandler, nil, envOf(nil), append(base, WithMode(tt.mode), tt.opt))
		if (err == nil) != tt.ok {
			t.Errorf("%s mode with %#v: err = %v, want ok=%v", tt.mode, tt.opt, err, tt.ok)
		}
	}
}

// TestEnvironmentSeveralStreams: LAMBDAADAPTER_STREAM with several names,
// comma-separated, reads each of them; a bad one is an error naming it.
func TestEnvironmentSeveralStreams(t *testing.T) {
	clients := []Option{WithKinesisClient(awsfake.NewKinesis()), WithLeaseStore(lease.NewMemory())}
	env := map[string]string{"LAMBDAADAPTER_MODE": "ecs", "LAMBDAADAPTER_STREAM": "orders, payments,refunds"}
	_, s, err := fromProcess(nopHandler, nil, envOf(env), clients)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.group.Streams(); strings.Join(got, ",") != "orders,payments,refunds" {
		t.Errorf("streams %v, want orders, payments and refunds", got)
	}
	env["LAMBDAADAPTER_STREAM"] = "arn:aws:kinesis:us-east-1:123456789012:stream/orders,payments"
	if _, s, err = fromProcess(nopHandler, nil, envOf(env), clients); err != nil {
		t.Fatal(err)
	}
	if got := s.group.Streams(); strings.Join(got, ",") != "orders,payments" {
		t.Errorf("streams %v from an ARN and a name, want orders and payments", got)
	}
	for _, v := range []string{"orders,,payments", ",payments", " ,payments"} {
		env["LAMBDAADAPTER_STREAM"] = v
		if _, _, err := fromProcess(nopHandler, nil, envOf(env), clients); err == nil || !strings.Contains(err.Error(), `""`) {
			t.Errorf("LAMBDAADAPTER_STREAM=%q, an empty name in the list: %v, want an error", v, err)
		}
	}
	// A stream named twice, by name or by ARN, is an error naming it.
	for v, twice := range map[string]string{
		"orders,payments,orders": "orders",
		"orders,arn:aws:kinesis:us-east-1:123456789012:stream/orders": "orders",
		"orders,payments, refunds ,payments":                          "payments",
	} {
		env["LAMBDAADAPTER_STREAM"] = v
		_, _, err := fromProcess(nopHandler, nil, envOf(env), clients)
		if err == nil || !strings.Contains(err.Error(), "stream "+twice+" is named twice") {
			t.Errorf("LAMBDAADAPTER_STREAM=%q: %v, want an error naming stream %s twice", v, err, twice)
		}
	}
}
