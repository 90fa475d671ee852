package lambdaadapter_test

import (
	"context"
	"strings"
	"testing"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/internal/message"
	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

// writeOnly hides every call of a Kinesis client but PutRecord(s).
type writeOnly struct{ publish.KinesisAPI }

func TestModeWiring(t *testing.T) {
	h := lambdaadapter.HandlerFunc(noop)
	k := lambdaadaptertest.NewKinesis()
	if _, err := lambdaadapter.New(h, lambdaadapter.WithMode(lambdaadapter.ModeECS), lambdaadapter.WithKinesisClient(k)); err == nil || !strings.Contains(err.Error(), "WithStream") {
		t.Errorf("ECS without a stream: %v", err)
	}
	// A client that only writes cannot read the stream.
	if _, err := lambdaadapter.New(h, lambdaadapter.WithMode(lambdaadapter.ModeECS), lambdaadapter.WithStream("s"), lambdaadapter.WithKinesisClient(writeOnly{k})); err == nil || !strings.Contains(err.Error(), "GetRecords") {
		t.Errorf("ECS with a write-only client: %v", err)
	}
	ecs, err := lambdaadapter.New(h, lambdaadapter.WithMode(lambdaadapter.ModeECS), lambdaadapter.WithStream("s"))
	if err != nil {
		t.Fatal(err)
	}
	if ecs.Mode() != lambdaadapter.ModeECS || ecs.Consumer() == nil {
		t.Errorf("mode %v consumer %v", ecs.Mode(), ecs.Consumer())
	}
	if _, err := ecs.Invoke(t.Context(), []byte(`{"Records":[]}`)); err == nil {
		t.Error("Invoke on a long-running adapter succeeded")
	}
	lam, err := lambdaadapter.New(h, lambdaadapter.WithKinesisClient(k))
	if err != nil {
		t.Fatal(err)
	}
	if err := lam.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "long-running") {
		t.Errorf("Run in Lambda mode: %v", err)
	}
	bh := lambdaadapter.BatchHandlerFunc(func(context.Context, []*message.Message) []message.Outcome { return nil })
	b, err := lambdaadapter.NewBatch(bh, lambdaadapter.WithStream("s"), lambdaadapter.WithBatchSize(500))
	if err != nil || b.Mode() != lambdaadapter.ModeECS {
		t.Errorf("NewBatch: %v", err)
	}
	if _, err := lambdaadapter.NewBatch(bh, lambdaadapter.WithStream("s"), lambdaadapter.WithBatchSize(20000)); err == nil {
		t.Error("batch size 20000 accepted")
	}
	for in, want := range map[string]lambdaadapter.Mode{"": lambdaadapter.ModeLambda, "lambda": lambdaadapter.ModeLambda, "ecs": lambdaadapter.ModeECS} {
		if m, err := lambdaadapter.ParseMode(in); err != nil || m != want {
			t.Errorf("ParseMode(%q) = %v, %v", in, m, err)
		}
	}
	if _, err := lambdaadapter.ParseMode("k8s"); err == nil {
		t.Error("ParseMode(k8s) accepted")
	}
}
