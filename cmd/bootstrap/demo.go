package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/shardsettle/lambdaadapter"
)

// demoCommand is the optional JSON the demonstration handler obeys.
type demoCommand struct {
	// ID identifies the record in logs ("handled" lines), for tests that
	// count losses and duplicates.
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	SleepMS int    `json:"sleep_ms"`
	// DelayMS is the delay of "retry_after".
	DelayMS int `json:"delay_ms"`
	// Reply, when set, is published with Message.Reply before the outcome.
	Reply string `json:"reply"`
	// ReplyKey is the reply's partition key ("" lets the adapter resolve it).
	ReplyKey string `json:"reply_key"`
	// UntilAttempt, when above 0, limits Outcome to the attempts before it:
	// from attempt UntilAttempt on the record is acknowledged (a transient
	// failure). Sleep and reply apply on every attempt.
	UntilAttempt int `json:"until_attempt"`
}

// errOutage is the error of the Retry the demonstration handler returns
// while the outage file exists.
var errOutage = errors.New("demo: downstream outage (the outage file exists)")

// demoHandler returns the demonstration handler described in the command
// documentation. While a file named outageFile exists (when it is not ""),
// every record's outcome is Retry (a downstream outage).
func demoHandler(logger *slog.Logger, outageFile string) lambdaadapter.Handler {
	return lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		var cmd demoCommand
		_ = json.Unmarshal(m.Payload, &cmd) // not JSON: plain ack
		logger.LogAttrs(ctx, slog.LevelDebug, "record",
			slog.String("shard_id", m.ShardID), slog.String("sequence_number", m.SequenceNumber),
			slog.String("partition_key", m.PartitionKey), slog.Int("attempt", m.Attempt),
			slog.Int("bytes", len(m.Payload)), slog.String("id", cmd.ID), slog.String("command", cmd.Outcome))
		outcome, o := demoOutcome(ctx, m, cmd, outageFile)
		logger.LogAttrs(ctx, slog.LevelDebug, "record outcome",
			slog.String("shard_id", m.ShardID), slog.String("sequence_number", m.SequenceNumber),
			slog.Int("attempt", m.Attempt), slog.String("id", cmd.ID), slog.String("outcome", outcome))
		if outcome == "panic" {
			panic("demo: asked to panic")
		}
		return o
	})
}

// demoOutcome runs the command (sleep, reply) and returns what the handler
// returns, named as in the "record outcome" line: ack, drop, retry,
// retry_after, panic (the caller panics), or outage (a Retry while the
// outage file exists).
func demoOutcome(ctx context.Context, m *lambdaadapter.Message, cmd demoCommand, outageFile string) (string, lambdaadapter.Outcome) {
	if cmd.SleepMS > 0 {
		t := time.NewTimer(time.Duration(cmd.SleepMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "retry", lambdaadapter.Retry(ctx.Err())
		}
	}
	if cmd.Reply != "" {
		r := lambdaadapter.Reply{PartitionKey: cmd.ReplyKey, Payload: []byte(cmd.Reply)}
		r.Headers.Set("x-in-reply-to", m.SequenceNumber)
		if err := m.Reply(ctx, r); err != nil {
			return "retry", lambdaadapter.Retry(err)
		}
	}
	if outageFile != "" {
		if _, err := os.Stat(outageFile); err == nil {
			return "outage", lambdaadapter.Retry(errOutage)
		}
	}
	outcome := cmd.Outcome
	if cmd.UntilAttempt > 0 && m.Attempt >= cmd.UntilAttempt {
		outcome = "ack"
	}
	switch outcome {
	case "retry_after":
		return outcome, lambdaadapter.RetryAfter(time.Duration(cmd.DelayMS)*time.Millisecond, errors.New("demo: asked to retry later"))
	case "drop":
		return outcome, lambdaadapter.Drop(errors.New("demo: asked to drop"))
	case "retry":
		return outcome, lambdaadapter.Retry(errors.New("demo: asked to retry"))
	case "panic":
		return outcome, lambdaadapter.Outcome{}
	default:
		return "ack", lambdaadapter.Ack()
	}
}

// maxHashRounds bounds LAMBDAADAPTER_DEMO_HASH_ROUNDS.
const maxHashRounds = 1_000_000

// parseHashRounds parses LAMBDAADAPTER_DEMO_HASH_ROUNDS ("" is 0).
func parseHashRounds(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxHashRounds {
		return 0, fmt.Errorf("%s=%q: want a whole number from 0 to %d", envDemoHashRounds, v, maxHashRounds)
	}
	return n, nil
}

// withHashRounds returns h, or with rounds above 0 a handler that first
// hashes each record's payload rounds times with SHA-256, then runs h: a
// CPU cost in proportion to the record's bytes, for load tests (the scale
// soak in soak/). It stops hashing early when ctx is done.
func withHashRounds(h lambdaadapter.Handler, rounds int) lambdaadapter.Handler {
	if rounds <= 0 {
		return h
	}
	return lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		d := sha256.New()
		for i := range rounds {
			if i%256 == 0 && ctx.Err() != nil {
				break
			}
			d.Write(m.Payload)
		}
		var sum [sha256.Size]byte
		d.Sum(sum[:0])
		return h.HandleRecord(ctx, m)
	})
}
