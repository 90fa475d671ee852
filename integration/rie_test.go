//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The tests below run the bootstrap binary's demonstration handler (see
// cmd/bootstrap) under the Lambda Runtime Interface Emulator and compare the
// function's answer byte for byte. The fixtures in testdata are Kinesis
// events shaped exactly as Lambda sends them; each record's payload tells
// the handler what to do ({"outcome":"ack"|"drop"|"retry"|"panic"},
// {"sleep_ms":N}), some through an RSK1 envelope. No test runs in parallel:
// the emulator takes one invocation at a time.

// Sequence numbers used by the fixtures (56 digits, increasing per shard).
const (
	shard0Seq0 = "49668931513214528713491827436154071389215642763207114754"
	shard0Seq1 = "49668931513214528713491827436154072389215642763207122673"
	shard0Seq2 = "49668931513214528713491827436154073389215642763207138511"
	shard1Seq1 = "49668931513236829458690357859295608107488291125713035009"
)

// noFailures is the answer when every record settled.
const noFailures = `{"batchItemFailures":[]}`

// failure is the answer naming seq as the first unsettled record of a single
// shard.
func failure(seq string) string {
	return `{"batchItemFailures":[{"itemIdentifier":"` + seq + `"}]}`
}

// responseCases are the invocations answered with a partial batch response.
var responseCases = []struct {
	name    string
	fixture string
	want    string
}{
	{
		// Plain text, JSON without an outcome, an explicit ack, two
		// RSK1-enveloped JSON payloads (one with an extra header) and
		// binary data: every record is acked.
		name:    "all ack",
		fixture: "all_ack.json",
		want:    noFailures,
	},
	{
		// Record 3 of 5 asks for a retry from inside an RSK1 envelope (so
		// only a decoded envelope reveals it); records before and after it
		// ack or drop.
		name:    "retry in the middle",
		fixture: "retry_middle.json",
		want:    failure(shard0Seq2),
	},
	{
		name:    "first record panics",
		fixture: "panic_first.json",
		want:    failure(shard0Seq0),
	},
	{
		name:    "all drop",
		fixture: "all_drop.json",
		want:    noFailures,
	},
	{
		// Two shards, shard 1's first record ahead of shard 0's, each with a
		// retry in the middle: one identifier per shard, in the order the
		// shards first appear in the event.
		name:    "two shards",
		fixture: "multi_shard.json",
		want: `{"batchItemFailures":[{"itemIdentifier":"` + shard1Seq1 + `"},` +
			`{"itemIdentifier":"` + shard0Seq2 + `"}]}`,
	},
	{
		// Sequence numbers 9, 10, 100 (compact JSON, as on the wire), retry
		// on 10: compared as numbers, not as strings.
		name:    "sequence numbers of different lengths",
		fixture: "short_sequence_numbers.json",
		want:    failure("10"),
	},
}

// TestPartialBatchResponse sends each fixture to a fresh function (a cold
// start each time).
func TestPartialBatchResponse(t *testing.T) {
	for _, tc := range responseCases {
		t.Run(tc.name, func(t *testing.T) {
			e := startEmulator(t, 3)
			got, _ := e.invoke(t, readFixture(t, tc.fixture))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response for %s (-want +got):\n%s", tc.fixture, diff)
			}
		})
	}
}

// TestWarmInvocations sends every fixture twice, one after another, to one
// function process with a single lane: nothing from one invocation leaks
// into the next.
func TestWarmInvocations(t *testing.T) {
	e := startEmulator(t, 3, "LAMBDAADAPTER_CONCURRENCY=1")
	for round := 1; round <= 2; round++ {
		for _, tc := range responseCases {
			got, _ := e.invoke(t, readFixture(t, tc.fixture))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("round %d, %s: response (-want +got):\n%s", round, tc.fixture, diff)
			}
		}
	}
}

// TestDeadline gives the function 2 s with a 500ms margin; record 2 of 3
// sleeps 10 s. The function must answer on its own at about 1.5 s, naming
// record 2, before the emulator's timeout.
func TestDeadline(t *testing.T) {
	const (
		timeout = 2 * time.Second
		margin  = 500 * time.Millisecond
	)
	e := startEmulator(t, int(timeout/time.Second), "LAMBDAADAPTER_DEADLINE_MARGIN="+margin.String())
	// A first invocation starts the function process, so that the timed one
	// measures no cold start (the emulator's clock, like Lambda's, starts
	// after it anyway).
	if got, _ := e.invoke(t, readFixture(t, "all_ack.json")); got != noFailures {
		t.Fatalf("warm-up invocation: response %q, want %q", got, noFailures)
	}
	got, elapsed := e.invoke(t, readFixture(t, "deadline.json"))
	t.Logf("answered after %s", elapsed)
	if strings.Contains(got, "Task timed out") {
		t.Fatalf("the emulator timed the function out: %q", got)
	}
	if diff := cmp.Diff(failure(shard0Seq1), got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if elapsed >= timeout {
		t.Errorf("answered after %s, want before the %s timeout", elapsed, timeout)
	}
	// The answer is due at the deadline minus the margin (1.5 s); much
	// earlier would mean the function gave up on the sleeping record before
	// it had to.
	if earliest := timeout - margin - 300*time.Millisecond; elapsed < earliest {
		t.Errorf("answered after %s, want at least %s (deadline minus margin, less slack)", elapsed, earliest)
	}

	// The cut-off record's handler was cancelled; the process answers the
	// next invocation normally.
	got, _ = e.invoke(t, readFixture(t, "all_ack.json"))
	if diff := cmp.Diff(noFailures, got); diff != "" {
		t.Errorf("next invocation: response (-want +got):\n%s", diff)
	}
}

// TestMalformedEvent sends events that are not valid JSON: the function fails
// the invocation (so Lambda would retry the whole batch) with an error that
// says what is wrong and at which byte offset, and keeps serving. The
// emulator answers a function error with HTTP 200 and aws-lambda-go's error
// body, whose errorType is the Go type name of the error.
func TestMalformedEvent(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		want    string
	}{
		{
			// all_ack.json cut after 2283 of its 4566 bytes, inside a record.
			name:    "truncated",
			fixture: "truncated.json",
			want:    `{"errorMessage":"event: invalid JSON at offset 2283: unexpected end of input","errorType":"SyntaxError"}`,
		},
		{
			// all_drop.json without the comma after the first record's
			// "eventSource" value: byte 387 opens the next key.
			name:    "missing comma",
			fixture: "missing_comma.json",
			want:    `{"errorMessage":"event: invalid JSON at offset 387: expected ',' or '}' after object value","errorType":"SyntaxError"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := startEmulator(t, 3)
			got, _ := e.invoke(t, readFixture(t, tc.fixture))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response for %s (-want +got):\n%s", tc.fixture, diff)
			}

			got, _ = e.invoke(t, readFixture(t, "all_ack.json"))
			if diff := cmp.Diff(noFailures, got); diff != "" {
				t.Errorf("next invocation: response (-want +got):\n%s", diff)
			}
		})
	}
}

// readFixture returns testdata/name.
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
