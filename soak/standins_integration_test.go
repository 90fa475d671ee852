//go:build integration

package soak

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dynamodbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardsettle/lambdaadapter/integration/standin"
)

// envReuse, set to "running", makes the soak use the stand-ins the
// environment points at (AWS_ENDPOINT_URL_*, as scripts/standins.sh env
// prints them; make test's integration target) instead of starting its own.
const envReuse = "LAMBDAADAPTER_SOAK_STANDINS"

// repoRoot is the repository's root (the soak module is soak/ in it).
func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(wd)
	if _, err := os.Stat(filepath.Join(root, "scripts", "standins.sh")); err != nil {
		t.Fatalf("soak: %s is not the repository root (no scripts/standins.sh): run the soak from soak/", root)
	}
	return root
}

// startStandins returns the stand-ins to use: the running ones when
// LAMBDAADAPTER_SOAK_STANDINS=running, else its own, started with
// scripts/standins.sh in out/standins on the ports of
// LAMBDAADAPTER_KINESIS_PORT, LAMBDAADAPTER_KINESIS_TLS_PORT,
// LAMBDAADAPTER_DYNAMODB_PORT and LAMBDAADAPTER_SQS_PORT or on free ones, and
// stopped when the test ends. Its own state directory means it never stops
// stand-ins it did not start.
func startStandins(t *testing.T, out string) *standin.Env {
	switch v := os.Getenv(envReuse); v {
	case "running":
		return standin.Require(t)
	case "":
	default:
		t.Fatalf("%s=%q: want running or nothing", envReuse, v)
	}
	root := repoRoot(t)
	script := filepath.Join(root, "scripts", "standins.sh")
	env := []string{"LAMBDAADAPTER_STANDINS_DIR=" + filepath.Join(out, "standins")}
	for _, name := range []string{"LAMBDAADAPTER_KINESIS_PORT", "LAMBDAADAPTER_KINESIS_TLS_PORT", "LAMBDAADAPTER_DYNAMODB_PORT", "LAMBDAADAPTER_SQS_PORT"} {
		port := os.Getenv(name)
		if port == "" {
			port = freePort(t)
		}
		env = append(env, name+"="+port)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(script, args...)
		cmd.Env = append(os.Environ(), env...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("soak: %s %s: %v\n%s", script, strings.Join(args, " "), err, b)
		}
	}
	run("install")
	t.Cleanup(func() {
		cmd := exec.Command(script, "stop")
		cmd.Env = append(os.Environ(), env...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("soak: %s stop: %v\n%s", script, err, b)
		}
	})
	run("start")
	cmd := exec.Command(script, "env")
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("soak: %s env: %v", script, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if ok && strings.HasPrefix(name, "AWS_") {
			t.Setenv(name, value)
		}
	}
	return standin.Require(t)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// envBootstrap names a bootstrap binary built elsewhere to run instead of
// building cmd/bootstrap: to hold an older build (one without a fix) to the
// checker, which must then fail.
const envBootstrap = "LAMBDAADAPTER_SOAK_BOOTSTRAP"

// buildBootstrap builds cmd/bootstrap into out, or returns
// $LAMBDAADAPTER_SOAK_BOOTSTRAP when it is set.
func buildBootstrap(t *testing.T, out string) string {
	if path := os.Getenv(envBootstrap); path != "" {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Fatalf("soak: %s=%s is missing or not executable (%v)", envBootstrap, path, err)
		}
		t.Logf("soak: running the bootstrap %s (%s), not a build of this checkout", path, envBootstrap)
		return path
	}
	path := filepath.Join(out, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", path, "./cmd/bootstrap")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soak: building the bootstrap binary: %v\n%s", err, b)
	}
	return path
}

// findRIE returns the Runtime Interface Emulator: $LAMBDAADAPTER_RIE or
// bin/aws-lambda-rie (make tools installs it). It fails the run, never
// skips, when it is missing.
func findRIE(t *testing.T) string {
	path := os.Getenv("LAMBDAADAPTER_RIE")
	if path == "" {
		path = filepath.Join(repoRoot(t), "bin", "aws-lambda-rie")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("soak: the Lambda Runtime Interface Emulator %s is missing or not executable (%v); install it with make tools (scripts/install-rie.sh)", path, err)
	}
	return path
}

func deleteTable(env *standin.Env, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := env.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	var missing *dynamodbtypes.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		fmt.Fprintf(os.Stderr, "soak: delete table %s: %v\n", table, err)
	}
}

// baseEnviron is the harness's environment without the variables that
// would change how a bootstrap process (or the emulator, which passes its
// environment on) behaves: AWS_*, LAMBDAADAPTER_*, _LAMBDA*, LOG_LEVEL.
func baseEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "AWS_"), strings.HasPrefix(name, "LAMBDAADAPTER_"),
			strings.HasPrefix(name, "_LAMBDA"), name == "_HANDLER", name == "LOG_LEVEL":
			continue
		}
		env = append(env, kv)
	}
	return env
}
