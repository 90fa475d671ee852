package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/shardsettle/lambdaadapter"
)

// demoCommand is the optional JSON the demonstration handler obeys.
type demoCommand struct {
	Outcome string `json:"outcome"`
	SleepMS int    `json:"sleep_ms"`
}

// demoHandler returns the demonstration handler described in the command
// documentation.
func demoHandler(logger *slog.Logger) lambdaadapter.Handler {
	return lambdaadapter.HandlerFunc(func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		var cmd demoCommand
		_ = json.Unmarshal(m.Payload, &cmd) // not JSON: plain ack
		logger.LogAttrs(ctx, slog.LevelDebug, "record",
			slog.String("shard_id", m.ShardID), slog.String("sequence_number", m.SequenceNumber),
			slog.String("partition_key", m.PartitionKey), slog.Int("attempt", m.Attempt),
			slog.Int("bytes", len(m.Payload)), slog.String("command", cmd.Outcome))
		if cmd.SleepMS > 0 {
			t := time.NewTimer(time.Duration(cmd.SleepMS) * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return lambdaadapter.Retry(ctx.Err())
			}
		}
		switch cmd.Outcome {
		case "drop":
			return lambdaadapter.Drop(errors.New("demo: asked to drop"))
		case "retry":
			return lambdaadapter.Retry(errors.New("demo: asked to retry"))
		case "panic":
			panic("demo: asked to panic")
		default:
			return lambdaadapter.Ack()
		}
	})
}
