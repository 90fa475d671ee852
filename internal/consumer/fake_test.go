package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter/internal/engine"
	"github.com/shardsettle/lambdaadapter/internal/getrecords"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// stream is the test stream "s" in an in-memory Kinesis: the consumer
// reads it, and copies written back to it come round again.
type stream struct {
	*awsfake.Kinesis
	arn string
	// read counts the records GetRecords returned.
	read atomic.Int64
}

const testStream = "s"

func newStream(shards int) *stream {
	k := awsfake.NewKinesis()
	return &stream{Kinesis: k, arn: k.CreateStream(testStream, shards)}
}

// GetRecords counts the records it returns. They come as the SDK with
// getrecords.Fast gives them, sent over the wire and decoded into one
// pooled buffer, which the consumer gives back once it finished with every
// record (getrecords.DecodeWire): that buffer is overwritten with garbage
// when released, so a record read after it was given back fails the test.
func (f *stream) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	out, err := f.Kinesis.GetRecords(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	f.read.Add(int64(len(out.Records)))
	return getrecords.DecodeWire(out)
}

// shardID is the id of the i-th shard.
func shardID(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// put appends a record to a shard and returns its sequence number.
func (f *stream) put(shard, key, data string) string {
	return f.PutTo(testStream, shard, key, []byte(data))
}

// putNumbered appends n records with payloads r0, r1, ... to a shard, all
// with key "k" or, with distinctKeys, keys k0, k1, ...; it returns their
// sequence numbers.
func (f *stream) putNumbered(shard string, n int, distinctKeys bool) []string {
	seqs := make([]string, n)
	for i := range n {
		key := "k"
		if distinctKeys {
			key = fmt.Sprintf("k%d", i)
		}
		seqs[i] = f.put(shard, key, fmt.Sprintf("r%d", i))
	}
	return seqs
}

// fill puts perShard records into each of the first shards shards, keys
// key-0..key-6, payloads "<shard>-<i>"; it returns each shard's last
// sequence number.
func (f *stream) fill(shards, perShard int) map[string]string {
	last := map[string]string{}
	for s := range shards {
		id := shardID(s)
		for i := range perShard {
			last[id] = f.put(id, fmt.Sprintf("key-%d", i%7), fmt.Sprintf("%s-%d", id, i))
		}
	}
	return last
}

// recorder is a handler that records what it handled, per shard, and can
// be told what to return.
type recorder struct {
	mu      sync.Mutex
	handled map[string][]string // shard -> payloads in handling order
	order   []string            // shard/payload, global order
	calls   []call
	outcome func(m *message.Message) message.Outcome
}

// call is one handler call.
type call struct {
	shard, payload string
	attempt        int
	at             time.Time
}

func newRecorder() *recorder { return &recorder{handled: map[string][]string{}} }

func (r *recorder) HandleRecord(_ context.Context, m *message.Message) message.Outcome {
	r.mu.Lock()
	r.handled[m.ShardID] = append(r.handled[m.ShardID], string(m.Payload))
	r.order = append(r.order, m.ShardID+"/"+string(m.Payload))
	r.calls = append(r.calls, call{m.ShardID, string(m.Payload), m.Attempt, time.Now()})
	out := r.outcome
	r.mu.Unlock()
	if out != nil {
		return out(m)
	}
	return message.Ack()
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

// on returns how many records of shard were handled.
func (r *recorder) on(shard string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.handled[shard])
}

// times returns how often each payload was handled.
func (r *recorder) times() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := map[string]int{}
	for _, c := range r.calls {
		n[c.payload]++
	}
	return n
}

// attempts returns the attempts payload was handled with, in order.
func (r *recorder) attempts(payload string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, c := range r.calls {
		if c.payload == payload {
			out = append(out, c.attempt)
		}
	}
	return out
}

// waitFor advances the fake clock until cond holds or ten minutes pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 6000 {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// engineConfig is what tests give the engine: a handler (or batch handler)
// and the retry settings.
type engineConfig = engine.Config

// handler returns an engine configuration with h.
func handler(h message.Handler) engineConfig { return engineConfig{Handler: h} }

// run starts a consumer with cfg (the test stream's name filled in) and an
// engine of ec, and returns it with a function that stops it and checks
// Run's result.
func run(t *testing.T, cfg Config, ec engineConfig) (*Consumer, func()) {
	t.Helper()
	c := newConsumer(t, cfg, ec)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return c, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func newConsumer(t testing.TB, cfg Config, ec engineConfig) *Consumer {
	t.Helper()
	e, err := engine.New(ec)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Stream == "" {
		cfg.Stream = testStream
	}
	if cfg.CPUTime == nil {
		// The tests' workers share one process, whose CPU time says nothing
		// of each: without a clock of their own they publish none (zeroCPU)
		// and the leader plans as for workers without figures.
		cfg.CPUTime = zeroCPU
	}
	cfg.Engine = e
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newPublisher(t *testing.T, k publish.KinesisAPI) *publish.Publisher {
	t.Helper()
	p, err := publish.NewPublisher(k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func checkpointOf(t *testing.T, store lease.Store, shard string) string {
	t.Helper()
	l, err := store.Get(context.Background(), lease.Key{Stream: testStream, ShardID: shard})
	if err != nil {
		t.Fatal(err)
	}
	return l.Checkpoint
}

// hangingStore is a lease store whose Checkpoint calls hang until their
// context ends (a DynamoDB call that never answers), while hang is set.
type hangingStore struct {
	lease.Store
	hang   atomic.Bool
	hung   atomic.Int64
	renews atomic.Int64
}

func (h *hangingStore) Checkpoint(ctx context.Context, held lease.Lease, seq string, sub int) (lease.Lease, error) {
	if h.hang.Load() {
		h.hung.Add(1)
		<-ctx.Done()
		return lease.Lease{}, ctx.Err()
	}
	return h.Store.Checkpoint(ctx, held, seq, sub)
}

func (h *hangingStore) Renew(ctx context.Context, held lease.Lease) (lease.Lease, error) {
	h.renews.Add(1)
	return h.Store.Renew(ctx, held)
}

var errTest = errors.New("test")

// testShard returns a shard of c that is not run (the test drives it),
// with an engine session for c when it has none (stopped at the test's
// end).
func testShard(tb testing.TB, c *Consumer, id string) *shard {
	tb.Helper()
	if c.sess == nil {
		c.sess = c.cfg.Engine.Start(context.Background(), engine.SessionConfig{Mode: engine.ModeLongRunning, Lanes: 1})
		tb.Cleanup(func() { c.sess.Stop(context.Background(), time.Second) })
	}
	return c.newShard(lease.Lease{Key: lease.Key{Stream: testStream, ShardID: id}}, time.Now())
}

var _ = aws.String

// leasesOf returns a snapshot's leases.
func leasesOf(s lease.Snapshot, err error) ([]lease.Lease, error) { return s.Leases, err }
