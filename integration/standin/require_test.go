package standin

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder is a testing.TB that records how Require ends the test instead of
// ending the real one. Fatal and Skip calls stop the calling goroutine, as
// the real ones do.
type recorder struct {
	testing.TB
	fatal   string
	skipped bool
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) Skip(...any)          { r.SkipNow() }
func (r *recorder) Skipf(string, ...any) { r.SkipNow() }
func (r *recorder) SkipNow() {
	r.skipped = true
	runtime.Goexit()
}

// runRequire calls Require on a recorder in its own goroutine and returns the
// recorder and the Env Require returned (nil when it stopped the test).
func runRequire(t *testing.T) (*recorder, *Env) {
	r := &recorder{TB: t}
	var env *Env
	done := make(chan struct{})
	go func() {
		defer close(done)
		env = Require(r)
	}()
	<-done
	return r, env
}

// closedPort returns a loopback port that nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

func TestRequireFailsWithoutStandins(t *testing.T) {
	port := closedPort(t)
	t.Setenv(EnvKinesisEndpoint, "http://127.0.0.1:"+port)
	t.Setenv(EnvSQSEndpoint, "http://127.0.0.1:"+port)
	t.Setenv(EnvDynamoDBEndpoint, "http://127.0.0.1:"+port+"/")

	r, env := runRequire(t)

	if r.skipped {
		t.Fatal("Require skipped the test; want a failure")
	}
	if env != nil {
		t.Fatal("Require returned an Env although nothing listens")
	}
	for _, want := range []string{
		"kinesis-local (Kinesis) at http://127.0.0.1:" + port + " did not answer ListStreams",
		"fauxqs (SQS) at http://127.0.0.1:" + port + " did not answer ListQueues",
		"dynalite (DynamoDB) at http://127.0.0.1:" + port + " did not answer ListTables",
		StartHint,
	} {
		if !strings.Contains(r.fatal, want) {
			t.Errorf("Require failed with:\n%s\nwant it to contain %q", r.fatal, want)
		}
	}
}

func TestRequireRejectsNonLoopbackEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name, endpoint, want string
	}{
		{"host name", "http://localhost:4568", `got host "localhost"`},
		{"remote address", "http://192.0.2.1:4568", `got host "192.0.2.1"`},
		{"https", "https://127.0.0.1:4567", `got scheme "https"`},
		{"no port", "http://127.0.0.1", "want an explicit port"},
		{"path", "http://127.0.0.1:4568/x", "want scheme, host and port only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := closedPort(t)
			t.Setenv(EnvKinesisEndpoint, tc.endpoint)
			t.Setenv(EnvSQSEndpoint, "http://127.0.0.1:"+port)
			t.Setenv(EnvDynamoDBEndpoint, "http://127.0.0.1:"+port)

			r, env := runRequire(t)

			if r.skipped || env != nil {
				t.Fatalf("Require: skipped = %v, env = %v; want a failure", r.skipped, env)
			}
			want := fmt.Sprintf("%s=%q: ", EnvKinesisEndpoint, tc.endpoint)
			if !strings.Contains(r.fatal, want) || !strings.Contains(r.fatal, tc.want) {
				t.Errorf("Require failed with %q, want it to contain %q and %q", r.fatal, want, tc.want)
			}
		})
	}
}

func TestEndpointFromEnvDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, endpoint, port, want string
	}{
		{"default port", "", "", "http://127.0.0.1:4568"},
		{"port variable", "", "14568", "http://127.0.0.1:14568"},
		{"endpoint wins", "http://127.0.0.2:1/", "14568", "http://127.0.0.2:1"},
		{"IPv6 loopback", "http://[::1]:4568", "", "http://[::1]:4568"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvKinesisEndpoint, tc.endpoint)
			t.Setenv("LAMBDAADAPTER_KINESIS_PORT", tc.port)
			got, err := endpointFromEnv(EnvKinesisEndpoint, "LAMBDAADAPTER_KINESIS_PORT", DefaultKinesisPort)
			if err != nil {
				t.Fatalf("endpointFromEnv: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("endpointFromEnv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUniqueName(t *testing.T) {
	for _, max := range []int{maxStreamName, maxQueueName - len(".fifo"), 20} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			a, b := uniqueName(t, max), uniqueName(t, max)
			if a == b {
				t.Errorf("two names are both %q", a)
			}
			for _, n := range []string{a, b} {
				if len(n) > max {
					t.Errorf("%q has %d bytes, want at most %d", n, len(n), max)
				}
				if strings.Trim(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
					t.Errorf("%q has characters outside [A-Za-z0-9_-]", n)
				}
				if !strings.HasPrefix(n, "TestUniqueName-"[:min(len("TestUniqueName-"), max-13)]) {
					t.Errorf("%q does not start with the test's name", n)
				}
			}
		})
	}
}
