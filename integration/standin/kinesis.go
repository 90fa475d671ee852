package standin

import (
	"context"
	"crypto/md5"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// maxStreamName is the longest stream name Kinesis accepts.
const maxStreamName = 128

// Record is one Kinesis record read by ReadAll, with the shard it was read
// from.
type Record struct {
	// ShardID is the shard the record was read from, e.g.
	// shardId-000000000001.
	ShardID string
	kinesistypes.Record
}

// NewStream creates a provisioned stream with the given number of shards and
// a unique name, waits until it is ACTIVE, and returns its name and ARN. The
// stream is deleted (with its consumers) when the test and its subtests have
// finished. Any failure, including a stream not ACTIVE within 30 seconds,
// fails the test with t.Fatalf.
func (e *Env) NewStream(t testing.TB, shards int) (name, arn string) {
	t.Helper()
	if shards < 1 {
		t.Fatalf("standin: NewStream: shards = %d, want at least 1", shards)
	}
	name = uniqueName(t, maxStreamName)
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()
	_, err := e.Kinesis.CreateStream(ctx, &kinesis.CreateStreamInput{
		StreamName: aws.String(name),
		ShardCount: aws.Int32(int32(shards)),
		StreamModeDetails: &kinesistypes.StreamModeDetails{
			StreamMode: kinesistypes.StreamModeProvisioned,
		},
	})
	if err != nil {
		t.Fatalf("standin: create stream %s: %v", name, err)
	}
	t.Cleanup(func() {
		// t.Context() is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		_, err := e.Kinesis.DeleteStream(ctx, &kinesis.DeleteStreamInput{
			StreamName:              aws.String(name),
			EnforceConsumerDeletion: aws.Bool(true),
		})
		var missing *kinesistypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &missing) {
			t.Errorf("standin: delete stream %s: %v", name, err)
		}
	})
	for {
		out, err := e.Kinesis.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			t.Fatalf("standin: stream %s did not become ACTIVE: %v", name, err)
		}
		d := out.StreamDescriptionSummary
		if d.StreamStatus == kinesistypes.StreamStatusActive {
			return name, aws.ToString(d.StreamARN)
		}
		if err := sleep(ctx, pollInterval); err != nil {
			t.Fatalf("standin: stream %s still %s after %v", name, d.StreamStatus, setupTimeout)
		}
	}
}

// ReadAll reads the stream from TRIM_HORIZON on every shard, following
// closed shards to their children, until it has seen at least want records,
// the timeout has passed or ctx is done, and returns every record it saw.
// Records of one shard are in sequence-number order; shards are interleaved.
// It returns early only by seeing want records, so a caller that expects
// exactly n records can pass want = n+1 and a short timeout to prove that no
// more arrive. An API error fails the test with t.Fatalf.
func (e *Env) ReadAll(ctx context.Context, t testing.TB, streamName string, want int, timeout time.Duration) []Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		out       []Record
		order     []string               // shard ids in the order they were found
		iterators = map[string]*string{} // nil once a shard has ended
	)
	// result is what every return passes back once the reading has stopped.
	result := func() []Record {
		if len(out) < want {
			t.Logf("standin: read %d of %d records from %s before the %v timeout", len(out), want, streamName, timeout)
		}
		return out
	}
	addShard := func(shardID string) bool {
		if _, ok := iterators[shardID]; ok {
			return true
		}
		it, err := e.Kinesis.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName:        aws.String(streamName),
			ShardId:           aws.String(shardID),
			ShardIteratorType: kinesistypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			e.failUnlessDone(ctx, t, "get shard iterator", streamName, shardID, err)
			return false
		}
		order = append(order, shardID)
		iterators[shardID] = it.ShardIterator
		return true
	}
	shards, err := e.listShards(ctx, streamName)
	if err != nil {
		e.failUnlessDone(ctx, t, "list shards", streamName, "", err)
		return result()
	}
	for _, s := range shards {
		if !addShard(aws.ToString(s.ShardId)) {
			return result()
		}
	}
	for len(out) < want {
		got, open := 0, 0
		for i := 0; i < len(order) && len(out) < want; i++ {
			shardID := order[i]
			it := iterators[shardID]
			if it == nil {
				continue
			}
			open++
			res, err := e.Kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it})
			if err != nil {
				e.failUnlessDone(ctx, t, "get records", streamName, shardID, err)
				return result()
			}
			for _, r := range res.Records {
				out = append(out, Record{ShardID: shardID, Record: r})
			}
			got += len(res.Records)
			iterators[shardID] = res.NextShardIterator
			if res.NextShardIterator == nil {
				for _, child := range res.ChildShards {
					if !addShard(aws.ToString(child.ShardId)) {
						return result()
					}
				}
			}
		}
		if open == 0 {
			t.Logf("standin: every shard of %s has ended after %d of %d records", streamName, len(out), want)
			return out
		}
		if got == 0 && sleep(ctx, pollInterval) != nil {
			break
		}
	}
	return result()
}

// ShardOf returns the id of the open shard of the stream whose hash key range
// holds partitionKey (its MD5 hash, as Kinesis computes it when no explicit
// hash key is given). A failure fails the test with t.Fatalf.
func (e *Env) ShardOf(ctx context.Context, t testing.TB, streamName, partitionKey string) string {
	t.Helper()
	sum := md5.Sum([]byte(partitionKey))
	key := new(big.Int).SetBytes(sum[:])
	shards, err := e.listShards(ctx, streamName)
	if err != nil {
		t.Fatalf("standin: list shards of %s: %v", streamName, err)
	}
	for _, s := range shards {
		if s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil {
			continue // closed
		}
		lo, ok1 := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
		hi, ok2 := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
		if !ok1 || !ok2 {
			t.Fatalf("standin: shard %s of %s has a malformed hash key range %+v", aws.ToString(s.ShardId), streamName, *s.HashKeyRange)
		}
		if lo.Cmp(key) <= 0 && key.Cmp(hi) <= 0 {
			return aws.ToString(s.ShardId)
		}
	}
	t.Fatalf("standin: no open shard of %s holds partition key %q (hash key %s)", streamName, partitionKey, key)
	return ""
}

// listShards returns every shard of the stream, open and closed.
func (e *Env) listShards(ctx context.Context, streamName string) ([]kinesistypes.Shard, error) {
	var shards []kinesistypes.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(streamName)}
	for {
		out, err := e.Kinesis.ListShards(ctx, in)
		if err != nil {
			return nil, err
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			return shards, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// failUnlessDone fails the test for err unless ctx is done, in which case the
// caller returns what it has (a timeout is an answer, not an error).
func (e *Env) failUnlessDone(ctx context.Context, t testing.TB, what, streamName, shardID string, err error) {
	t.Helper()
	if ctx.Err() != nil {
		return
	}
	if shardID != "" {
		t.Fatalf("standin: %s of %s/%s: %v", what, streamName, shardID, err)
	}
	t.Fatalf("standin: %s of %s: %v", what, streamName, err)
}

// sleep waits for d or until ctx is done, and returns ctx.Err() in the
// latter case.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
