package lambda_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/lambda"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/settle"
)

// msg builds a message; "shard:seq" and key.
func msg(shard, seq, key string) message.Message {
	return message.Message{ShardID: shard, SequenceNumber: seq, PartitionKey: key, Attempt: 1}
}

// script is a handler whose outcome per sequence number is given; unlisted
// records ack.
type script map[string]string

func (s script) HandleRecord(ctx context.Context, m *message.Message) message.Outcome {
	switch s[m.SequenceNumber] {
	case "retry":
		return message.Retry(errors.New("test retry"))
	case "retry_after":
		return message.RetryAfter(time.Second, errors.New("test retry after"))
	case "drop":
		return message.Drop(errors.New("test drop"))
	case "panic":
		panic("test panic")
	case "zero":
		return message.Outcome{}
	default:
		return message.Ack()
	}
}

// newRunner returns a Runner of h with cfg, its engine logging to logger
// (nil: nowhere).
func newRunner(t *testing.T, h message.Handler, cfg lambda.Config, logger ...*slog.Logger) *lambda.Runner {
	t.Helper()
	ec := engine.Config{Handler: h}
	if len(logger) > 0 {
		ec.Logger = logger[0]
	}
	e, err := engine.New(ec)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine = e
	r, err := lambda.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func seqs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i+1)
	}
	return out
}

func TestRunResponse(t *testing.T) {
	s := seqs("4959033827149025660855969253836157109592157598913658", 6) // 55 digits
	tests := []struct {
		name   string
		msgs   []message.Message
		script script
		conc   int
		want   []string
	}{
		{"all ack", shard1(s, "k"), nil, 4, nil},
		{"first fails", shard1(s, "k"), script{s[0]: "retry"}, 4, []string{s[0]}},
		{"last fails", shard1(s, "k"), script{s[5]: "retry"}, 4, []string{s[5]}},
		{"middle fails, later ones ack (one key)", shard1(s, "k"), script{s[2]: "retry"}, 4, []string{s[2]}},
		{"middle fails, later ones ack (distinct keys)", shard1Keys(s), script{s[2]: "retry"}, 4, []string{s[2]}},
		{"middle fails, later ones ack (one lane)", shard1Keys(s), script{s[2]: "retry"}, 1, []string{s[2]}},
		{"two fail: the first is reported", shard1Keys(s), script{s[4]: "retry", s[1]: "retry"}, 4, []string{s[1]}},
		{"all drop", shard1Keys(s), script{s[0]: "drop", s[1]: "drop", s[2]: "drop", s[3]: "drop", s[4]: "drop", s[5]: "drop"}, 4, nil},
		{"panic", shard1Keys(s), script{s[3]: "panic"}, 4, []string{s[3]}},
		{"retry_after behaves as retry", shard1Keys(s), script{s[1]: "retry_after"}, 4, []string{s[1]}},
		{"zero outcome is a retry", shard1Keys(s), script{s[4]: "zero"}, 4, []string{s[4]}},
		{"drop then retry", shard1Keys(s), script{s[0]: "drop", s[1]: "retry"}, 4, []string{s[1]}},
		{
			"multi-shard: first unsettled of each shard, in order of appearance",
			[]message.Message{
				msg("shardId-000000000002", "100", "a"), msg("shardId-000000000001", "7", "b"),
				msg("shardId-000000000002", "101", "c"), msg("shardId-000000000001", "8", "d"),
				msg("shardId-000000000002", "102", "e"), msg("shardId-000000000001", "9", "f"),
				msg("shardId-000000000003", "5", "g"),
			},
			script{"101": "retry", "102": "retry", "8": "panic"}, 4,
			[]string{"101", "8"},
		},
		{
			"sequence numbers of different digit lengths",
			[]message.Message{msg("s", "9", "a"), msg("s", "10", "b"), msg("s", "100", "c"), msg("s", "1000", "d")},
			script{"100": "retry"}, 4,
			[]string{"100"},
		},
		{
			"longer is later even when it sorts first as a string",
			[]message.Message{msg("s", "99", "a"), msg("s", "100", "b")},
			script{"99": "retry"}, 4,
			[]string{"99"},
		},
		{"empty batch", nil, nil, 4, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRunner(t, tt.script, lambda.Config{Concurrency: tt.conc})
			got, err := r.Run(t.Context(), tt.msgs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("failures (-want +got):\n%s", diff)
			}
			raw, err := r.RunJSON(t.Context(), nil, tt.msgs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantJSON(tt.want), string(raw)); diff != "" {
				t.Errorf("JSON (-want +got):\n%s", diff)
			}
		})
	}
}

func wantJSON(ids []string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = `{"itemIdentifier":"` + id + `"}`
	}
	return `{"batchItemFailures":[` + strings.Join(parts, ",") + `]}`
}

func shard1(s []string, key string) []message.Message {
	out := make([]message.Message, len(s))
	for i, q := range s {
		out[i] = msg("shardId-000000000000", q, key)
	}
	return out
}

func shard1Keys(s []string) []message.Message {
	out := make([]message.Message, len(s))
	for i, q := range s {
		out[i] = msg("shardId-000000000000", q, fmt.Sprintf("key-%d", i))
	}
	return out
}

func TestRunRejectsUntrustworthyBatches(t *testing.T) {
	tests := []struct {
		name    string
		msgs    []message.Message
		wantErr error
	}{
		{"same record twice", []message.Message{msg("s", "10", "a"), msg("s", "10", "a")}, settle.ErrOutOfOrder},
		{"sequence going back", []message.Message{msg("s", "10", "a"), msg("s", "9", "a")}, settle.ErrOutOfOrder},
		{"not a number", []message.Message{msg("s", "12a", "a")}, settle.ErrInvalidSequence},
		{"empty sequence number", []message.Message{msg("s", "", "a")}, settle.ErrInvalidSequence},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			h := message.HandlerFunc(func(context.Context, *message.Message) message.Outcome {
				calls.Add(1)
				return message.Ack()
			})
			_, err := newRunner(t, h, lambda.Config{}).Run(t.Context(), tt.msgs)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "lambda: record ") {
				t.Errorf("error %q does not say which record", err)
			}
			if calls.Load() != 0 {
				t.Errorf("handler ran %d times on an untrustworthy batch", calls.Load())
			}
		})
	}
}

// TestRunOrderPerKey checks that records of one key are handled one after
// another in stream order, while keys run in parallel.
func TestRunOrderPerKey(t *testing.T) {
	const keys, perKey = 20, 50
	var msgs []message.Message
	n := 0
	for i := range perKey {
		for k := range keys {
			n++
			msgs = append(msgs, msg("s", fmt.Sprint(1000+n), fmt.Sprintf("k%d", k)))
			_ = i
		}
	}
	var mu sync.Mutex
	seen := map[string][]string{}
	running := map[string]bool{}
	var maxPar, par atomic.Int32
	h := message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
		mu.Lock()
		if running[m.PartitionKey] {
			mu.Unlock()
			t.Errorf("key %s handled twice at once", m.PartitionKey)
			return message.Ack()
		}
		running[m.PartitionKey] = true
		seen[m.PartitionKey] = append(seen[m.PartitionKey], m.SequenceNumber)
		mu.Unlock()
		p := par.Add(1)
		for {
			cur := maxPar.Load()
			if p <= cur || maxPar.CompareAndSwap(cur, p) {
				break
			}
		}
		for range 1000 { // give other lanes a chance to overlap
			_ = fmt.Sprint()
		}
		par.Add(-1)
		mu.Lock()
		running[m.PartitionKey] = false
		mu.Unlock()
		return message.Ack()
	})
	got, err := newRunner(t, h, lambda.Config{Concurrency: 8}).Run(t.Context(), msgs)
	if err != nil || got != nil {
		t.Fatalf("Run = %v, %v", got, err)
	}
	want := map[string][]string{}
	for _, m := range msgs {
		want[m.PartitionKey] = append(want[m.PartitionKey], m.SequenceNumber)
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("per-key order (-want +got):\n%s", diff)
	}
	if maxPar.Load() > 8 {
		t.Errorf("%d lanes ran at once, limit 8", maxPar.Load())
	}
}

// TestRunStopsKeyAfterUnsettled checks that after a record is left
// unsettled nothing later on its shard starts: Lambda redelivers them.
func TestRunStopsKeyAfterUnsettled(t *testing.T) {
	msgs := []message.Message{msg("s", "1", "a"), msg("s", "2", "a"), msg("s", "3", "a"), msg("t", "1", "a")}
	var mu sync.Mutex
	var handled []string
	h := message.HandlerFunc(func(_ context.Context, m *message.Message) message.Outcome {
		mu.Lock()
		handled = append(handled, m.ShardID+"/"+m.SequenceNumber)
		mu.Unlock()
		if m.ShardID == "s" && m.SequenceNumber == "2" {
			return message.Retry(nil)
		}
		return message.Ack()
	})
	got, err := newRunner(t, h, lambda.Config{Concurrency: 1}).Run(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	// Shard t's record never started (its key waits), so it is reported too.
	if diff := cmp.Diff([]string{"2", "1"}, got); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	// The key's order stops at the retry: s/3 and even t/1 (same key, later)
	// wait for the redelivery, which keeps per-key order across attempts.
	if diff := cmp.Diff([]string{"s/1", "s/2"}, handled); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
}

// TestRunPanicIsolated checks a panic is logged with its stack and only its
// own record is affected.
func TestRunPanicIsolated(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	msgs := []message.Message{msg("s", "1", "a"), msg("s", "2", "b"), msg("s", "3", "c")}
	got, err := newRunner(t, script{"2": "panic"}, lambda.Config{}, logger).Run(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"2"}, got); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	out := buf.String()
	for _, want := range []string{`"msg":"lambdaadapter: handler panicked; treated as Retry"`, `"mode":"lambda"`, `"panic":"test panic"`, `"stack":"goroutine `, `runner_test.go`, `"sequence_number":"2"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunDeadline checks the cut-off: busy lanes at deadline-margin make the
// runner answer before the deadline with their records unsettled, records
// not started are not started, and a late settlement changes nothing.
func TestRunDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var started, late atomic.Int32
		var sawCancel atomic.Bool
		h := message.HandlerFunc(func(ctx context.Context, m *message.Message) message.Outcome {
			started.Add(1)
			switch m.PartitionKey {
			case "slow":
				time.Sleep(3 * time.Second) // cut off at 2s - 500ms
				return message.Ack()
			case "hung": // ignores its context, returns only when released
				<-ctx.Done()
				sawCancel.Store(true)
				<-release
				late.Add(1)
				return message.Ack()
			default:
				return message.Ack()
			}
		})
		msgs := []message.Message{
			msg("s", "1", "fast"), msg("s", "2", "slow"), msg("s", "3", "fast"),
			msg("s", "4", "hung"), msg("s", "5", "slow"), msg("s", "6", "other"),
		}
		r := newRunner(t, h, lambda.Config{Concurrency: 3, DeadlineMargin: 500 * time.Millisecond})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start := time.Now()
		got, err := r.Run(ctx, msgs)
		elapsed := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if elapsed != 1500*time.Millisecond {
			t.Errorf("answered after %v, want exactly deadline - margin = 1.5s", elapsed)
		}
		if diff := cmp.Diff([]string{"2"}, got); diff != "" {
			t.Errorf("failures (-want +got):\n%s", diff)
		}
		close(release)
		synctest.Wait()
		if !sawCancel.Load() || late.Load() != 1 {
			t.Errorf("hung handler: saw cancel %v, returned late %d times", sawCancel.Load(), late.Load())
		}
		time.Sleep(5 * time.Second) // let the slow handler return, long after the cut-off
		synctest.Wait()
		// slow #2 (seq 5) never starts: its key is busy until the cut-off.
		if n := started.Load(); n != 5 {
			t.Errorf("%d records started, want 5 (seq 5 must not start)", n)
		}
	})
}

// TestRunDeadlineKeepsEarlierSettlements checks that records of a key that
// settled before its next record hung at the cut-off count as settled: the
// response names the hung record, not the first of its run (a lane hands
// its settlements to the watermark a run at a time; Wait takes them).
func TestRunDeadlineKeepsEarlierSettlements(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := message.HandlerFunc(func(ctx context.Context, m *message.Message) message.Outcome {
			if m.SequenceNumber == "3" {
				<-ctx.Done()
				<-release
			}
			return message.Ack()
		})
		msgs := []message.Message{msg("s", "1", "k"), msg("s", "2", "k"), msg("s", "3", "k"), msg("s", "4", "k")}
		r := newRunner(t, h, lambda.Config{Concurrency: 2, DeadlineMargin: 500 * time.Millisecond})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		got, err := r.Run(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"3"}, got); diff != "" {
			t.Errorf("failures (-want +got):\n%s", diff)
		}
		close(release)
		synctest.Wait()
	})
}

// TestRunDeadlineAlreadyPassed checks that a batch arriving with less time
// than the margin is answered at once with every record unsettled.
func TestRunDeadlineAlreadyPassed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		h := message.HandlerFunc(func(context.Context, *message.Message) message.Outcome {
			calls.Add(1)
			return message.Ack()
		})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		got, err := newRunner(t, h, lambda.Config{DeadlineMargin: time.Second}).Run(ctx, []message.Message{msg("s", "1", "a"), msg("s", "2", "b")})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"1"}, got); diff != "" {
			t.Errorf("failures (-want +got):\n%s", diff)
		}
		if calls.Load() != 0 {
			t.Errorf("%d records started after the cut-off", calls.Load())
		}
	})
}

func TestNewRunnerValidates(t *testing.T) {
	e, err := engine.New(engine.Config{Handler: script{}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := engine.New(engine.Config{BatchHandler: message.BatchHandlerFunc(func(context.Context, []*message.Message) []message.Outcome { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []lambda.Config{{Engine: e, Concurrency: -1}, {Engine: e, DeadlineMargin: -time.Second}, {}, {Engine: batch}} {
		if _, err := lambda.NewRunner(cfg); err == nil || !strings.HasPrefix(err.Error(), "lambda: ") {
			t.Errorf("NewRunner(%+v) = %v, want an error", cfg, err)
		}
	}
}
