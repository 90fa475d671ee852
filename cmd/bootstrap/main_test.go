package main

import (
	"strings"
	"testing"
)

func TestOptions(t *testing.T) {
	tests := []struct {
		env     map[string]string
		wantErr string
	}{
		{map[string]string{}, ""},
		{map[string]string{"LAMBDAADAPTER_CONCURRENCY": "8", "LAMBDAADAPTER_DEADLINE_MARGIN": "250ms", "LAMBDAADAPTER_LOG_LEVEL": "debug",
			"LAMBDAADAPTER_MAX_ATTEMPTS": "3", "LAMBDAADAPTER_DEAD_LETTER_STREAM": "dlq", "LAMBDAADAPTER_DEAD_LETTER_DROPS": "true",
			"LAMBDAADAPTER_DELAY_QUEUE": "http://q", "LAMBDAADAPTER_MAX_INPROCESS_DELAY": "2s", "LAMBDAADAPTER_REPLY_STREAM": "r"}, ""},
		{map[string]string{"LAMBDAADAPTER_CONCURRENCY": "0"}, "LAMBDAADAPTER_CONCURRENCY"},
		{map[string]string{"LAMBDAADAPTER_CONCURRENCY": "many"}, "LAMBDAADAPTER_CONCURRENCY"},
		{map[string]string{"LAMBDAADAPTER_DEADLINE_MARGIN": "500"}, "LAMBDAADAPTER_DEADLINE_MARGIN"},
		{map[string]string{"LAMBDAADAPTER_LOG_LEVEL": "loud"}, "LAMBDAADAPTER_LOG_LEVEL"},
		{map[string]string{"LAMBDAADAPTER_MAX_ATTEMPTS": "-1"}, "LAMBDAADAPTER_MAX_ATTEMPTS"},
		{map[string]string{"LAMBDAADAPTER_MAX_INPROCESS_DELAY": "0s"}, "LAMBDAADAPTER_MAX_INPROCESS_DELAY"},
		{map[string]string{"LAMBDAADAPTER_DEAD_LETTER_DROPS": "yes"}, "LAMBDAADAPTER_DEAD_LETTER_DROPS"},
	}
	for _, tt := range tests {
		opts, logger, err := options(func(k string) string { return tt.env[k] })
		if tt.wantErr == "" {
			if err != nil || logger == nil || len(opts) == 0 {
				t.Errorf("%v: %v", tt.env, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%v: err = %v, want one naming %s", tt.env, err, tt.wantErr)
		}
	}
}

func TestECSOptions(t *testing.T) {
	base := map[string]string{"LAMBDAADAPTER_STREAM": "s"}
	if _, err := ecsOptions(func(k string) string { return base[k] }); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"LAMBDAADAPTER_STREAM":           "",
		"LAMBDAADAPTER_START":            "yesterday",
		"LAMBDAADAPTER_LEASE_DURATION":   "10",
		"LAMBDAADAPTER_GETRECORDS_LIMIT": "10001",
	} {
		env := map[string]string{"LAMBDAADAPTER_STREAM": "s", k: v}
		if _, err := ecsOptions(func(x string) string { return env[x] }); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: err = %v", k, v, err)
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
