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
// closed shards to their children, and returns every record it saw. Records
// of one shard are in sequence-number order; shards are interleaved.
//
// It returns as soon as it has seen want records. Otherwise it reads until
// the stream has been quiet for the window quiet, which does not depend on
// how fast the machine is: the window starts only once a full pass over every
// open shard found each one at its tip (no records, MillisBehindLatest 0), it
// starts again whenever a record arrives, and it ends with a pass that began
// after it and still found nothing. Reading the records already there never
// counts against it. So a caller that expects exactly n records passes
// want = n+1 and a short quiet (say 300ms) to prove that no more are there,
// and a caller waiting for n records that something else is still writing
// passes want = n and a quiet as long as the longest pause between two of
// those writes may be. It also returns when every shard has ended, or when
// ctx is done (with what it has read so far). Each of these returns with
// fewer than want records logs why.
//
// Reading is capped at quiet + readCap (2 minutes): when records keep
// arriving without reaching want, or the stand-in cannot read up to the tip,
// for that long, ReadAll cannot tell whether more would come and fails the
// test with t.Fatalf. An API error fails the test with t.Fatalf.
func (e *Env) ReadAll(ctx context.Context, t testing.TB, streamName string, want int, quiet time.Duration) []Record {
	t.Helper()
	begin := time.Now()
	ctx, cancel := withReadCap(ctx, quiet)
	defer cancel()
	var (
		out       []Record
		order     []string               // shard ids in the order they were found
		iterators = map[string]*string{} // nil once a shard has ended
		q         = quietWindow{window: quiet}
	)
	// stop ends the read after err from the call what: hitting the cap
	// fails the test, the end of the caller's ctx returns what was read,
	// any other error fails the test.
	stop := func(what, shardID string, err error) []Record {
		t.Helper()
		where := streamName
		if shardID != "" {
			where += "/" + shardID
		}
		switch {
		case capped(ctx):
			t.Fatalf("standin: ReadAll of %s gave up after %v with %d of %d records: no full pass found every shard at its tip and then stayed quiet for %v (records kept arriving, or the stand-in is too slow to read up to the tip)",
				streamName, time.Since(begin).Round(time.Millisecond), len(out), want, quiet)
		case ctx.Err() != nil:
			t.Logf("standin: read %d of %d records from %s before the caller's context ended: %v", len(out), want, streamName, context.Cause(ctx))
		default:
			t.Fatalf("standin: %s of %s: %v", what, where, err)
		}
		return out
	}
	addShard := func(shardID string) error {
		if _, ok := iterators[shardID]; ok {
			return nil
		}
		it, err := e.Kinesis.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName:        aws.String(streamName),
			ShardId:           aws.String(shardID),
			ShardIteratorType: kinesistypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return err
		}
		order = append(order, shardID)
		iterators[shardID] = it.ShardIterator
		return nil
	}
	shards, err := e.listShards(ctx, streamName)
	if err != nil {
		return stop("list shards", "", err)
	}
	for _, s := range shards {
		if err := addShard(aws.ToString(s.ShardId)); err != nil {
			return stop("get shard iterator", aws.ToString(s.ShardId), err)
		}
	}
	for {
		// One pass: GetRecords once on every open shard, children found
		// on the way included.
		start := time.Now()
		got, open, drained := 0, 0, true
		for i := 0; i < len(order) && len(out) < want; i++ {
			shardID := order[i]
			it := iterators[shardID]
			if it == nil {
				continue
			}
			open++
			res, err := e.Kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it})
			if err != nil {
				return stop("get records", shardID, err)
			}
			for _, r := range res.Records {
				out = append(out, Record{ShardID: shardID, Record: r})
			}
			got += len(res.Records)
			if len(res.Records) > 0 || aws.ToInt64(res.MillisBehindLatest) > 0 {
				drained = false
			}
			iterators[shardID] = res.NextShardIterator
			if res.NextShardIterator == nil {
				for _, child := range res.ChildShards {
					if err := addShard(aws.ToString(child.ShardId)); err != nil {
						return stop("get shard iterator", aws.ToString(child.ShardId), err)
					}
				}
			}
		}
		switch {
		case len(out) >= want:
			return out
		case open == 0:
			t.Logf("standin: every shard of %s has ended after %d of %d records", streamName, len(out), want)
			return out
		case q.polled(start, drained):
			t.Logf("standin: read %d of %d records from %s; no more arrived in the %v after every shard was read up to its tip",
				len(out), want, streamName, quiet)
			return out
		case got == 0:
			if err := sleep(ctx, q.pause()); err != nil {
				return stop("wait for records", "", err)
			}
		}
	}
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
