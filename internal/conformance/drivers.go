package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	lambdaadapter "github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/internal/getrecords"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// settleDeadline bounds a case in virtual time: far beyond any backoff or
// delay a case uses, so only a record that never settles reaches it.
const settleDeadline = 2 * time.Hour

// Lambda drives Lambda mode: the Function's Invoke behind a local event
// source for the source stream (batches of BatchSize records per shard,
// checkpointed by the partial batch response) and for the delay queue.
type Lambda struct {
	// BatchSize is the event source's batch size (default 10, so a case's
	// records span several invocations).
	BatchSize int
	// Recycle runs the adapter with WithRecycledMessages.
	Recycle bool
}

// Mode returns ModeLambda.
func (Lambda) Mode() lambdaadapter.Mode { return lambdaadapter.ModeLambda }

// Drive runs h in Lambda mode until the world settled.
func (d Lambda) Drive(t *testing.T, w *World, h lambdaadapter.Handler, opts []lambdaadapter.SharedOption) {
	t.Helper()
	if d.Recycle {
		opts = append(opts[:len(opts):len(opts)], lambdaadapter.WithRecycledMessages())
	}
	var fopts []lambdaadapter.FunctionOption
	for _, o := range append(w.Options(), opts...) {
		fopts = append(fopts, o)
	}
	a, err := lambdaadapter.NewFunction(h, fopts...)
	if err != nil {
		t.Fatalf("NewFunction: %v", err)
	}
	batch := d.BatchSize
	if batch <= 0 {
		batch = 10
	}
	src := &lambdaadaptertest.EventSource{
		StreamARN: Stream, Kinesis: w.Kinesis, BatchSize: batch, Timeout: time.Minute,
		QueueURL: DelayQueue, SQS: w.SQS,
	}
	deadline := time.Now().Add(settleDeadline)
	for !w.Settled(src.Checkpoint) {
		if time.Now().After(deadline) {
			t.Fatalf("lambda: not settled after %v (virtual)", settleDeadline)
		}
		st, err := src.Round(t.Context(), a.Invoke)
		if err != nil {
			t.Fatalf("lambda: event source: %v", err)
		}
		if st.Invocations == 0 {
			time.Sleep(time.Second) // the event source polls again
		}
	}
}

// ECS drives long-running mode: the Service's Run with the source stream,
// an in-memory lease store and one worker, stopped once the world settled.
// Its GetRecords answers come as the SDK with getrecords.Fast gives them
// (wireKinesis), so with Recycle every case also checks that no record is
// read after the consumer gave its answer's buffer back.
type ECS struct {
	// Recycle runs the adapter with WithRecycledMessages.
	Recycle bool
}

// Mode returns ModeECS.
func (ECS) Mode() lambdaadapter.Mode { return lambdaadapter.ModeECS }

// Drive runs h in long-running mode until the world settled, then stops
// the consumer and waits for Run to return.
func (d ECS) Drive(t *testing.T, w *World, h lambdaadapter.Handler, opts []lambdaadapter.SharedOption) {
	t.Helper()
	if d.Recycle {
		opts = append(opts[:len(opts):len(opts)], lambdaadapter.WithRecycledMessages())
	}
	store := lease.NewMemory()
	var all []lambdaadapter.ServiceOption
	for _, o := range w.Options() {
		all = append(all, o)
	}
	all = append(all, lambdaadapter.WithKinesisClient(wireKinesis{w.Kinesis}),
		lambdaadapter.WithStream(Stream),
		lambdaadapter.WithLeaseStore(store), lambdaadapter.WithOwnerID("worker-1"),
		lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()))
	for _, o := range opts {
		all = append(all, o)
	}
	a, err := lambdaadapter.NewService(h, all...)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	checkpoint := func(shard string) string {
		l, err := store.Get(context.Background(), lease.Key{Stream: Stream, ShardID: shard})
		if err != nil {
			return ""
		}
		return l.Checkpoint
	}
	deadline := time.Now().Add(settleDeadline)
	for !w.Settled(checkpoint) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("ecs: not settled after %v (virtual)", settleDeadline)
		}
		select {
		case err := <-done:
			t.Fatalf("ecs: Run returned early: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("ecs: Run: %v", err)
	}
}

// wireKinesis is the world's Kinesis whose GetRecords answers are sent over
// the wire and decoded as the consumer's SDK client decodes them: the
// records' data in one pooled buffer, which the consumer gives back once it
// finished with all of them, and which is then overwritten with garbage
// (getrecords.DecodeWire).
type wireKinesis struct{ *awsfake.Kinesis }

func (k wireKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	out, err := k.Kinesis.GetRecords(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	return getrecords.DecodeWire(out)
}
