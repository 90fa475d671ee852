package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/shardsettle/lambdaadapter"
)

// TestDemoUntilAttempt: until_attempt limits the outcome to the attempts
// before it; from then on the record is acked.
func TestDemoUntilAttempt(t *testing.T) {
	h := demoHandler(slog.New(slog.NewTextHandler(io.Discard, nil)))
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
