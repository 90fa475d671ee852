package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/lease"
)

// cannedStream is a Kinesis of fixed answers for benchmarks: shards shards
// of perShard records each (512 B random data, a random partition key per
// record, as the end-to-end benchmark writes them), served limit records
// per GetRecords answer from slices built up front, so that what is measured
// is the consumer's own work from an answer to the checkpoint.
type cannedStream struct {
	shards  []string
	records map[string][]kinesistypes.Record
}

func newCannedStream(shards, perShard, size int) *cannedStream {
	rng := rand.New(rand.NewPCG(1, 2))
	c := &cannedStream{records: map[string][]kinesistypes.Record{}}
	at := time.Now()
	for s := range shards {
		id := shardID(s)
		c.shards = append(c.shards, id)
		recs := make([]kinesistypes.Record, perShard)
		for i := range recs {
			data := make([]byte, size)
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			recs[i] = kinesistypes.Record{
				Data:                        data,
				PartitionKey:                aws.String(fmt.Sprintf("%016x", rng.Uint64())),
				SequenceNumber:              aws.String(fmt.Sprintf("4959%052d", s*perShard+i+1)),
				ApproximateArrivalTimestamp: aws.Time(at),
			}
		}
		c.records[id] = recs
	}
	return c
}

func (c *cannedStream) ListShards(ctx context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	out := &kinesis.ListShardsOutput{}
	for _, id := range c.shards {
		out.Shards = append(out.Shards, kinesistypes.Shard{
			ShardId:             aws.String(id),
			SequenceNumberRange: &kinesistypes.SequenceNumberRange{StartingSequenceNumber: aws.String("0")},
		})
	}
	return out, nil
}

// Iterators are "<shard>/<offset>".
func (c *cannedStream) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(aws.ToString(in.ShardId) + "/0")}, nil
}

func (c *cannedStream) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	it := aws.ToString(in.ShardIterator)
	var id string
	var off int
	for i := len(it) - 1; i >= 0; i-- {
		if it[i] == '/' {
			id = it[:i]
			off, _ = strconv.Atoi(it[i+1:])
			break
		}
	}
	recs := c.records[id]
	end := min(off+int(aws.ToInt32(in.Limit)), len(recs))
	// A copy of the answer's records, as a decoded answer is new each time.
	out := &kinesis.GetRecordsOutput{
		Records:            append([]kinesistypes.Record(nil), recs[off:end]...),
		NextShardIterator:  aws.String(id + "/" + strconv.Itoa(end)),
		MillisBehindLatest: aws.Int64(0),
	}
	return out, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPipeline is the long-running mode's own cost per record, in the
// shape of the end-to-end benchmark (bench/e2e): 4 shards of 5,000 records,
// read 500 per answer from canned answers (no HTTP, no decoding), through
// readers, the channel, the lanes, settlement and checkpoints to the
// in-memory lease store, with a handler that only counts. It reports the
// process's CPU time per record (cpu-ns/record); the wall time is mostly
// the readers' pacing (5 calls per second per shard).
func BenchmarkPipeline(b *testing.B) {
	const shards, perShard = 4, 5_000
	k := newCannedStream(shards, perShard, 512)
	var cpu time.Duration
	runs := 0
	for b.Loop() {
		var n atomic.Int64
		done := make(chan struct{})
		h := message.HandlerFunc(func(ctx context.Context, m *message.Message) message.Outcome {
			if n.Add(1) == shards*perShard {
				close(done)
			}
			return message.Ack()
		})
		e, err := engine.New(engine.Config{Handler: h})
		if err != nil {
			b.Fatal(err)
		}
		c, err := New(Config{Stream: testStream, Kinesis: k, Store: lease.NewMemory(), Start: TrimHorizon(), Limit: 500, Owner: "w1", Engine: e})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		errc := make(chan error, 1)
		t0 := cpuTime()
		go func() { errc <- c.Run(ctx) }()
		select {
		case <-done:
		case err := <-errc:
			b.Fatalf("Run returned early: %v", err)
		}
		cancel()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - t0
		runs++
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(runs*shards*perShard), "cpu-ns/record")
}

// BenchmarkRegister is one answer of 500 records of 512 B (a random
// partition key each, no envelope) turned into registered deliveries: the
// messages, their delivery headers and the watermark entries, the reader's
// share of BenchmarkPipeline.
func BenchmarkRegister(b *testing.B) {
	k := newCannedStream(1, 500, 512)
	recs := k.records[k.shards[0]]
	c := newConsumer(b, Config{Kinesis: k}, handler(message.HandlerFunc(func(context.Context, *message.Message) message.Outcome { return message.Ack() })))
	s := testShard(b, c, k.shards[0])
	b.ReportAllocs()
	for b.Loop() {
		e := s.es.Reset("")
		var resume Position
		ds, spans, ref, ok := s.register(context.Background(), e, recs, nil, &resume)
		if !ok || len(spans) != 1 || spans[0].to != len(recs) {
			b.Fatalf("registered %v of %d records (ok %v)", spans, len(recs), ok)
		}
		drop(ds, spans)
		ref.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
