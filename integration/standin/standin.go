package standin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Settings shared by every client and every stand-in.
const (
	// Region is the AWS region every client uses.
	Region = "us-east-1"
	// AccessKeyID is the static access key id every client uses.
	AccessKeyID = "test"
	// SecretAccessKey is the static secret access key every client uses.
	SecretAccessKey = "test"
)

// Environment variables read by Require. Each AWS_ENDPOINT_URL_* variable is
// the one the AWS SDKs read; when it is unset, the endpoint is
// http://127.0.0.1:PORT with PORT from the matching LAMBDAADAPTER_*_PORT
// variable (the one scripts/standins.sh reads), else the default port.
const (
	// EnvKinesisEndpoint names the variable holding the Kinesis endpoint.
	EnvKinesisEndpoint = "AWS_ENDPOINT_URL_KINESIS"
	// EnvSQSEndpoint names the variable holding the SQS endpoint.
	EnvSQSEndpoint = "AWS_ENDPOINT_URL_SQS"
	// EnvDynamoDBEndpoint names the variable holding the DynamoDB endpoint.
	EnvDynamoDBEndpoint = "AWS_ENDPOINT_URL_DYNAMODB"
)

// Default ports of the stand-ins, as scripts/standins.sh starts them.
const (
	// DefaultKinesisPort is kinesis-local's plain HTTP port.
	DefaultKinesisPort = 4568
	// DefaultDynamoDBPort is dynalite's port.
	DefaultDynamoDBPort = 4569
	// DefaultSQSPort is fauxqs's port.
	DefaultSQSPort = 4576
)

// StartHint is the instruction every failure caused by a missing stand-in
// ends with.
const StartHint = "start them with: scripts/standins.sh start (make test does this)"

// Bounds of the helpers. The stand-ins answer in milliseconds; these only
// keep a broken stand-in from hanging a test.
const (
	// probeTimeout bounds Require's check of all three stand-ins.
	probeTimeout = 5 * time.Second
	// setupTimeout bounds creating or deleting one stream or queue,
	// including the wait for ACTIVE.
	setupTimeout = 30 * time.Second
	// pollInterval is the pause between polls that found nothing new.
	pollInterval = 20 * time.Millisecond
	// readCap bounds ReadAll and ReceiveAll on top of their quiet window:
	// the time to read what is already there plus any stretch in which
	// items keep arriving without reaching the number wanted. Hitting it
	// fails the test; it is not how a read normally ends.
	readCap = 2 * time.Minute
	// maxAttempts and maxBackoff tune the SDK retryer: a few quick retries
	// of transient errors, no client-side retry quota.
	maxAttempts = 3
	maxBackoff  = 200 * time.Millisecond
)

// Env holds clients connected to the running stand-ins. Require returns it.
// An Env and its clients are safe for concurrent use; its methods that take a
// testing.TB must be called from the goroutine running that test.
type Env struct {
	// Kinesis is connected to kinesis-local.
	Kinesis *kinesis.Client
	// SQS is connected to fauxqs.
	SQS *sqs.Client
	// DynamoDB is connected to dynalite.
	DynamoDB *dynamodb.Client

	// KinesisEndpoint is the Kinesis endpoint, e.g. http://127.0.0.1:4568.
	KinesisEndpoint string
	// SQSEndpoint is the SQS endpoint, e.g. http://127.0.0.1:4576.
	SQSEndpoint string
	// DynamoDBEndpoint is the DynamoDB endpoint, e.g. http://127.0.0.1:4569.
	DynamoDBEndpoint string

	// Config is the configuration the clients were built from, without
	// endpoints: static credentials, Region and the test retryer. Use it
	// with the endpoint fields to build a client with other options.
	Config aws.Config
}

// Require returns an Env whose clients are connected to the running
// stand-ins. It reads the endpoints from the environment (see
// EnvKinesisEndpoint), insists that each is http:// on a loopback IP address,
// and checks that each stand-in answers a real API call (ListStreams,
// ListQueues, ListTables) within a few seconds. When an endpoint is invalid
// or a stand-in does not answer it fails the test with t.Fatalf, naming every
// stand-in that failed and how to start them (StartHint); it never skips.
func Require(t testing.TB) *Env {
	t.Helper()
	var problems []string
	endpoint := func(env, portEnv string, port int) string {
		raw, err := endpointFromEnv(env, portEnv, port)
		if err != nil {
			problems = append(problems, err.Error())
		}
		return raw
	}
	e := &Env{
		KinesisEndpoint:  endpoint(EnvKinesisEndpoint, "LAMBDAADAPTER_KINESIS_PORT", DefaultKinesisPort),
		SQSEndpoint:      endpoint(EnvSQSEndpoint, "LAMBDAADAPTER_SQS_PORT", DefaultSQSPort),
		DynamoDBEndpoint: endpoint(EnvDynamoDBEndpoint, "LAMBDAADAPTER_DYNAMODB_PORT", DefaultDynamoDBPort),
		Config:           NewConfig(),
	}
	if len(problems) > 0 {
		t.Fatalf("standin: %s", strings.Join(problems, "; "))
	}
	e.Kinesis = kinesis.NewFromConfig(e.Config, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(e.KinesisEndpoint) })
	e.SQS = sqs.NewFromConfig(e.Config, func(o *sqs.Options) { o.BaseEndpoint = aws.String(e.SQSEndpoint) })
	e.DynamoDB = dynamodb.NewFromConfig(e.Config, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(e.DynamoDBEndpoint) })

	ctx, cancel := context.WithTimeout(t.Context(), probeTimeout)
	defer cancel()
	type probe struct {
		name, endpoint, call string
		run                  func(context.Context) error
	}
	probes := []probe{
		{"kinesis-local (Kinesis)", e.KinesisEndpoint, "ListStreams", func(ctx context.Context) error {
			_, err := e.Kinesis.ListStreams(ctx, &kinesis.ListStreamsInput{Limit: aws.Int32(1)})
			return err
		}},
		{"fauxqs (SQS)", e.SQSEndpoint, "ListQueues", func(ctx context.Context) error {
			_, err := e.SQS.ListQueues(ctx, &sqs.ListQueuesInput{MaxResults: aws.Int32(1)})
			return err
		}},
		{"dynalite (DynamoDB)", e.DynamoDBEndpoint, "ListTables", func(ctx context.Context) error {
			_, err := e.DynamoDB.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
			return err
		}},
	}
	errs := make([]error, len(probes))
	done := make(chan struct{})
	for i, p := range probes {
		go func() {
			defer func() { done <- struct{}{} }()
			errs[i] = p.run(ctx)
		}()
	}
	for range probes {
		<-done
	}
	for i, p := range probes {
		if errs[i] != nil {
			problems = append(problems, fmt.Sprintf("%s at %s did not answer %s: %v", p.name, p.endpoint, p.call, errs[i]))
		}
	}
	if len(problems) > 0 {
		t.Fatalf("standin: the local AWS stand-ins are not running:\n\t%s\n%s", strings.Join(problems, "\n\t"), StartHint)
	}
	return e
}

// NewConfig returns the configuration every stand-in client uses: static
// credentials AccessKeyID/SecretAccessKey, Region, and a retryer for tests
// (three attempts, at most 200 ms apart, no retry quota). It reads no
// environment variables and no shared config files. Each call returns a new
// value.
func NewConfig() aws.Config {
	return aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = maxAttempts
				o.MaxBackoff = maxBackoff
				o.RateLimiter = ratelimit.None
			})
		},
	}
}

// Environ returns the environment variables that point an AWS SDK in a child
// process (for example the bootstrap binary under the Lambda emulator) at the
// same stand-ins, as NAME=value strings for exec.Cmd.Env.
func (e *Env) Environ() []string {
	return []string{
		EnvKinesisEndpoint + "=" + e.KinesisEndpoint,
		EnvSQSEndpoint + "=" + e.SQSEndpoint,
		EnvDynamoDBEndpoint + "=" + e.DynamoDBEndpoint,
		"AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
	}
}

// endpointFromEnv returns the endpoint in the variable env, or
// http://127.0.0.1:PORT with PORT from portEnv or port. It returns an error
// unless the endpoint is http:// on a loopback IP address.
func endpointFromEnv(env, portEnv string, port int) (string, error) {
	raw := os.Getenv(env)
	if raw == "" {
		p := os.Getenv(portEnv)
		if p == "" {
			p = fmt.Sprint(port)
		}
		raw = "http://" + net.JoinHostPort("127.0.0.1", p)
	}
	if err := checkLoopback(raw); err != nil {
		return raw, fmt.Errorf("%s=%q: %w", env, raw, err)
	}
	return strings.TrimSuffix(raw, "/"), nil
}

// checkLoopback returns an error unless raw is an http:// URL on a loopback
// IP address with a port and nothing else.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" {
		return fmt.Errorf("want an http:// endpoint of a local stand-in, got scheme %q", u.Scheme)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("want a loopback IP address such as 127.0.0.1 (not a host name), got host %q", u.Hostname())
	}
	if u.Port() == "" {
		return fmt.Errorf("want an explicit port")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("want scheme, host and port only")
	}
	return nil
}

// uniqueName returns a resource name made of the test's name, cut to fit in
// maxLen, and a random suffix. It uses only letters, digits, '-' and '_',
// which every Kinesis stream and SQS queue name accepts.
func uniqueName(t testing.TB, maxLen int) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("standin: random name: %v", err)
	}
	suffix := "-" + hex.EncodeToString(b[:])
	prefix := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, t.Name())
	if room := maxLen - len(suffix); len(prefix) > room {
		prefix = prefix[:room]
	}
	return prefix + suffix
}
