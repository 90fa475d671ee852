package message_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/message"
)

func TestOutcome(t *testing.T) {
	err := errors.New("boom")
	tests := []struct {
		o       message.Outcome
		kind    message.Kind
		settles bool
		str     string
	}{
		{message.Ack(), message.KindAck, true, "ack"},
		{message.Drop(err), message.KindDrop, true, "drop: boom"},
		{message.Retry(nil), message.KindRetry, false, "retry"},
		{message.RetryAfter(2*time.Second, err), message.KindRetryAfter, false, "retry_after(2s): boom"},
		{message.RetryAfter(-time.Second, nil), message.KindRetryAfter, false, "retry_after(0s)"},
		{message.Outcome{}, message.KindInvalid, false, "invalid"},
	}
	for _, tt := range tests {
		if tt.o.Kind() != tt.kind || tt.o.Settles() != tt.settles || tt.o.String() != tt.str {
			t.Errorf("%v: kind %v settles %v", tt.o, tt.o.Kind(), tt.o.Settles())
		}
	}
	if message.Drop(err).Err() != err || message.RetryAfter(time.Minute, nil).Delay() != time.Minute {
		t.Error("accessors")
	}
}

func TestStreamARNFromSource(t *testing.T) {
	for in, want := range map[string]string{
		"arn:aws:kinesis:us-east-1:123456789012:stream/orders":                           "arn:aws:kinesis:us-east-1:123456789012:stream/orders",
		"arn:aws:kinesis:us-east-1:123456789012:stream/orders/consumer/efo-1:1700000000": "arn:aws:kinesis:us-east-1:123456789012:stream/orders",
		"": "",
	} {
		if got := message.StreamARNFromSource(in); got != want {
			t.Errorf("StreamARNFromSource(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRetryCount(t *testing.T) {
	for v, want := range map[string]int{"": 0, "1": 1, "41": 41, "-3": 0, "x": 0, "99999999999999999999999": math.MaxInt,
		"9223372036854775807": math.MaxInt, "+7": 7, "-0": 0, "12a": 0, "99999999999999999999999x": 0, "+": 0} {
		var h envelope.Headers
		if v != "" {
			h.Set(envelope.RetryCountHeader, v)
		}
		if got := message.RetryCount(h); got != want {
			t.Errorf("RetryCount(%q) = %d, want %d", v, got, want)
		}
	}
}

func TestReplyWithoutRunner(t *testing.T) {
	var m message.Message
	if err := m.Reply(t.Context(), message.Reply{Payload: []byte("x")}); !errors.Is(err, message.ErrNoReplier) {
		t.Errorf("Reply = %v", err)
	}
}

func TestAttemptOfSaturates(t *testing.T) {
	for v, want := range map[string]int{"": 1, "2": 3, "9223372036854775806": math.MaxInt, "9223372036854775807": math.MaxInt, "99999999999999999999999": math.MaxInt} {
		var h envelope.Headers
		if v != "" {
			h.Set(envelope.RetryCountHeader, v)
		}
		if got := message.AttemptOf(h); got != want {
			t.Errorf("AttemptOf(%q) = %d, want %d", v, got, want)
		}
	}
}
