package lambdaadapter_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
	"github.com/shardsettle/lambdaadapter/lease"
)

// A handler fails one record in the middle of a batch: the response names
// exactly that record, so Lambda checkpoints just before it.
func ExampleFunction_Invoke() {
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("user-1", []byte(`{"id":1}`))
	failing := b.Add("user-2", []byte(`{"id":2}`), "x-tenant", "acme")
	b.Add("user-3", []byte(`{"id":3}`))

	a, err := lambdaadapter.NewFunction(lambdaadapter.HandlerFunc(
		func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
			if m.Header("x-tenant") == "acme" {
				return lambdaadapter.Retry(errors.New("tenant database down"))
			}
			return lambdaadapter.Ack()
		}))
	if err != nil {
		panic(err)
	}
	resp, err := a.Invoke(context.Background(), b.JSON())
	if err != nil {
		panic(err)
	}
	fmt.Println(string(resp) == `{"batchItemFailures":[{"itemIdentifier":"`+failing+`"}]}`)
	fmt.Println(len(failing), "digits")
	// Output:
	// true
	// 56 digits
}

// JSON decodes payloads for the handler; one that does not decode is
// dropped as a poison record instead of blocking the shard.
func ExampleJSON() {
	type order struct {
		ID int `json:"id"`
	}
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("a", []byte(`{"id":1}`))
	b.Add("b", []byte(`garbage`))
	a, err := lambdaadapter.NewFunction(lambdaadapter.JSON(
		func(ctx context.Context, o order, m *lambdaadapter.Message) lambdaadapter.Outcome {
			fmt.Println("order", o.ID)
			return lambdaadapter.Ack()
		}))
	if err != nil {
		panic(err)
	}
	resp, _ := a.Invoke(context.Background(), b.JSON())
	fmt.Println(string(resp))
	// Output:
	// order 1
	// {"batchItemFailures":[]}
}

// A Service reads the stream itself. Here it reads an in-memory stream with
// in-memory leases (one instance holds every shard); in production it gets
// WithAWSConfig and WithLeaseTable, and Run's context ends on SIGTERM.
func ExampleNewService() {
	kin := lambdaadaptertest.NewKinesis()
	kin.CreateStream("orders", 2)
	for _, key := range []string{"user-1", "user-2", "user-3"} {
		kin.Put("orders", key, []byte("order of "+key))
	}

	ctx, stop := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		seen []string
	)
	s, err := lambdaadapter.NewService(lambdaadapter.HandlerFunc(
		func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
			mu.Lock()
			defer mu.Unlock()
			if seen = append(seen, string(m.Payload)); len(seen) == 3 {
				stop() // a graceful stop: checkpoints written, leases released
			}
			return lambdaadapter.Ack()
		}),
		lambdaadapter.WithStream("orders"),
		lambdaadapter.WithKinesisClient(kin),
		lambdaadapter.WithLeaseStore(lease.NewMemory()),
		lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()),
	)
	if err != nil {
		panic(err)
	}
	if err := s.Run(ctx); err != nil {
		panic(err)
	}
	slices.Sort(seen)
	fmt.Println(seen)
	// Output:
	// [order of user-1 order of user-2 order of user-3]
}

// A BatchHandler gets several records at once (a bulk write) and settles
// each one on its own: here every record with an odd payload length is
// retried in process once, then acknowledged.
func ExampleNewBatchService() {
	kin := lambdaadaptertest.NewKinesis()
	kin.CreateStream("events", 1)
	for i := range 5 {
		kin.Put("events", fmt.Sprint("k", i), []byte(fmt.Sprint("event-", i)))
	}
	ctx, stop := context.WithCancel(context.Background())
	var (
		mu      sync.Mutex
		settled = map[string]int{} // payload -> attempt that settled it
	)
	s, err := lambdaadapter.NewBatchService(lambdaadapter.BatchHandlerFunc(
		func(ctx context.Context, ms []*lambdaadapter.Message) []lambdaadapter.Outcome {
			mu.Lock()
			defer mu.Unlock()
			outs := make([]lambdaadapter.Outcome, len(ms))
			for i, m := range ms {
				if m.Payload[len(m.Payload)-1]%2 == 1 && m.Attempt == 1 {
					outs[i] = lambdaadapter.Retry(errors.New("bulk write rejected it"))
					continue
				}
				settled[string(m.Payload)] = m.Attempt
				outs[i] = lambdaadapter.Ack()
			}
			if len(settled) == 5 {
				stop()
			}
			return outs
		}),
		lambdaadapter.WithStream("events"),
		lambdaadapter.WithKinesisClient(kin),
		lambdaadapter.WithLeaseStore(lease.NewMemory()),
		lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()),
		lambdaadapter.WithBatchSize(100),
		lambdaadapter.WithRetryBackoff(time.Millisecond, 10*time.Millisecond),
	)
	if err != nil {
		panic(err)
	}
	if err := s.Run(ctx); err != nil {
		panic(err)
	}
	fmt.Println(settled)
	// Output:
	// map[event-0:1 event-1:2 event-2:1 event-3:2 event-4:1]
}
