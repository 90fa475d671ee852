package consumer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// fakeStream is an in-memory Kinesis stream: shards with records, closed
// shards with children, iterators of the form "shard/index".
type fakeStream struct {
	mu     sync.Mutex
	shards []*fakeShard
	seq    int
	calls  map[string]int
	read   int // records returned by GetRecords
	// expireEvery makes every n-th GetRecords answer ExpiredIteratorException.
	expireEvery int
	// throttle makes the next n GetRecords calls answer
	// ProvisionedThroughputExceededException.
	throttle int
	// getRecords logs every GetRecords call: its iterator and time.
	getRecords []fakeCall
}

type fakeCall struct {
	iter string
	at   time.Time
	err  bool
}

type fakeShard struct {
	id      string
	parents []string
	records []kinesistypes.Record
	closed  bool
}

func newFakeStream(shards int) *fakeStream {
	f := &fakeStream{calls: map[string]int{}}
	for i := range shards {
		f.shards = append(f.shards, &fakeShard{id: fmt.Sprintf("shardId-%012d", i)})
	}
	return f
}

func (f *fakeStream) shard(id string) *fakeShard {
	for _, s := range f.shards {
		if s.id == id {
			return s
		}
	}
	return nil
}

// put appends a record to a shard and returns its sequence number.
func (f *fakeStream) put(shardID, key, data string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.shard(shardID)
	if s.closed {
		panic("put to a closed shard")
	}
	f.seq++
	seq := fmt.Sprintf("4959%052d", f.seq)
	s.records = append(s.records, kinesistypes.Record{
		Data: []byte(data), PartitionKey: aws.String(key), SequenceNumber: aws.String(seq),
		ApproximateArrivalTimestamp: aws.Time(time.Now()),
	})
	return seq
}

// putNumbered appends n records with payloads r0, r1, ... to a shard, all
// with key "k" or, with distinctKeys, keys k0, k1, ...; it returns their
// sequence numbers.
func (f *fakeStream) putNumbered(shardID string, n int, distinctKeys bool) []string {
	seqs := make([]string, n)
	for i := range n {
		key := "k"
		if distinctKeys {
			key = fmt.Sprintf("k%d", i)
		}
		seqs[i] = f.put(shardID, key, fmt.Sprintf("r%d", i))
	}
	return seqs
}

// split closes parent and adds two children.
func (f *fakeStream) split(parent string) (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shard(parent).closed = true
	n := len(f.shards)
	a := &fakeShard{id: fmt.Sprintf("shardId-%012d", n), parents: []string{parent}}
	b := &fakeShard{id: fmt.Sprintf("shardId-%012d", n+1), parents: []string{parent}}
	f.shards = append(f.shards, a, b)
	return a.id, b.id
}

func (f *fakeStream) ListShards(_ context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["ListShards"]++
	// Two pages, to exercise pagination.
	start := 0
	if in.NextToken != nil {
		start, _ = strconv.Atoi(*in.NextToken)
	}
	end := min(start+2, len(f.shards))
	out := &kinesis.ListShardsOutput{}
	for _, s := range f.shards[start:end] {
		sh := kinesistypes.Shard{ShardId: aws.String(s.id), SequenceNumberRange: &kinesistypes.SequenceNumberRange{StartingSequenceNumber: aws.String("0")}}
		if s.closed {
			sh.SequenceNumberRange.EndingSequenceNumber = aws.String("9")
		}
		if len(s.parents) > 0 {
			sh.ParentShardId = aws.String(s.parents[0])
		}
		if len(s.parents) > 1 {
			sh.AdjacentParentShardId = aws.String(s.parents[1])
		}
		out.Shards = append(out.Shards, sh)
	}
	if end < len(f.shards) {
		out.NextToken = aws.String(strconv.Itoa(end))
	}
	return out, nil
}

func (f *fakeStream) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetShardIterator"]++
	s := f.shard(aws.ToString(in.ShardId))
	idx := 0
	switch in.ShardIteratorType {
	case kinesistypes.ShardIteratorTypeTrimHorizon:
	case kinesistypes.ShardIteratorTypeLatest:
		idx = len(s.records)
	case kinesistypes.ShardIteratorTypeAfterSequenceNumber, kinesistypes.ShardIteratorTypeAtSequenceNumber:
		want := aws.ToString(in.StartingSequenceNumber)
		idx = len(s.records)
		for i, r := range s.records {
			if aws.ToString(r.SequenceNumber) == want {
				idx = i
				if in.ShardIteratorType == kinesistypes.ShardIteratorTypeAfterSequenceNumber {
					idx++
				}
				break
			}
		}
	case kinesistypes.ShardIteratorTypeAtTimestamp:
		idx = len(s.records)
		for i, r := range s.records {
			if !r.ApproximateArrivalTimestamp.Before(*in.Timestamp) {
				idx = i
				break
			}
		}
	}
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(s.id + "/" + strconv.Itoa(idx))}, nil
}

func (f *fakeStream) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetRecords"]++
	call := fakeCall{iter: aws.ToString(in.ShardIterator), at: time.Now()}
	if f.throttle > 0 {
		f.throttle--
		call.err = true
		f.getRecords = append(f.getRecords, call)
		return nil, &kinesistypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard")}
	}
	f.getRecords = append(f.getRecords, call)
	if f.expireEvery > 0 && f.calls["GetRecords"]%f.expireEvery == 0 {
		return nil, &kinesistypes.ExpiredIteratorException{Message: aws.String("expired")}
	}
	id, idxs, _ := strings.Cut(aws.ToString(in.ShardIterator), "/")
	idx, _ := strconv.Atoi(idxs)
	s := f.shard(id)
	end := min(idx+int(aws.ToInt32(in.Limit)), len(s.records))
	out := &kinesis.GetRecordsOutput{Records: append([]kinesistypes.Record(nil), s.records[idx:end]...), MillisBehindLatest: aws.Int64(0)}
	f.read += end - idx
	if !(s.closed && end == len(s.records)) {
		out.NextShardIterator = aws.String(s.id + "/" + strconv.Itoa(end))
	} else {
		for _, c := range f.shards {
			for _, p := range c.parents {
				if p == s.id {
					out.ChildShards = append(out.ChildShards, kinesistypes.ChildShard{ShardId: aws.String(c.id)})
				}
			}
		}
	}
	return out, nil
}
