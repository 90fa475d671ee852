package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/lease"
)

type fakeLag struct{ behind map[string]int64 }

func (f fakeLag) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return &kinesis.GetShardIteratorOutput{ShardIterator: in.ShardId}, nil
}

func (f fakeLag) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	ms, ok := f.behind[*in.ShardIterator]
	if !ok {
		return &kinesis.GetRecordsOutput{MillisBehindLatest: aws.Int64(0)}, nil
	}
	return &kinesis.GetRecordsOutput{Records: []kinesistypes.Record{{}}, MillisBehindLatest: aws.Int64(ms)}, nil
}

func TestPrintLeases(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ls := []lease.Lease{
		{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000000"}, Owner: "w1", Counter: 7, Checkpoint: "49590338271490256608559692538361571095921575989136588898", RenewedAt: at},
		{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000001"}, Counter: 3, RenewedAt: at},
		{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000002"}, Owner: "w2", Counter: 12, Checkpoint: lease.ShardEnd, RenewedAt: at},
	}
	var b strings.Builder
	printLeases(t.Context(), &b, fakeLag{behind: map[string]int64{"shardId-000000000000": 90_000}}, "s", ls, 10*time.Second)
	out := b.String()
	for _, want := range []string{
		"SHARD", "OWNER", "CHECKPOINT", "COUNTER", "BEHIND",
		"shardId-000000000000  w1", "49590338271490256608559692538361571095921575989136588898  7", "2026-12-02T10:00:10Z", "1m30s",
		"shardId-000000000001  (free)  (none)", "0s (caught up)",
		"SHARD_END", "done",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
