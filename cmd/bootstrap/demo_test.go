package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardsettle/lambdaadapter"
)

// TestDemoUntilAttempt: until_attempt limits the outcome to the attempts
// before it; from then on the record is acked.
func TestDemoUntilAttempt(t *testing.T) {
	h := demoHandler(slog.New(slog.NewTextHandler(io.Discard, nil)), "")
	tests := []struct {
		payload string
		attempt int
		want    lambdaadapter.OutcomeKind
	}{
		{`{"outcome":"retry","until_attempt":2}`, 1, lambdaadapter.KindRetry},
		{`{"outcome":"retry","until_attempt":2}`, 2, lambdaadapter.KindAck},
		{`{"outcome":"retry","until_attempt":2}`, 5, lambdaadapter.KindAck},
		{`{"outcome":"retry_after","delay_ms":2000,"until_attempt":3}`, 2, lambdaadapter.KindRetryAfter},
		{`{"outcome":"retry_after","delay_ms":2000,"until_attempt":3}`, 3, lambdaadapter.KindAck},
		{`{"outcome":"drop","until_attempt":2}`, 1, lambdaadapter.KindDrop},
		{`{"outcome":"drop","until_attempt":2}`, 2, lambdaadapter.KindAck},
		{`{"outcome":"retry"}`, 9, lambdaadapter.KindRetry},
		{`{"outcome":"retry","until_attempt":0}`, 9, lambdaadapter.KindRetry},
		{`{"outcome":"ack","until_attempt":2}`, 1, lambdaadapter.KindAck},
	}
	for _, tc := range tests {
		m := &lambdaadapter.Message{Payload: []byte(tc.payload), Attempt: tc.attempt}
		if got := h.HandleRecord(t.Context(), m).Kind(); got != tc.want {
			t.Errorf("%s at attempt %d: %v, want %v", tc.payload, tc.attempt, got, tc.want)
		}
	}
	if o := h.HandleRecord(t.Context(), &lambdaadapter.Message{Payload: []byte(`{"outcome":"retry_after","delay_ms":1500,"until_attempt":2}`), Attempt: 1}); o.Delay().Milliseconds() != 1500 {
		t.Errorf("retry_after delay %v, want 1.5s", o.Delay())
	}
}

// TestDemoOutageFile: while the outage file exists every record is retried,
// whatever it asks, and the "record outcome" line says "outage"; once the
// file is gone the record's own outcome applies again.
func TestDemoOutageFile(t *testing.T) {
	var logs bytes.Buffer
	file := filepath.Join(t.TempDir(), "outage")
	h := demoHandler(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), file)
	handle := func(payload string) (lambdaadapter.OutcomeKind, map[string]any) {
		t.Helper()
		logs.Reset()
		m := &lambdaadapter.Message{Payload: []byte(payload), Attempt: 1, ShardID: "shardId-000000000001", SequenceNumber: "42"}
		kind := h.HandleRecord(t.Context(), m).Kind()
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("%s: %d log lines, want a record and a record outcome line: %q", payload, len(lines), lines)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(lines[1]), &out); err != nil || out["msg"] != "record outcome" {
			t.Fatalf("%s: second line %q (%v), want the record outcome line", payload, lines[1], err)
		}
		return kind, out
	}
	if k, out := handle(`{"id":"a"}`); k != lambdaadapter.KindAck || out["outcome"] != "ack" || out["id"] != "a" || out["shard_id"] != "shardId-000000000001" || out["sequence_number"] != "42" {
		t.Errorf("without the file: %v, line %v; want ack", k, out)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{`{"id":"b"}`, `{"id":"c","outcome":"drop"}`, `{"id":"d","outcome":"panic"}`, `not json`} {
		if k, out := handle(p); k != lambdaadapter.KindRetry || out["outcome"] != "outage" {
			t.Errorf("%s during the outage: %v, line %v; want retry, outcome outage", p, k, out)
		}
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if k, out := handle(`{"id":"c","outcome":"drop"}`); k != lambdaadapter.KindDrop || out["outcome"] != "drop" {
		t.Errorf("after the outage: %v, line %v; want drop", k, out)
	}
	if k, out := handle(`{"id":"e","outcome":"retry","until_attempt":1}`); k != lambdaadapter.KindAck || out["outcome"] != "ack" {
		t.Errorf("until_attempt reached: %v, line %v; want ack", k, out)
	}
}

// TestDemoHashRounds: the hashing wrapper runs the handler after it (the
// outcome is the handler's), is the handler itself at 0 rounds, and the
// setting takes whole numbers from 0 to maxHashRounds only.
func TestDemoHashRounds(t *testing.T) {
	h := demoHandler(slog.New(slog.NewTextHandler(io.Discard, nil)), "")
	if withHashRounds(h, 0) == nil {
		t.Fatal("withHashRounds(h, 0) = nil")
	}
	w := withHashRounds(h, 100)
	m := &lambdaadapter.Message{Payload: []byte(`{"outcome":"drop"}`), Attempt: 1}
	if got := w.HandleRecord(t.Context(), m).Kind(); got != lambdaadapter.KindDrop {
		t.Errorf("outcome %v, want the handler's drop", got)
	}
	for v, want := range map[string]int{"": 0, "0": 0, "250": 250, "1000000": 1_000_000} {
		if n, err := parseHashRounds(v); err != nil || n != want {
			t.Errorf("parseHashRounds(%q) = %d, %v; want %d", v, n, err, want)
		}
	}
	for _, v := range []string{"-1", "x", "1.5", "1000001"} {
		if _, err := parseHashRounds(v); err == nil || !strings.Contains(err.Error(), envDemoHashRounds) {
			t.Errorf("parseHashRounds(%q): err = %v, want one naming %s", v, err, envDemoHashRounds)
		}
	}
}
