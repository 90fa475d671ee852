package main

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// build builds what Handle would from setup's handler and options, with
// fake clients instead of the AWS configuration Handle loads.
func build(t *testing.T, m lambdaadapter.Mode, getenv func(string) string) error {
	t.Helper()
	h, opts, err := setup(m, getenv)
	if err != nil {
		return err
	}
	k := lambdaadapter.WithKinesisClient(awsfake.NewKinesis())
	if m == lambdaadapter.ModeECS {
		sopts := []lambdaadapter.ServiceOption{k, lambdaadapter.WithStream("s"), lambdaadapter.WithLeaseStore(lease.NewMemory())}
		for _, o := range opts {
			sopts = append(sopts, o)
		}
		_, err = lambdaadapter.NewService(h, sopts...)
		return err
	}
	fopts := []lambdaadapter.FunctionOption{k}
	for _, o := range opts {
		fopts = append(fopts, o)
	}
	_, err = lambdaadapter.NewFunction(h, fopts...)
	return err
}

// TestSetupFromEnvironment: the bootstrap's own settings (log level,
// metrics; Handle reads the LAMBDAADAPTER_* settings of the adapter, and
// the root package tests those) build in both modes, and a bad one is an
// error naming it.
func TestSetupFromEnvironment(t *testing.T) {
	env := map[string]string{"LAMBDAADAPTER_LOG_LEVEL": "debug", "LAMBDAADAPTER_METRICS": "emf", "LAMBDAADAPTER_DEMO_HASH_ROUNDS": "10"}
	for _, m := range []lambdaadapter.Mode{lambdaadapter.ModeLambda, lambdaadapter.ModeECS} {
		if err := build(t, m, func(k string) string { return env[k] }); err != nil {
			t.Errorf("%v: %v", m, err)
		}
	}
	bad := map[string]string{"LAMBDAADAPTER_LOG_LEVEL": "loud", "LAMBDAADAPTER_METRICS": "prometheus", "LAMBDAADAPTER_DEMO_HASH_ROUNDS": "-1"}
	for k, v := range bad {
		err := build(t, lambdaadapter.ModeLambda, func(x string) string {
			if x == k {
				return v
			}
			return env[x]
		})
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: err = %v, want one naming the variable", k, v, err)
		}
	}
}

func TestRunRejectsBadMode(t *testing.T) {
	var out, errb strings.Builder
	if code := run([]string{"-mode=kubernetes"}, func(string) string { return "" }, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown mode") {
		t.Errorf("code %d, stderr %q", code, errb.String())
	}
	if code := run([]string{"leases"}, func(string) string { return "" }, &out, &errb); code != 2 || !strings.Contains(errb.String(), "-table") {
		t.Errorf("leases without a table: code %d, stderr %q", code, errb.String())
	}
}

// TestHelp: help, -h and --help list the commands and exit 0 without
// starting the Lambda runtime; a command's help shows its flags; an unknown
// command is an error that names it, not a Lambda start.
func TestHelp(t *testing.T) {
	noEnv := func(string) string { return "" }
	for _, args := range [][]string{{"help"}, {"-h"}, {"-help"}, {"--help"}} {
		var out, errb strings.Builder
		code := run(args, noEnv, &out, &errb)
		if code != 0 || errb.Len() != 0 {
			t.Errorf("%v: code %d, stderr %q", args, code, errb.String())
		}
		for _, want := range []string{"bootstrap [-mode=lambda|ecs]", "bootstrap leases -table T -stream S", "bootstrap leases init", "bootstrap idempotency init", "go doc"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: help lacks %q:\n%s", args, want, out.String())
			}
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"help", "leases"}, []string{"bootstrap leases init -table T", "-stream", "-lease-duration", "with its owner index", "add the index to an existing table"}},
		{[]string{"leases", "-h"}, []string{"bootstrap leases init -table T", "-stream", "-lease-duration"}},
		{[]string{"help", "idempotency"}, []string{"bootstrap idempotency init", "-table"}},
		{[]string{"idempotency", "init", "-h"}, []string{"bootstrap idempotency init", "-table"}},
	} {
		var out, errb strings.Builder
		if code := run(c.args, noEnv, &out, &errb); code != 0 {
			t.Errorf("%v: code %d, stderr %q", c.args, code, errb.String())
		}
		got := out.String() + errb.String()
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%v: lacks %q:\n%s", c.args, w, got)
			}
		}
	}
	for _, args := range [][]string{{"leaes"}, {"-mode=ecs", "extra"}, {"help", "nope"}} {
		var out, errb strings.Builder
		if code := run(args, noEnv, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown command") {
			t.Errorf("%v: code %d, stderr %q; want 2 and an unknown command", args, code, errb.String())
		}
		for _, valid := range []string{"leases", "idempotency init", "help", "version"} {
			if !strings.Contains(errb.String(), valid) {
				t.Errorf("%v: the error does not name the command %q: %q", args, valid, errb.String())
			}
		}
	}
}

// TestVersion: `bootstrap version` prints the module's path and version,
// the VCS revision with its time and whether the tree was modified, and the
// Go version, from the build information; without a revision it says so,
// and arguments are refused.
func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/shardsettle/lambdaadapter", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "46aa433"}, {Key: "vcs.time", Value: "2026-12-05T19:40:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{bi, "github.com/shardsettle/lambdaadapter v1.2.3\nrevision 46aa433 (2026-12-05T19:40:00Z), modified\nbuilt with go1.26.8\n"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/shardsettle/lambdaadapter"}},
			"github.com/shardsettle/lambdaadapter (devel)\nrevision unknown (not built from a VCS checkout)\nbuilt with go1.26.8\n"},
	} {
		var out, errb strings.Builder
		if code := versionCommand(nil, func() (*debug.BuildInfo, bool) { return c.bi, true }, &out, &errb); code != 0 || out.String() != c.want {
			t.Errorf("code %d, output %q, want 0 and %q (stderr %q)", code, out.String(), c.want, errb.String())
		}
	}
	var out, errb strings.Builder
	if code := run([]string{"version"}, func(string) string { return "" }, &out, &errb); code != 0 || !strings.Contains(out.String(), "built with go") {
		t.Errorf("bootstrap version: code %d, output %q, stderr %q", code, out.String(), errb.String())
	}
	if code := run([]string{"version", "x"}, func(string) string { return "" }, &out, &errb); code != 2 {
		t.Errorf("bootstrap version x: code %d, want 2", code)
	}
}
