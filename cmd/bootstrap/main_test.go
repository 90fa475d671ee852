package main

import (
	"strings"
	"testing"

	"github.com/shardsettle/lambdaadapter"
)

func TestAdapterFromEnvironment(t *testing.T) {
	env := map[string]string{
		"AWS_REGION": "us-east-1", "LAMBDAADAPTER_CONCURRENCY": "8", "LAMBDAADAPTER_DEADLINE_MARGIN": "250ms", "LAMBDAADAPTER_LOG_LEVEL": "debug",
		"LAMBDAADAPTER_MAX_ATTEMPTS": "3", "LAMBDAADAPTER_DEAD_LETTER_STREAM": "dlq", "LAMBDAADAPTER_DEAD_LETTER_DROPS": "true",
		"LAMBDAADAPTER_MAX_INPROCESS_DELAY": "2s", "LAMBDAADAPTER_REPLY_STREAM": "r",
		"LAMBDAADAPTER_METRICS": "emf", "LAMBDAADAPTER_MAX_RECORD_AGE": "1h", "LAMBDAADAPTER_METRICS_INTERVAL": "30s",
		// Long-running settings in the same environment are for the other mode.
		"LAMBDAADAPTER_STREAM": "s", "LAMBDAADAPTER_LEASE_DURATION": "5s",
	}
	t.Setenv("AWS_REGION", "us-east-1")
	for _, m := range []lambdaadapter.Mode{lambdaadapter.ModeLambda, lambdaadapter.ModeECS} {
		a, logger, err := adapter(m, func(k string) string { return env[k] })
		if err != nil || logger == nil || a.Mode() != m {
			t.Errorf("%v: adapter: %v", m, err)
		}
	}
	bad := map[string]string{"LAMBDAADAPTER_CONCURRENCY": "0", "LAMBDAADAPTER_LOG_LEVEL": "loud", "LAMBDAADAPTER_DEAD_LETTER_DROPS": "yes",
		"LAMBDAADAPTER_METRICS": "prometheus", "LAMBDAADAPTER_MAX_RECORD_AGE": "-1s"}
	for k, v := range bad {
		_, _, err := adapter(lambdaadapter.ModeLambda, func(x string) string {
			if x == k {
				return v
			}
			return env[x]
		})
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: err = %v, want one naming the variable", k, v, err)
		}
	}
	if _, _, err := adapter(lambdaadapter.ModeECS, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "stream") {
		t.Errorf("long-running mode without a stream: err = %v", err)
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
