package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

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
	snap := lease.Snapshot{
		Leases: []lease.Lease{
			{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000000"}, Owner: "w1", Counter: 7, Checkpoint: "49590338271490256608559692538361571095921575989136588898", RenewedAt: at},
			{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000001"}, Counter: 3, RenewedAt: at},
			{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000002"}, Owner: "w2", Counter: 12, Checkpoint: lease.ShardEnd, RenewedAt: at},
			{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000003"}, Owner: "w1", Counter: 4, Checkpoint: "100", SubSequence: 5, Handoff: "w2", RenewedAt: at},
		},
		Workers: []lease.Worker{
			{Stream: "s", Owner: "w1", Counter: 40, RenewedAt: at.Add(25 * time.Second)},
			{Stream: "s", Owner: "w2", Counter: 9, RenewedAt: at},
			{Stream: "s", Owner: "w3", Counter: 1},
		},
	}
	var b strings.Builder
	now := at.Add(30 * time.Second)
	printLeases(t.Context(), &b, fakeLag{behind: map[string]int64{"shardId-000000000000": 90_000}}, "s", snap, 10*time.Second, now)
	want := `SHARD                 OWNER   HANDOFF  CHECKPOINT                                                COUNTER  RENEWED               EXPIRES (owner clock)  BEHIND
shardId-000000000000  w1      -        49590338271490256608559692538361571095921575989136588898  7        2026-12-02T10:00:00Z  2026-12-02T10:00:10Z   1m30s
shardId-000000000001  (free)  -        (none)                                                    3        2026-12-02T10:00:00Z  -                      0s (caught up)
shardId-000000000002  w2      -        SHARD_END                                                 12       2026-12-02T10:00:00Z  2026-12-02T10:00:10Z   done
shardId-000000000003  w1      w2       100 (sub-sequence 5)                                      4        2026-12-02T10:00:00Z  2026-12-02T10:00:10Z   0s (caught up)

WORKER  COUNTER  HEARTBEAT             EXPIRES (worker clock)  LOOKS EXPIRED
w1      40       2026-12-02T10:00:25Z  2026-12-02T10:00:35Z    no
w2      9        2026-12-02T10:00:00Z  2026-12-02T10:00:10Z    yes
w3      1        -                     -                       ?
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestPrintLeasesNoWorkers(t *testing.T) {
	snap := lease.Snapshot{Leases: []lease.Lease{{Key: lease.Key{Stream: "s", ShardID: "shardId-000000000000"}, Counter: 0}}}
	var b strings.Builder
	printLeases(t.Context(), &b, fakeLag{}, "s", snap, 10*time.Second, time.Now())
	out := b.String()
	for _, want := range []string{"shardId-000000000000  (free)  -        (none)", "\n\nno registered workers\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
