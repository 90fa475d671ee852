package main

import (
	"strings"
	"testing"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/idempotency"
)

func TestIdempotencyFromEnvironment(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	env := map[string]string{
		"LAMBDAADAPTER_STREAM": "s", "LAMBDAADAPTER_IDEMPOTENCY_TABLE": "idem", "LAMBDAADAPTER_IDEMPOTENCY_PREFIX": "orders",
		"LAMBDAADAPTER_IDEMPOTENCY_TTL": "2h", "LAMBDAADAPTER_IDEMPOTENCY_IN_PROGRESS_EXPIRY": "30s",
	}
	getenv := func(k string) string { return env[k] }
	for _, m := range []lambdaadapter.Mode{lambdaadapter.ModeLambda, lambdaadapter.ModeECS} {
		if err := build(t, m, getenv); err != nil {
			t.Errorf("%v: adapter with the idempotency helper: %v", m, err)
		}
	}
	logger := lambdaadapter.NewLogger(lambdaadapter.ModeLambda, 0)
	demo := demoHandler(logger, "")
	h, err := withIdempotency(demo, getenv, logger)
	if err != nil {
		t.Fatal(err)
	}
	ih, ok := h.(*idempotency.Handler)
	if !ok {
		t.Fatalf("handler is a %T, want the idempotency helper", h)
	}
	if id, _ := ih.ID(&lambdaadapter.Message{ShardID: "shardId-000000000000", SequenceNumber: "1"}); !strings.HasPrefix(id, "orders#") {
		t.Errorf("id %q: the prefix was not applied", id)
	}
	if h, err := withIdempotency(demo, func(string) string { return "" }, logger); err != nil || h == nil {
		t.Errorf("without a table: %v", err)
	} else if _, wrapped := h.(*idempotency.Handler); wrapped {
		t.Error("without a table the handler is wrapped")
	}

	bad := map[string]string{
		"LAMBDAADAPTER_IDEMPOTENCY_TTL":                "soon",
		"LAMBDAADAPTER_IDEMPOTENCY_IN_PROGRESS_EXPIRY": "-1s",
		"LAMBDAADAPTER_IDEMPOTENCY_PREFIX":             "a#b",
	}
	for k, v := range bad {
		err := build(t, lambdaadapter.ModeLambda, func(x string) string {
			if x == k {
				return v
			}
			return env[x]
		})
		if err == nil || !strings.Contains(err.Error(), "IDEMPOTENCY") {
			t.Errorf("%s=%q: err = %v, want one naming the variable", k, v, err)
		}
	}
	// A setting without the table is a mistake, not ignored.
	err = build(t, lambdaadapter.ModeLambda, func(x string) string {
		if x == "LAMBDAADAPTER_IDEMPOTENCY_TTL" {
			return "1h"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "without LAMBDAADAPTER_IDEMPOTENCY_TABLE") {
		t.Errorf("TTL without a table: err = %v", err)
	}
}

func TestIdempotencyCommandUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"idempotency"}, "bootstrap idempotency init [-table T]"},
		{[]string{"idempotency", "show"}, "bootstrap idempotency init [-table T]"},
		{[]string{"idempotency", "init"}, "-table (or LAMBDAADAPTER_IDEMPOTENCY_TABLE) is required"},
		{[]string{"idempotency", "init", "-tabel", "x"}, "flag provided but not defined"},
	} {
		var out, errb strings.Builder
		if code := run(tc.args, func(string) string { return "" }, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: code %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
